package web

import (
	"encoding/base64"
	"net/http"

	"github.com/gpumem/gpumem/internal/analysis"
)

// The answers gpumem peak and gpumem oom give, for the page: the handlers
// only encode what internal/analysis computes.

// allocationView reports whether a view draws the Active Memory
// Timeline's allocations as its elements (ids are analysis item indices).
func allocationView(p *params, tl *timeline) bool {
	return p.view == "active" || p.view == "private" && tl.tl.Envelopes() == 0
}

type classesJSON struct {
	By     string   `json:"by"`
	Legend []string `json:"legend"`
	// Classes is one byte per element id (base64): its index in Legend.
	Classes string `json:"classes"`
}

// handleClasses answers /api/classes?by=category|stream: a class per
// allocation for "Colour by".
func (s *Server) handleClasses(w http.ResponseWriter, r *http.Request) {
	p, tl, ok := s.timelineParams(w, r, "cannot be coloured by category or stream")
	if !ok {
		return
	}
	if !allocationView(p, tl) {
		writeErr(w, http.StatusBadRequest, "view %q: colour by category or stream applies to the allocation timelines", p.view)
		return
	}
	by := r.URL.Query().Get("by")
	d, err := p.f.device(p.device).analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
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
	p, tl, ok := s.timelineParams(w, r, "has no peak answer")
	if !ok {
		return
	}
	if !allocationView(p, tl) {
		writeErr(w, http.StatusBadRequest, "view %q: the peak answer is about the allocation timelines", p.view)
		return
	}
	d, err := p.f.device(p.device).analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	q := r.URL.Query()
	var m analysis.Moment
	if x := q.Get("x"); x != "" {
		tl.axes()
		m = d.MomentAtTimestep(tl.toStep(floatParam(r, "x", 0), p.mode))
	} else {
		if m, err = d.Resolve(q.Get("at")); err != nil {
			writeErr(w, http.StatusBadRequest, "%v", err)
			return
		}
	}
	a := d.LiveAnswer(m, analysis.LiveOptions{Depth: intParam(r, "depth", 3), Top: intParam(r, "top", 20), Items: true})
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
	d, err := p.f.device(p.device).analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	a, err := d.OOMAnswer(analysis.OOMOptions{Capacity: uint64(max(0, intParam(r, "capacity", 0))), Top: intParam(r, "top", 10)})
	if err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	a.File = p.f.Name
	writeJSON(w, http.StatusOK, a)
}
