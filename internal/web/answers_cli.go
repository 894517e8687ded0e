package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/steps"
	"github.com/gpumem/gpumem/internal/units"
)

// The answers gpumem diff, sim, steps and ranks give, for the page's
// Compare, What-if, Steps and Ranks views: each handler reads its
// parameters and calls the one function its subcommand calls
// (analysis.NewDiff, alloc.SimSnapshot, steps.Answer,
// analysis.RankOfDevice and SummarizeRanks), and writes the JSON exactly
// as the subcommand's --json prints it (indented), so that the two can be
// compared byte for byte.

// writeCLIJSON writes v as the subcommands' --json does.
func writeCLIJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = report.WriteJSON(w, v)
}

// readyFile is file ?name (an id) once decoded; on a mistake it answers
// the request and returns nil.
func (s *Server) readyFile(w http.ResponseWriter, r *http.Request, name string) *file {
	v := r.URL.Query().Get(name)
	id, err := strconv.Atoi(v)
	if v == "" {
		id, err = 0, nil
	}
	f := s.file(id)
	if err != nil || f == nil {
		writeErr(w, http.StatusNotFound, "no file %q", v)
		return nil
	}
	f.markDrawn()
	if err := f.wait(r.Context()); err != nil {
		writeErr(w, http.StatusUnprocessableEntity, "%s", loadErrText(f.Name, err))
		return nil
	}
	return f
}

// readyDevice is readyFile's file ?file and its device ?device (the
// file's default when absent); on a mistake it answers the request and
// returns ok false.
func (s *Server) readyDevice(w http.ResponseWriter, r *http.Request) (f *file, device int, ok bool) {
	if f = s.readyFile(w, r, "file"); f == nil {
		return nil, 0, false
	}
	device, ok = deviceOf(w, r, f, "device", f.defaultDevice())
	return f, device, ok
}

// readyAnalysis is the analysis of readyDevice's file and device; on a
// mistake it answers the request and returns nil.
func (s *Server) readyAnalysis(w http.ResponseWriter, r *http.Request) *analysis.Device {
	f, d, ok := s.readyDevice(w, r)
	if !ok {
		return nil
	}
	return analysisOf(w, f, d)
}

// deviceOf reads the device parameter name for f: absent, def; else one
// of the file's devices.
func deviceOf(w http.ResponseWriter, r *http.Request, f *file, name string, def int) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	d, err := strconv.Atoi(v)
	if err != nil || d < 0 {
		writeErr(w, http.StatusBadRequest, "bad %s %q", name, v)
		return 0, false
	}
	for _, have := range f.Snap.Devices() {
		if have == d {
			return d, true
		}
	}
	writeErr(w, http.StatusBadRequest, "%s: no device %d", f.Snap.Source.Name, d)
	return 0, false
}

// analysisOf is the store's analysis of device d of f; on an error it
// answers the request and returns nil.
func analysisOf(w http.ResponseWriter, f *file, d int) *analysis.Device {
	dv, err := f.device(d).analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", f.Name, err)
		return nil
	}
	return dv
}

// handleDiff answers /api/diff?a=ID&b=ID[&at=MOMENT][&depth=N]
// [&device_a=N][&device_b=N]: gpumem diff --json --at MOMENT A B.
func (s *Server) handleDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	at := q.Get("at")
	if at == "" {
		at = "peak"
	}
	if err := analysis.CheckMomentSpec(at); err != nil {
		writeErr(w, http.StatusBadRequest, "%v", err)
		return
	}
	qp := newQuery(r)
	depth := qp.int("depth", analysis.DefaultDiffDepth, 1, 64)
	if qp.bad(w) {
		return
	}
	var runs [2]analysis.DiffRun
	for i, name := range []string{"a", "b"} {
		f := s.readyFile(w, r, name)
		if f == nil {
			return
		}
		d, ok := deviceOf(w, r, f, "device_"+name, f.defaultDevice())
		if !ok {
			return
		}
		dv := analysisOf(w, f, d)
		if dv == nil {
			return
		}
		run, err := dv.RunAt(at)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "%v", err)
			return
		}
		runs[i] = run
	}
	writeCLIJSON(w, analysis.NewDiff(runs[0], runs[1], depth))
}

// handleSiteCurve answers /api/sitecurve?file=ID[&device=N][&depth=N]
// [&n=N][&frame=F...]: the bytes live from the diff's site with those
// frames (innermost first; none: the site without a stack) over the
// device's trace, in the buckets of /api/totals (analysis.SiteCurve), for
// the Compare view's highlight of a site in both runs.
func (s *Server) handleSiteCurve(w http.ResponseWriter, r *http.Request) {
	qp := newQuery(r)
	depth := qp.int("depth", analysis.DefaultDiffDepth, 1, 64)
	n := qp.int("n", 300, 1, MaxWidth)
	if qp.bad(w) {
		return
	}
	frames := r.URL.Query()["frame"]
	if len(frames) > depth {
		writeErr(w, http.StatusBadRequest, "%d frames for a site of at most %d (depth)", len(frames), depth)
		return
	}
	dv := s.readyAnalysis(w, r)
	if dv == nil {
		return
	}
	writeJSON(w, http.StatusOK, dv.SiteCurve(append([]string{}, frames...), depth, n))
}

