package web

import (
	"fmt"
	"net/http"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/units"
)

// handleFlame answers GET /api/flame?file&device&idx with the interactive
// flamegraph SVG (the one `gpumem flame peak` writes) of what is live
// after memory_viz event idx — the state view's selected event; idx -1 is
// before the first event — by memory category and stack.
func (s *Server) handleFlame(w http.ResponseWriter, r *http.Request) {
	p, dd, idx, ok := s.eventParams(w, r)
	if !ok {
		return
	}
	// The device's analysis is built once and shared with the peak and
	// OOM answers (a new one replayed the whole trace per request).
	dv, err := dd.analysisDevice()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", p.f.Name, err)
		return
	}
	m := analysis.Moment{Spec: "before the first event", Action: -1, Event: -1}
	if idx >= 0 {
		if m, err = dv.Resolve(fmt.Sprintf("e%d", dd.viz[idx])); err != nil {
			writeErr(w, http.StatusBadRequest, "%v", err)
			return
		}
		m.Spec = fmt.Sprintf("event %d", idx)
	}
	prof := dv.LiveProfile(m)
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "no-store")
	export.WriteFlameSVG(w, export.ProfileFlame(prof, export.StackOptions{}), export.FlameOptions{
		Title:    fmt.Sprintf("%s %s: live after %s", p.f.Name, p.f.Snap.DeviceName(dd.device), m.Spec),
		Subtitle: fmt.Sprintf("%s in %d allocations (requested bytes, by category and stack)", units.Human(prof.Bytes), prof.Count),
	})
}
