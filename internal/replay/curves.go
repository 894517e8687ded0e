package replay

import (
	"math"
	"slices"

	"github.com/gpumem/gpumem/internal/rules"
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
//
// The totals are not stored per event: every curveBlock events the running
// totals and each counter's min and max over the block are kept (about 2
// bytes per event), and a value inside a block is recomputed from the trace
// events themselves, which the snapshot holds anyway.
type Curves struct {
	events []snapshot.Event
	divs   *rules.Divisions
	init   Totals
	// cp[b] is the running totals (allocated, reserved, active,
	// requested; unclamped) before event b*curveBlock.
	cp [][4]int64
	// Events whose rounded size is not round_size(event size): allocations
	// live at the dump (their block's size) and frees of them. Sorted.
	ovIdx  []int32
	ovSize []uint64
	// Per counter, the min and max of unclamped values over each block
	// (bmin[k][b]) and over each group of curveGroup blocks (gmin[k][g]):
	// a range of blocks reads at most 2*curveGroup of the first and its
	// groups, where a segment tree over the blocks took twice the blocks'
	// room again, rounded up to a power of two (32 MiB on the 1 GB tile,
	// for 16 here).
	bmin, bmax [4][]int64
	gmin, gmax [4][]int64
}

const (
	curveBlock = 64
	curveGroup = 16
)

func newCurves(s *snapshot.Snapshot, device int, pause func()) *Curves {
	c := &Curves{divs: s.AllocatorSettings.Divisions()}
	if device >= 0 && device < len(s.Traces) {
		c.events = s.Traces[device].Events
	}
	events := c.events
	n := len(events)
	divs := c.divs

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
			req := s.Requested(b)
			end.Active += b.Size
			end.Requested += req
			if b.State == snapshot.BlockActiveAllocated {
				end.Allocated += b.Size
			}
			dumpSize[b.Addr] = b.Size
		}
	}
	// One pass: the last alloc at each address until its free_completed
	// (live ones at the end are the dump's blocks), the frees whose alloc
	// rounds differently from them, and the free_requested events of
	// allocs still live (they take the dump's size if the alloc does).
	liveAt := map[uint64]int32{} // addr -> last alloc event index still live
	override := map[int32]uint64{}
	var requested []allocFree // free_requested of allocs live so far
	for i := range events {
		pauseAt(pause, i)
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			liveAt[e.Addr] = int32(i)
		case snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
			j, ok := liveAt[e.Addr]
			if !ok {
				continue
			}
			if r := rules.RoundSize(events[j].Size, divs); r != rules.RoundSize(e.Size, divs) {
				override[int32(i)] = r
			}
			if e.Action == snapshot.ActionFreeCompleted {
				delete(liveAt, e.Addr)
			} else {
				if len(requested) == cap(requested) {
					requested = keepLive(requested, liveAt, events)
				}
				requested = append(requested, allocFree{j, int32(i)})
			}
		}
	}
	// The rounded size of a free is that of the alloc it ends: for allocs
	// live at the dump, the dump block's size.
	dumpOv := map[int32]uint64{}
	for addr, i := range liveAt {
		if sz, ok := dumpSize[addr]; ok && sz != rules.RoundSize(events[i].Size, divs) {
			override[i] = sz
			dumpOv[i] = sz
		}
	}
	for _, af := range requested {
		if sz, ok := dumpOv[af.alloc]; ok && liveAt[events[af.alloc].Addr] == af.alloc {
			if sz != rules.RoundSize(events[af.free].Size, divs) {
				override[af.free] = sz
			} else {
				delete(override, af.free)
			}
		}
	}
	for i := range override {
		c.ovIdx = append(c.ovIdx, i)
	}
	slices.Sort(c.ovIdx)
	c.ovSize = make([]uint64, len(c.ovIdx))
	for k, i := range c.ovIdx {
		c.ovSize[k] = override[i]
	}

	// Totals forward from zero (as two's complement, since the start is
	// not known yet), then shifted by the start: the dump's totals minus
	// the trace's net change.
	nb := (n + curveBlock - 1) / curveBlock
	c.cp = make([][4]int64, nb+1)
	for k := range 4 {
		c.bmin[k], c.bmax[k] = make([]int64, nb), make([]int64, nb)
	}
	var cur [4]int64
	ov := 0
	for b := 0; b < nb; b++ {
		pauseAt(pause, b*curveBlock)
		c.cp[b] = cur
		mn := [4]int64{math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MaxInt64}
		mx := [4]int64{math.MinInt64, math.MinInt64, math.MinInt64, math.MinInt64}
		for i := b * curveBlock; i < min(n, (b+1)*curveBlock); i++ {
			c.step(&cur, i, &ov)
			for k := range 4 {
				mn[k] = min(mn[k], cur[k])
				mx[k] = max(mx[k], cur[k])
			}
		}
		for k := range 4 {
			c.bmin[k][b], c.bmax[k][b] = mn[k], mx[k]
		}
	}
	c.cp[nb] = cur
	start := [4]int64{
		int64(end.Allocated) - cur[0], int64(end.Reserved) - cur[1],
		int64(end.Active) - cur[2], int64(end.Requested) - cur[3],
	}
	c.init = Totals{clamp(start[0]), clamp(start[1]), clamp(start[2]), clamp(start[3])}
	for b := range c.cp {
		for k := range 4 {
			c.cp[b][k] += start[k]
		}
	}
	ng := (nb + curveGroup - 1) / curveGroup
	for k := range 4 {
		bmin, bmax := c.bmin[k], c.bmax[k]
		for b := range bmin {
			bmin[b] += start[k]
			bmax[b] += start[k]
		}
		c.gmin[k], c.gmax[k] = make([]int64, ng), make([]int64, ng)
		for g := range ng {
			lo, hi := g*curveGroup, min(nb, (g+1)*curveGroup)
			c.gmin[k][g], c.gmax[k][g] = slices.Min(bmin[lo:hi]), slices.Max(bmax[lo:hi])
		}
	}
	return c
}