// handleSim answers /api/sim?file=ID[&device=N][&config=STR | &sweep=1]
// [&capacity=SIZE|oom][&from_empty=0|1][&curve=N]: gpumem sim --json FILE
// with the same flags.
func (s *Server) handleSim(w http.ResponseWriter, r *http.Request) {
	f := s.readyFile(w, r, "file")
	if f == nil {
		return
	}
	q := r.URL.Query()
	d, ok := deviceOf(w, r, f, "device", -1)
	if !ok {
		return
	}
	o := alloc.SimOptions{Device: d, Sweep: q.Get("sweep") == "1" || q.Get("sweep") == "true"}
	qp := newQuery(r)
	o.Curve = qp.int("curve", 0, 0, alloc.MaxCurve)
	if qp.bad(w) {
		return
	}
	if v := q.Get("from_empty"); v != "" {
		o.FromEmptySet = true
		o.FromEmpty = v == "1" || v == "true"
	}
	switch c := q.Get("capacity"); c {
	case "":
	case "oom":
		o.CapacityOOM = true
	default:
		b, err := units.Parse(c)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "capacity: %v", err)
			return
		}
		o.Capacity = b
	}
	if c := q.Get("config"); c != "" {
		cfg := alloc.DefaultConfig()
		if c != "default" {
			var err error
			if cfg, err = alloc.ParseConfig(c); err != nil {
				writeErr(w, http.StatusBadRequest, "config: %v", err)
				return
			}
		}
		o.Config = &cfg
	}
	res, err := alloc.SimSnapshot(f.Snap, f.Snap.Source.Name, o)
	if err != nil {
		writeErr(w, http.StatusUnprocessableEntity, "%v", err)
		return
	}
	writeCLIJSON(w, res)
}

// handleSteps answers /api/steps?file=ID[&device=N]: gpumem steps --json.
func (s *Server) handleSteps(w http.ResponseWriter, r *http.Request) {
	dv := s.readyAnalysis(w, r)
	if dv == nil {
		return
	}
	res, err := steps.Answer(dv)
	if err != nil {
		writeErr(w, http.StatusUnprocessableEntity, "%v", err)
		return
	}
	writeCLIJSON(w, res)
}

// handleRanks answers /api/ranks: gpumem ranks --json over the files
// served (each at its default device, a file's rank from "rank N" in its
// name, else its position). Files that failed to decode are left out; a
// file whose row fails, or panics, is the answer's error.
func (s *Server) handleRanks(w http.ResponseWriter, r *http.Request) {
	var rows []analysis.RankRow
	for id := 0; ; id++ {
		f := s.file(id)
		if f == nil {
			break
		}
		if err := f.wait(r.Context()); err != nil {
			if r.Context().Err() != nil {
				return
			}
			continue // shown as failed in the file list
		}
		row, err := rankRow(f, id)
		if err != nil {
			writeErr(w, http.StatusUnprocessableEntity, "%v", err)
			return
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		writeErr(w, http.StatusUnprocessableEntity, "no snapshot served")
		return
	}
	writeCLIJSON(w, analysis.SummarizeRanks(rows))
}

// rankRow is file f's row; a panic is its error.
func rankRow(f *file, pos int) (row analysis.RankRow, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: internal error: %v", f.Name, p)
		}
	}()
	dv, err := f.device(f.defaultDevice()).analysisDevice()
	if err != nil {
		return row, fmt.Errorf("%s: %v", f.Name, err)
	}
	return analysis.RankOfDevice(dv, pos)
}

type momentJSON struct {
	Spec     string `json:"spec"`
	Event    int    `json:"event"`
	Timestep int    `json:"timestep"`
}

// handleMoment answers /api/moment?file&device&at=SPEC[,SPEC...]: where
// each moment (peak, end, eN, a time) lies on the Active Memory
// Timeline's timestep axis, for the Steps view's zoom to a step.
func (s *Server) handleMoment(w http.ResponseWriter, r *http.Request) {
	dv := s.readyAnalysis(w, r)
	if dv == nil {
		return
	}
	out := []momentJSON{}
	for _, spec := range strings.Split(r.URL.Query().Get("at"), ",") {
		m, err := dv.Resolve(spec)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "%v", err)
			return
		}
		out = append(out, momentJSON{m.Spec, m.Event, m.Timestep})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSites answers POST /api/sites with a JSON list of sites (each a
// list of frames, as the answers' JSON gives them): each site as every
// command prints it (analysis.SiteString), so that the page never
// re-implements that rule.
func (s *Server) handleSites(w http.ResponseWriter, r *http.Request) {
	var sites [][]string
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<20)).Decode(&sites); err != nil {
		writeErr(w, http.StatusBadRequest, "want a JSON list of frame lists: %v", err)
		return
	}
	out := make([]string, len(sites))
	for i, f := range sites {
		out[i] = analysis.SiteString(f)
	}
	writeJSON(w, http.StatusOK, out)
}
