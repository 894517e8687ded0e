package replay

import "github.com/gpumem/gpumem/snapshot"

// Timeline is one memory_viz timeline of one device; see NewTimeline.
type Timeline struct {
	elems     []element
	timesteps int
	peak      uint64
}

type element struct{}

// Curves holds a device's totals after every raw trace event.
type Curves struct {
	allocated []uint64
}

// History is a device's Allocator State History; see NewHistory.
type History struct {
	viz []int32
}

func computeStats(s *snapshot.Snapshot, device int, kind Kind, maxEntries int) Stats {
	panic("TODO")
}
func newTimeline(s *snapshot.Snapshot, device int, kind Kind) *Timeline { panic("TODO") }
func (t *Timeline) query(t0, t1 float64, w, h int, y0, y1 float64, o QueryOptions) *Frame {
	panic("TODO")
}
func (t *Timeline) hitTest(x, y float64) (int, bool)       { panic("TODO") }
func (t *Timeline) offsetAt(i int, x float64) float64      { panic("TODO") }
func (t *Timeline) element(i int) ElementInfo              { panic("TODO") }
func (t *Timeline) context(i int) string                   { panic("TODO") }
func (t *Timeline) search(a, f string) []int               { panic("TODO") }
func newCurves(s *snapshot.Snapshot, device int) *Curves   { panic("TODO") }
func (c *Curves) at(i int) Totals                          { panic("TODO") }
func (c *Curves) downsample(i0, i1, b int) *Downsampled    { panic("TODO") }
func newHistory(s *snapshot.Snapshot, device int) *History { panic("TODO") }
func (h *History) event(i int) EventInfo                   { panic("TODO") }
func (h *History) stateAt(i int) *State                    { panic("TODO") }
