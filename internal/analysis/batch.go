package analysis

import (
	"fmt"
	"math"
	"sort"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/snapshot"
)

// BatchScales are the scales `oom` replays (and `peak` with a capacity).
var BatchScales = []float64{0.75, 0.5, 0.25}

// BatchOutcome is the trace replayed with its batch-dependent allocations
// scaled.
type BatchOutcome struct {
	Scale              float64 `json:"scale"`
	PeakAllocatedBytes uint64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  uint64  `json:"peak_reserved_bytes"`
	// AvoidsOOM: every request fits, the recorded out-of-memory's
	// included (false too when a request beyond it fails).
	AvoidsOOM bool `json:"avoids_oom"`
	// RecordedOOM: the recorded out-of-memory's request still fails.
	RecordedOOM bool `json:"recorded_oom_fails"`
	// OOMs counts the requests that fail.
	OOMs int `json:"ooms"`
}

// BatchDependent says whether allocations the rule classifies grow with
// the batch: what the forward and backward passes make (activations,
// their temporaries, autograd's buffers, recomputed activations) and the
// inputs. Weights, gradients, optimizer state and the optimizer step's
// temporaries (all parameter-sized), workspaces and FSDP's gathered
// parameters do not.
func BatchDependent(r Rule) bool {
	switch r {
	case RuleForwardSaved, RuleForwardTemp, RuleForwardOOM, RuleInput, RuleInputOOM, RuleInputTemp,
		RuleLoss, RuleBackwardDetail, RuleRecompute, RuleDataLoader:
		return true
	}
	return false
}

// BatchRequests lists the device's trace as allocator requests with every
// batch-dependent allocation's size multiplied by scale (then rounded to a
// byte; the allocator model rounds it as PyTorch does): first the blocks
// live when recording began, in address order, then each allocation and
// free in trace order (blocks of private pools left out), with each
// recorded out-of-memory's request where it
// failed (scaled when the allocation before it is batch-dependent: the
// pass it failed in). Allocations whose category a user rule set scale
// by the rule the built-in classification found.
func (d *Device) BatchRequests(scale float64) []alloc.Request {
	items := d.Active
	ev := d.Events()
	sized := func(i int) uint64 {
		sz := items.Size(i)
		if BatchDependent(d.CategoryRule(i)) {
			sz = uint64(math.Round(float64(sz) * scale))
		}
		return max(sz, 1)
	}
	stream := func(i int) int64 {
		_, st, addr := d.itemSource(i)
		if st < 0 {
			st = 0
			if si := d.segmentAt(addr); si >= 0 {
				st = d.S.Segments[si].Stream
			}
		}
		return d.S.RawStream(st)
	}
	// Private pools (CUDA graphs) are left out, as the allocator model
	// leaves them out of every replay: their memory is the graph's.
	private := false
	for _, si := range d.segs {
		private = private || d.S.Segments[si].InPrivatePool()
	}
	skip := func(i int) bool {
		if !private {
			return false
		}
		_, _, addr := d.itemSource(i)
		si := d.segmentAt(addr)
		return si >= 0 && d.S.Segments[si].InPrivatePool()
	}
	var pre []int
	for i := range items.Len() {
		if items.Born(i) < 0 && !skip(i) {
			pre = append(pre, i)
		}
	}
	addrOf := func(i int) uint64 { _, _, a := d.itemSource(i); return a }
	sort.Slice(pre, func(a, b int) bool { return addrOf(pre[a]) < addrOf(pre[b]) })
	reqs := make([]alloc.Request, 0, len(pre)+2*items.Len())
	for _, i := range pre {
		reqs = append(reqs, alloc.Request{ID: int32(i), Size: sized(i), Stream: stream(i)})
	}
	n := len(d.Active.Events)
	act := make([]int32, n) // +i+1 born, -i-1 died at action k
	for i := range items.Len() {
		it := items.Item(i)
		if it.Born >= 0 && int(it.Born) < n {
			act[it.Born] = int32(i + 1)
		}
		if it.Died >= 0 && int(it.Died) < n {
			act[it.Died] = int32(-i - 1)
		}
	}
	// The recorded OOMs, by the action they follow.
	type oomAt struct {
		after int
		raw   int
	}
	var ooms []oomAt
	for r := range ev {
		if ev[r].Action == snapshot.ActionOOM {
			ooms = append(ooms, oomAt{d.Active.ActionAtEvent(r), r})
		}
	}
	lastBorn := -1
	addOOM := func(o oomAt) {
		sz := ev[o.raw].Size
		if lastBorn >= 0 && BatchDependent(d.CategoryRule(lastBorn)) {
			sz = uint64(math.Round(float64(sz) * scale))
		}
		reqs = append(reqs, alloc.Request{ID: -1, Size: max(sz, 1), Stream: d.S.RawStream(ev[o.raw].Stream), Failed: true})
	}
	k := 0
	for len(ooms) > 0 && ooms[0].after < 0 {
		addOOM(ooms[0])
		ooms = ooms[1:]
	}
	for ; k < n; k++ {
		switch x := act[k]; {
		case x > 0 && skip(int(x-1)):
			// A private pool's: its free finds no block and is skipped too.
		case x > 0:
			i := int(x - 1)
			lastBorn = i
			reqs = append(reqs, alloc.Request{ID: int32(i), Size: sized(i), Stream: stream(i)})
		case x < 0:
			reqs = append(reqs, alloc.Request{ID: int32(-x - 1), Free: true})
		}
		for len(ooms) > 0 && ooms[0].after == k {
			addOOM(ooms[0])
			ooms = ooms[1:]
		}
	}
	return reqs
}

// scalesWithBatch says whether any allocation of the trace scales with
// the batch.
func (d *Device) scalesWithBatch() bool {
	for i := range d.Active.Len() {
		if BatchDependent(d.CategoryRule(i)) {
			return true
		}
	}
	return false
}

// BatchCapacity is the capacity a batch what-if runs at: the one the
// first recorded out-of-memory implies (reserved + CUDA free then), else
// the given one (0: unlimited).
func (d *Device) BatchCapacity(given uint64) uint64 {
	if c, err := alloc.ImpliedCapacity(d.S, d.Index); err == nil {
		return c.Capacity
	}
	return given
}

// BatchWhatIf replays the trace with its batch-dependent allocations
// scaled by each of scales, under the recorded allocator settings, on a
// device of capacity bytes (0: unlimited; see BatchCapacity).
func (d *Device) BatchWhatIf(scales []float64, capacity uint64) ([]BatchOutcome, error) {
	cfg := alloc.ConfigFromSettings(d.S.AllocatorSettings)
	out := make([]BatchOutcome, 0, len(scales))
	for _, s := range scales {
		if !(s > 0) || s > 1e6 {
			return nil, fmt.Errorf("batch scale %g: want a number above 0", s)
		}
		r, err := alloc.ReplayRequests(cfg, capacity, d.BatchRequests(s))
		if err != nil {
			return nil, err
		}
		out = append(out, BatchOutcome{Scale: s, PeakAllocatedBytes: r.PeakAllocated, PeakReservedBytes: r.PeakReserved,
			AvoidsOOM: r.OOMs == 0, RecordedOOM: r.FailedOOM, OOMs: r.OOMs})
	}
	return out, nil
}