// allocFree pairs a free_requested event with its alloc.
type allocFree struct{ alloc, free int32 }

// step applies raw event i to the running totals; ov is the position in
// the override list, at or after i.
func (c *Curves) step(cur *[4]int64, i int, ov *int) {
	e := &c.events[i]
	rounded := func() int64 {
		for *ov < len(c.ovIdx) && int(c.ovIdx[*ov]) < i {
			*ov++
		}
		if *ov < len(c.ovIdx) && int(c.ovIdx[*ov]) == i {
			return int64(c.ovSize[*ov])
		}
		return int64(rules.RoundSize(e.Size, c.divs))
	}
	switch e.Action {
	case snapshot.ActionAlloc:
		r := rounded()
		cur[0] += r
		cur[2] += r
		cur[3] += int64(e.Size)
	case snapshot.ActionFreeRequested:
		cur[0] -= rounded()
	case snapshot.ActionFreeCompleted:
		cur[2] -= rounded()
		cur[3] -= int64(e.Size)
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		cur[1] += int64(e.Size)
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		cur[1] -= int64(e.Size)
	}
}

// replay calls fn with the totals after each event of [i0, i1), which lie
// in one block or run on from it.
func (c *Curves) replay(i0, i1 int, fn func(i int, cur *[4]int64)) {
	b := i0 / curveBlock
	cur := c.cp[b]
	ov, _ := slices.BinarySearch(c.ovIdx, int32(b*curveBlock))
	for i := b * curveBlock; i < i1; i++ {
		c.step(&cur, i, &ov)
		if i >= i0 {
			fn(i, &cur)
		}
	}
}

