package web

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/snapshot"
)

// offlineStates is the state history an HTML page embeds, all of it
// computed here by replay.History (the page only applies it and draws):
// the state at the end of the trace, per event what undoing it changes,
// and per moment the totals /api/state answers.
type offlineStates struct {
	// End is the state after the last event.
	End offlineStep `json:"end"`
	// Steps[i] turns the state after event i into the state before it.
	Steps []offlineStep `json:"steps"`
	// Totals hold, per moment from before the first event (-1) to after
	// the last, the first value and then differences from the previous
	// moment (small numbers, so the page stays small).
	Totals map[string][]float64 `json:"totals"`
}

// offlineStep lists segments and blocks to remove (by address) and to set.
// A block carries the address of the segment it is drawn in, so that the
// page groups without knowing the allocator's rules.
type offlineStep struct {
	SegGone   []float64   `json:"sg,omitempty"`
	Segs      [][]float64 `json:"s,omitempty"` // addr, size, stream, version[, private pool id]
	BlockGone []float64   `json:"bg,omitempty"`
	Blocks    [][6]any    `json:"b,omitempty"` // addr, size, requested, pending, version, segment addr
}

// offlineTotalNames are the totals the page shows (stateJSON's names).
var offlineTotalNames = []string{"allocated", "reserved", "blockBytes", "rounding", "free", "largestFree", "fragmentation"}

// buildOfflineStates walks h from the end of the trace back to before the
// first event (replay's Walk: one undo per step).
func buildOfflineStates(h *replay.History) *offlineStates {
	n := h.Len()
	out := &offlineStates{Steps: make([]offlineStep, n), Totals: map[string][]float64{}}
	cols := make([][]float64, len(offlineTotalNames))
	for k := range cols {
		cols[k] = make([]float64, n+1)
	}
	h.Walk(func(c *replay.StateChange) {
		t := &c.Totals
		vals := []float64{float64(t.Allocated), float64(t.Reserved), float64(t.RealAllocated), float64(t.RoundingWaste),
			float64(t.FreeBytes), float64(t.LargestFree), math.Round(1e6*rules.Fragmentation(t.LargestFree, t.FreeBytes)) / 1e6}
		for k, v := range vals {
			cols[k][c.Index+1] = v
		}
		d := offlineStep{SegGone: addrs(c.SegmentsGone), BlockGone: addrs(c.BlocksGone)}
		for _, sg := range c.Segments {
			v := []float64{float64(sg.Addr), float64(sg.Size), float64(sg.Stream), float64(sg.Version)}
			if snapshot.IsPrivatePool(sg.PoolID) {
				v = append(v, float64(sg.PoolID[0]), float64(sg.PoolID[1]))
			}
			d.Segs = append(d.Segs, v)
		}
		for _, b := range c.Blocks {
			if !b.InSegment {
				// Counted in the totals, not drawn.
				d.BlockGone = append(d.BlockGone, float64(b.Addr))
				continue
			}
			d.Blocks = append(d.Blocks, [6]any{float64(b.Addr), float64(b.Size), float64(b.Requested), b.PendingFree, b.Version, float64(b.Segment)})
		}
		// Walk reports in map order; the page is the same for the same
		// snapshot.
		slices.Sort(d.SegGone)
		slices.Sort(d.BlockGone)
		slices.SortFunc(d.Segs, func(x, y []float64) int { return cmp.Compare(x[0], y[0]) })
		slices.SortFunc(d.Blocks, func(x, y [6]any) int { return cmp.Compare(x[0].(float64), y[0].(float64)) })
		if c.Index == n-1 {
			out.End = d
		} else {
			out.Steps[c.Index+1] = d
		}
	})
	for k, name := range offlineTotalNames {
		c := cols[k]
		d := make([]float64, len(c))
		for i := range c {
			if i == 0 {
				d[i] = c[i]
			} else {
				// Fragmentation differences are rounded like its values.
				d[i] = math.Round(1e6*(c[i]-c[i-1])) / 1e6
			}
		}
		out.Totals[name] = d
	}
	return out
}

func addrs(a []uint64) []float64 {
	out := make([]float64, len(a))
	for i, v := range a {
		out[i] = float64(v)
	}
	return out
}
