package web

import (
	"encoding/base64"
	"net/http"
	"strconv"

	"github.com/gpumem/gpumem/internal/analysis"
)

// The answers gpumem peak and gpumem oom give, for the page: the handlers
// only encode what internal/analysis computes.

// allocationView reports whether a view draws the Active Memory
// Timeline's allocations as its elements (ids are analysis item indices).
func allocationView(p *params, tl *timeline) bool {
	return p.view == "active" || p.view == "private" && tl.tl.Envelopes() == 0
}

// allocationParams reads a request about the allocation timelines: its
// parameters, timeline and the device's analysis. On a mistake it answers
// the request, saying that what (the thing asked for) exists for the
// allocation timelines only, and ok is false.
func (s *Server) allocationParams(w http.ResponseWriter, r *http.Request, what string) (p *params, tl *timeline, d *analysis.Device, ok bool) {
	p, tl, ok = s.timelineParams(w, r, "has no "+what)
	if !ok {
		return nil, nil, nil, false
	}
	if !allocationView(p, tl) {
		writeErr(w, http.StatusBadRequest, "view %q: %s is for the allocation timelines", p.view, what)
		return nil, nil, nil, false
	}
	d, err := p.f.device(p.device).analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return nil, nil, nil, false
	}
	return p, tl, d, true
}

type classesJSON struct {
	By     string   `json:"by"`
	Legend []string `json:"legend"`
	// Classes is one byte per element id (base64): its index in Legend.
	Classes string `json:"classes"`
}

// maxDepth and maxTop bound the depth and top parameters of the answers.
const (
	maxDepth = 1000
	maxTop   = 100000
)

// handleClasses answers /api/classes?by=category|stream (default
// category): a class per allocation for "Colour by".
func (s *Server) handleClasses(w http.ResponseWriter, r *http.Request) {
	_, _, d, ok := s.allocationParams(w, r, "colour by category or stream")
	if !ok {
		return
	}
	by := r.URL.Query().Get("by")
	if by == "" {
		by = "category"
	}
	legend, classes, err := d.Classes(by)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, classesJSON{By: by, Legend: legend, Classes: base64.StdEncoding.EncodeToString(classes)})
}

// handlePeak answers /api/peak: gpumem peak at ?at=SPEC (peak,
// reserved-peak, end, eN, a time) or at the timeline's ?x= (in ?mode's
// unit), with each site's allocation ids.
func (s *Server) handlePeak(w http.ResponseWriter, r *http.Request) {
	p, tl, d, ok := s.allocationParams(w, r, "the peak answer")
	if !ok {
		return
	}
	q := newQuery(r)
	x, depth, top := q.float("x", 0), q.int("depth", analysis.DefaultDepth, 0, maxDepth), q.int("top", analysis.DefaultTop, 0, maxTop)
	if q.bad(w) {
		return
	}
	var m analysis.Moment
	if q.v.Get("x") != "" {
		tl.axes()
		m = d.MomentAtTimestep(tl.toStep(x, p.mode))
	} else {
		var err error
		if m, err = d.Resolve(q.v.Get("at")); err != nil {
			writeErr(w, http.StatusBadRequest, "bad at: %v", err)
			return
		}
	}
	a := d.LiveAnswer(m, analysis.LiveOptions{Depth: depth, Top: top, Items: true})
	a.File = p.f.Name
	writeJSON(w, http.StatusOK, a)
}

// handleOOM answers /api/oom: gpumem oom for the device (?capacity in
// bytes when known).
func (s *Server) handleOOM(w http.ResponseWriter, r *http.Request) {
	p, ok := s.params(w, r)
	if !ok {
		return
	}
	q := newQuery(r)
	var capacity uint64
	if v := q.v.Get("capacity"); v != "" {
		var err error
		if capacity, err = strconv.ParseUint(v, 10, 64); err != nil {
			q.fail("capacity", "a size in bytes")
		}
	}
	top := q.int("top", analysis.DefaultTop, 0, maxTop)
	if q.bad(w) {
		return
	}
	d, err := p.f.device(p.device).analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	a, err := d.OOMAnswer(analysis.OOMOptions{Capacity: capacity, Top: top})
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	a.File = p.f.Name
	writeJSON(w, http.StatusOK, a)
}

type fragCurveJSON struct {
	// Xs are the points in the request's x unit; at each, the headline
	// fragmentation and the free cached bytes with the largest free block.
	Xs       []float64 `json:"xs"`
	Headline []float64 `json:"headline"`
	Free     []uint64  `json:"free"`
	Largest  []uint64  `json:"largest"`
}

// handleFragCurve answers /api/fragcurve?x0&x1&w: the fragmentation
// headline at up to w/6 (at most 300) evenly spaced points of the window.
func (s *Server) handleFragCurve(w http.ResponseWriter, r *http.Request) {
	p, tl, d, ok := s.allocationParams(w, r, "the fragmentation curve")
	if !ok {
		return
	}
	q := newQuery(r)
	x0, x1, width := q.float("x0", 0), q.float("x1", 0), q.int("w", 600, 0, maxPixels)
	if q.bad(w) {
		return
	}
	if !(x1 > x0) {
		writeErr(w, http.StatusBadRequest, "bad x0 and x1 (%v, %v): want x0 < x1", x0, x1)
		return
	}
	n := min(max(width/6, 2), 300)
	tl.axes()
	out := fragCurveJSON{}
	actions := make([]int, n)
	for j := range actions {
		// Interpolated without x1-x0, which overflows for ±1e308.
		f := float64(j) / float64(n-1)
		x := x0*(1-f) + x1*f
		out.Xs = append(out.Xs, x)
		actions[j] = d.MomentAtTimestep(tl.toStep(x, p.mode)).Action
	}
	for _, f := range d.FragmentationCurve(actions) {
		out.Headline = append(out.Headline, f.Headline)
		out.Free = append(out.Free, f.Free)
		out.Largest = append(out.Largest, f.LargestFreeBlock)
	}
	writeJSON(w, http.StatusOK, out)
}
