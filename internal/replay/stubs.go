package replay

import "github.com/gpumem/gpumem/snapshot"

// Curves holds a device's totals after every raw trace event.
type Curves struct {
	allocated []uint64
}

// History is a device's Allocator State History; see NewHistory.
type History struct {
	viz []int32
}

func newCurves(s *snapshot.Snapshot, device int) *Curves   { panic("TODO") }
func (c *Curves) at(i int) Totals                          { panic("TODO") }
func (c *Curves) downsample(i0, i1, b int) *Downsampled    { panic("TODO") }
func newHistory(s *snapshot.Snapshot, device int) *History { panic("TODO") }
func (h *History) event(i int) EventInfo                   { panic("TODO") }
func (h *History) stateAt(i int) *State                    { panic("TODO") }
