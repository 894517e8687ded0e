package replay

import (
	"math/bits"
	"strconv"

	"github.com/gpumem/gpumem/snapshot"
)

// Curves holds a device's totals after every raw trace event; see
// NewCurves.
//
// Allocated and active bytes are rounded block sizes. The trace records
// requested sizes only, so an allocation still live in the dump uses its
// dump block's size and every other one the allocator's round_size of its
// requested size (512-byte multiples, or roundup_power2_divisions from the
// snapshot's allocator settings). Blocks that were not split (an
// oversize remainder kept whole) are therefore undercounted while freed
// before the dump.
type Curves struct {
	init                                   Totals
	allocated, reserved, active, requested []uint64
	idx                                    [4]*rangeMinMax
}

func newCurves(s *snapshot.Snapshot, device int) *Curves {
	c := &Curves{}
	var events []snapshot.Event
	if device >= 0 && device < len(s.Traces) {
		events = s.Traces[device].Events
	}
	n := len(events)
	divs := roundupDivisions(s.AllocatorSettings)

	// Rounded size of each alloc: the dump block's size when the
	// allocation is still live at the dump, else round_size(requested).
	dumpSize := map[uint64]uint64{}
	var end Totals
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		end.Reserved += seg.TotalSize
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			if b.State == snapshot.BlockInactive {
				continue
			}
			req := blockRequested(s, b)
			end.Active += b.Size
			end.Requested += req
			if b.State == snapshot.BlockActiveAllocated {
				end.Allocated += b.Size
			}
			dumpSize[b.Addr] = b.Size
		}
	}
	rounded := make([]uint64, n) // per alloc event
	liveAt := map[uint64]int{}   // addr -> last alloc event index still live
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			rounded[i] = roundSize(e.Size, divs)
			liveAt[e.Addr] = i
		case snapshot.ActionFreeCompleted:
			delete(liveAt, e.Addr)
		}
	}
	for addr, i := range liveAt {
		if sz, ok := dumpSize[addr]; ok {
			rounded[i] = sz
		}
	}
	// Totals forward from zero (as two's complement, since the start is
	// not known yet); the rounded size of a free is that of the alloc it
	// ends (or round_size of its size when the alloc is not in the trace).
	c.allocated = make([]uint64, n)
	c.reserved = make([]uint64, n)
	c.active = make([]uint64, n)
	c.requested = make([]uint64, n)
	allocSize := make(map[uint64]uint64, len(liveAt))
	var cur [4]int64 // allocated, reserved, active, requested
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			allocSize[e.Addr] = rounded[i]
			cur[0] += int64(rounded[i])
			cur[2] += int64(rounded[i])
			cur[3] += int64(e.Size)
		case snapshot.ActionFreeRequested:
			r, ok := allocSize[e.Addr]
			if !ok {
				r = roundSize(e.Size, divs)
			}
			cur[0] -= int64(r)
		case snapshot.ActionFreeCompleted:
			r, ok := allocSize[e.Addr]
			if !ok {
				r = roundSize(e.Size, divs)
			}
			delete(allocSize, e.Addr)
			cur[2] -= int64(r)
			cur[3] -= int64(e.Size)
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			cur[1] += int64(e.Size)
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			cur[1] -= int64(e.Size)
		}
		c.allocated[i], c.reserved[i] = uint64(cur[0]), uint64(cur[1])
		c.active[i], c.requested[i] = uint64(cur[2]), uint64(cur[3])
	}
	// The start is the dump's totals minus the trace's net change.
	start := [4]int64{
		int64(end.Allocated) - cur[0], int64(end.Reserved) - cur[1],
		int64(end.Active) - cur[2], int64(end.Requested) - cur[3],
	}
	c.init = Totals{clamp(start[0]), clamp(start[1]), clamp(start[2]), clamp(start[3])}
	for k, arr := range [4][]uint64{c.allocated, c.reserved, c.active, c.requested} {
		for i, v := range arr {
			arr[i] = clamp(int64(v) + start[k])
		}
	}
	c.idx = [4]*rangeMinMax{
		newRangeMinMax(c.allocated), newRangeMinMax(c.reserved),
		newRangeMinMax(c.active), newRangeMinMax(c.requested),
	}
	return c
}

func clamp(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

func (c *Curves) at(i int) Totals {
	if i < 0 || len(c.allocated) == 0 {
		return c.init
	}
	i = min(i, len(c.allocated)-1)
	return Totals{c.allocated[i], c.reserved[i], c.active[i], c.requested[i]}
}

func (c *Curves) downsample(i0, i1, buckets int) *Downsampled {
	n := len(c.allocated)
	i0, i1 = max(i0, 0), min(i1, n)
	out := &Downsampled{I0: i0, I1: i1}
	if i1 <= i0 || buckets <= 0 {
		out.Bounds = []int32{int32(i0)}
		return out
	}
	buckets = min(buckets, i1-i0)
	out.Buckets = buckets
	out.Bounds = make([]int32, buckets+1)
	series := [4]*[]uint64{&out.AllocatedMin, &out.ReservedMin, &out.ActiveMin, &out.RequestedMin}
	seriesMax := [4]*[]uint64{&out.AllocatedMax, &out.ReservedMax, &out.ActiveMax, &out.RequestedMax}
	for k := range series {
		*series[k] = make([]uint64, buckets)
		*seriesMax[k] = make([]uint64, buckets)
	}
	span := i1 - i0
	for b := 0; b <= buckets; b++ {
		out.Bounds[b] = int32(i0 + int(uint64(span)*uint64(b)/uint64(buckets)))
	}
	for b := 0; b < buckets; b++ {
		lo, hi := int(out.Bounds[b]), int(out.Bounds[b+1])
		for k := range series {
			mn, mx := c.idx[k].query(lo, hi)
			(*series[k])[b], (*seriesMax[k])[b] = mn, mx
		}
	}
	return out
}

// roundupDivisions returns the 16-entry roundup_power2_divisions table, or
// nil when no rounding beyond 512 bytes is configured.
func roundupDivisions(a *snapshot.AllocatorSettings) []int64 {
	if a == nil || len(a.RoundupPower2Divisions) == 0 {
		return nil
	}
	table := make([]int64, 16)
	any := false
	for _, d := range a.RoundupPower2Divisions {
		mb, err := strconv.ParseUint(d.IntervalMiB, 10, 64)
		if err != nil || mb == 0 {
			continue
		}
		i := bits.Len64(mb) - 1
		if i < 16 {
			table[i] = d.Divisions
			any = any || d.Divisions > 0
		}
	}
	if !any {
		return nil
	}
	return table
}

// roundSize is the caching allocator's round_size.
func roundSize(n uint64, divs []int64) uint64 {
	const minBlock = 512
	if n < minBlock {
		return minBlock
	}
	if divs != nil {
		idx := bits.Len64(n) - 1 - 20
		idx = max(0, min(idx, 15))
		d := divs[idx]
		if d > 1 && n > minBlock*uint64(d) {
			return roundupPower2NextDivision(n, uint64(d))
		}
	}
	return (n + minBlock - 1) / minBlock * minBlock
}

func roundupPower2NextDivision(n, d uint64) uint64 {
	if n <= 4 || d <= 1 || n&(n-1) == 0 {
		return n
	}
	floor := uint64(1) << (bits.Len64(n) - 1)
	step := floor >> (bits.Len64(d) - 1)
	if step == 0 {
		step = 2 * floor
	}
	if n%step == 0 {
		return n
	}
	return n&^(step-1) + step
}