// foldBlocks folds into mn and mx each counter's min and max over the
// whole blocks [b, b1): the blocks up to a group's start, whole groups,
// then the blocks left.
func (c *Curves) foldBlocks(b, b1 int, mn, mx *[4]int64) {
	leaf := func(b int) {
		for k := range 4 {
			mn[k], mx[k] = min(mn[k], c.bmin[k][b]), max(mx[k], c.bmax[k][b])
		}
	}
	for ; b < b1 && b%curveGroup != 0; b++ {
		leaf(b)
	}
	for ; b+curveGroup <= b1; b += curveGroup {
		g := b / curveGroup
		for k := range 4 {
			mn[k], mx[k] = min(mn[k], c.gmin[k][g]), max(mx[k], c.gmax[k][g])
		}
	}
	for ; b < b1; b++ {
		leaf(b)
	}
}

func clamp(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}

func totalsOf(cur *[4]int64) Totals {
	return Totals{clamp(cur[0]), clamp(cur[1]), clamp(cur[2]), clamp(cur[3])}
}

func (c *Curves) at(i int) Totals {
	if i < 0 || len(c.events) == 0 {
		return c.init
	}
	i = min(i, len(c.events)-1)
	var t Totals
	c.replay(i, i+1, func(_ int, cur *[4]int64) { t = totalsOf(cur) })
	return t
}

// minMax returns each counter's min and max over events [i0, i1).
func (c *Curves) minMax(i0, i1 int) (mn, mx [4]int64) {
	for k := range 4 {
		mn[k], mx[k] = math.MaxInt64, math.MinInt64
	}
	scan := func(lo, hi int) {
		c.replay(lo, hi, func(_ int, cur *[4]int64) {
			for k := range 4 {
				mn[k] = min(mn[k], cur[k])
				mx[k] = max(mx[k], cur[k])
			}
		})
	}
	b0, b1 := i0/curveBlock, (i1-1)/curveBlock
	if b1-b0 <= 1 {
		scan(i0, i1)
		return
	}
	scan(i0, (b0+1)*curveBlock)
	scan(b1*curveBlock, i1)
	c.foldBlocks(b0+1, b1, &mn, &mx)
	return
}

func (c *Curves) downsample(i0, i1, buckets int) *Downsampled {
	n := len(c.events)
	i0, i1 = max(i0, 0), min(i1, n)
	out := &Downsampled{I0: i0, I1: i1}
	if i1 <= i0 || buckets <= 0 {
		out.Bounds = []int32{int32(i0)}
		return out
	}
	buckets = min(buckets, i1-i0)
	out.Buckets = buckets
	out.Bounds = rules.Buckets(i0, i1, buckets)
	series := [4]*[]uint64{&out.AllocatedMin, &out.ReservedMin, &out.ActiveMin, &out.RequestedMin}
	seriesMax := [4]*[]uint64{&out.AllocatedMax, &out.ReservedMax, &out.ActiveMax, &out.RequestedMax}
	for k := range series {
		*series[k] = make([]uint64, buckets)
		*seriesMax[k] = make([]uint64, buckets)
	}
	for b := 0; b < buckets; b++ {
		mn, mx := c.minMax(int(out.Bounds[b]), int(out.Bounds[b+1]))
		for k := range series {
			(*series[k])[b], (*seriesMax[k])[b] = clamp(mn[k]), clamp(mx[k])
		}
	}
	return out
}

// keepLive drops from requested the free_requested events of allocs no
// longer live (freed, or their address taken by a later alloc): only
// those of allocs live at the dump are read, and an alloc that stops
// being live never is again. Called when requested is full, it keeps the
// list near the number of allocs live with a free requested instead of
// every free_requested of the trace (38 MB of the 1 GB tile's viewer
// while its curves were made, at its peak).
func keepLive(requested []allocFree, liveAt map[uint64]int32, events []snapshot.Event) []allocFree {
	kept := requested[:0]
	for _, af := range requested {
		if liveAt[events[af.alloc].Addr] == af.alloc {
			kept = append(kept, af)
		}
	}
	if len(kept) > cap(kept)/2 {
		// Mostly live: room for as many again, so that the passes stay
		// O(1) an append.
		kept = slices.Grow(kept, cap(kept))
	}
	return kept
}
