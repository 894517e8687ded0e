package web

import (
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
)

// TestTimeAxisOnFirstUse: the event axis's answers (windows, markers)
// leave the time axis unmade (a float64 per timestep: 75 MB on the 1 GB
// tile); the first answer in time mode makes it, and it spans the trace.
func TestTimeAxisOnFirstUse(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	d := s.DefaultDevice()
	tl := newTimeline(s, d, ViewActive, nil, nil)
	tl.window(windowQuery{W: 400, H: 200, Mode: "event", Detail: 100})
	tl.axes()
	if tl.stepTime != nil {
		t.Fatal("the event axis made the time axis")
	}
	lo, hi := tl.xRange("time")
	if tl.stepTime == nil || len(tl.stepTime) != tl.tl.Timesteps()+1 {
		t.Fatalf("time mode: time axis of %d steps, want %d", len(tl.stepTime), tl.tl.Timesteps()+1)
	}
	if !(hi > lo) {
		t.Fatalf("time axis [%v, %v]", lo, hi)
	}
}
