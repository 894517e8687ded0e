package replay

import (
	"slices"
)

// StateChange is what one step of Walk changed in the state the
// Allocator State History draws, and the totals after it.
type StateChange struct {
	Index        int // the state is the one after this event (-1: before the first)
	Segments     []SegmentState
	SegmentsGone []uint64 // start addresses
	Blocks       []DrawnBlock
	BlocksGone   []uint64
	Totals       StateTotals
}

// DrawnBlock is a block and the segment it is drawn in (Segment: its start
// address; InSegment false when no segment holds it, as StateBlock's -1).
type DrawnBlock struct {
	StateBlock
	Segment   uint64
	InSegment bool
}

// StateTotals are State's totals.
type StateTotals struct {
	Allocated, Reserved, RealAllocated, RoundingWaste, FreeBytes, LargestFree uint64
}

// Walk calls fn for every state from the dump's (Len()-1) back to before the
// first event (-1), with the changes from the previous call (the first has
// the whole state), undoing one event per step. The totals are StateAt's;
// the segments are keyed by start address, so two segments starting at
// one address (only inconsistent traces have them) are drawn as one.
// O(n log S) for n events and S blocks when segments hold few blocks each.
func (h *History) Walk(fn func(c *StateChange)) {
	k := newWalker(h)
	n := len(h.viz)
	c := &StateChange{Index: n - 1}
	k.resync(c)
	fn(c)
	var touched []uint64
	k.w.segs.touched = &touched
	for i := n - 1; i >= 0; i-- {
		touched = touched[:0]
		c = &StateChange{Index: i - 1}
		a := h.events[h.viz[i]].Addr
		h.undo(k.w, i)
		if len(k.w.segs.dups) > 0 {
			k.resync(c)
		} else {
			k.step(c, a, touched)
		}
		fn(c)
	}
}

// walker keeps, beside the work state being undone, what was last reported
// of it and the per-segment free space, so that a step costs what it
// changes.
type walker struct {
	h      *History
	w      *work
	starts []uint64 // segment starts, sorted
	addrs  []uint64 // block addresses, sorted
	segs   map[uint64]segRec
	blocks map[uint64]blockRef
	blockS map[uint64]uint64 // block -> segment start it was reported in (absent: none)
	stat   map[uint64]segFree
	gaps   map[uint64]int // how many segments have each largest gap
	tot    StateTotals
	cover  uint64 // block bytes inside segments
}

type segFree struct{ covered, gap uint64 }

func newWalker(h *History) *walker {
	return &walker{h: h, w: h.baseWork()}
}

// resync rebuilds everything from the work state and reports every
// difference from what was reported before.
func (k *walker) resync(c *StateChange) {
	w := k.w
	oldSegs, oldBlocks, oldS := k.segs, k.blocks, k.blockS
	k.segs = make(map[uint64]segRec, w.segs.byStart.len())
	k.starts = k.starts[:0]
	w.segs.byStart.each(func(s segRec) {
		k.segs[s.addr] = s
		k.starts = append(k.starts, s.addr)
	})
	slices.Sort(k.starts)
	k.blocks = make(map[uint64]blockRef, w.blocks.len())
	k.blockS = make(map[uint64]uint64, w.blocks.len())
	k.addrs = k.addrs[:0]
	k.tot = StateTotals{}
	w.blocks.each(func(a uint64, r blockRef) {
		k.blocks[a] = r
		k.addrs = append(k.addrs, a)
		k.addBlockTotals(r, 1)
	})
	slices.Sort(k.addrs)
	for _, s := range k.segs {
		k.tot.Reserved += s.size
	}
	for a, s := range k.segs {
		if old, ok := oldSegs[a]; !ok || old != s {
			c.Segments = append(c.Segments, k.segState(s))
		}
	}
	for a := range oldSegs {
		if _, ok := k.segs[a]; !ok {
			c.SegmentsGone = append(c.SegmentsGone, a)
		}
	}
	for a, r := range k.blocks {
		st, in := k.segmentOf(a)
		if in {
			k.blockS[a] = st
		}
		ost, oin := oldS[a]
		if old, ok := oldBlocks[a]; !ok || old != r || ost != st || oin != in {
			c.Blocks = append(c.Blocks, k.drawn(a, r, st, in))
		}
	}
	for a := range oldBlocks {
		if _, ok := k.blocks[a]; !ok {
			c.BlocksGone = append(c.BlocksGone, a)
		}
	}
	k.stat = make(map[uint64]segFree, len(k.segs))
	k.gaps = map[uint64]int{}
	k.cover = 0
	for _, a := range k.starts {
		k.setStat(a)
	}
	k.totals(c)
}

// step applies the undo of one event: the block at a and the segments
// whose starts are in touched may have changed.
func (k *walker) step(c *StateChange, a uint64, touched []uint64) {
	w := k.w
	dirty := map[uint64]bool{}
	// Segments: the ranges they covered before and cover now are where
	// blocks may change segment.
	type span struct{ lo, hi uint64 }
	var spans []span
	for _, s := range touched {
		old, had := k.segs[s]
		cur, has := w.segs.byStart.get(s)
		if had == has && old == cur {
			continue
		}
		if had {
			k.dropStat(s)
			delete(k.segs, s)
			k.starts = sortedRemove(k.starts, s)
			k.tot.Reserved -= old.size
			spans = append(spans, span{old.addr, old.addr + old.size})
		}
		if has {
			k.segs[s] = cur
			k.starts = sortedInsert(k.starts, s)
			k.tot.Reserved += cur.size
			spans = append(spans, span{cur.addr, cur.addr + cur.size})
			c.Segments = append(c.Segments, k.segState(cur))
			dirty[s] = true
		} else {
			c.SegmentsGone = append(c.SegmentsGone, s)
		}
	}
	// The block at a.
	old, had := k.blocks[a]
	cur, has := w.blocks.get(a)
	reported := false
	if had != has || old != cur {
		reported = true
		if st, ok := k.blockS[a]; ok {
			dirty[st] = true
		}
		if had {
			k.addBlockTotals(old, -1)
			delete(k.blocks, a)
			delete(k.blockS, a)
			k.addrs = sortedRemove(k.addrs, a)
		}
		if has {
			k.addBlockTotals(cur, 1)
			k.blocks[a] = cur
			k.addrs = sortedInsert(k.addrs, a)
			st, in := k.segmentOf(a)
			if in {
				k.blockS[a] = st
				dirty[st] = true
			}
			c.Blocks = append(c.Blocks, k.drawn(a, cur, st, in))
		} else {
			c.BlocksGone = append(c.BlocksGone, a)
		}
	}
	// Blocks whose segment changed with the segments.
	for _, sp := range spans {
		i, _ := slices.BinarySearch(k.addrs, sp.lo)
		for ; i < len(k.addrs) && k.addrs[i] < sp.hi; i++ {
			b := k.addrs[i]
			ost, oin := k.blockS[b]
			st, in := k.segmentOf(b)
			if ost == st && oin == in {
				continue
			}
			if oin {
				dirty[ost] = true
			}
			if in {
				k.blockS[b] = st
				dirty[st] = true
			} else {
				delete(k.blockS, b)
			}
			if b != a || !reported {
				c.Blocks = append(c.Blocks, k.drawn(b, k.blocks[b], st, in))
			}
		}
	}
	for s := range dirty {
		if _, ok := k.segs[s]; ok {
			k.dropStat(s)
			k.setStat(s)
		}
	}
	k.totals(c)
}

// segmentOf is the segment a block at addr is drawn in, as buildState
// places it: the last one starting at or below it, when it starts before
// that one's end.
func (k *walker) segmentOf(addr uint64) (uint64, bool) {
	i, found := slices.BinarySearch(k.starts, addr)
	if !found {
		i--
	}
	if i < 0 {
		return 0, false
	}
	s := k.segs[k.starts[i]]
	if addr >= s.addr+s.size {
		return 0, false
	}
	return s.addr, true
}

// setStat computes a segment's covered bytes and largest free gap as
// buildState does.
func (k *walker) setStat(start uint64) {
	s := k.segs[start]
	end := s.addr + s.size
	var f segFree
	at := s.addr
	i, _ := slices.BinarySearch(k.addrs, s.addr)
	for ; i < len(k.addrs) && k.addrs[i] < end; i++ {
		if st, in := k.blockS[k.addrs[i]]; !in || st != start {
			break // in a later segment that overlaps this one
		}
		b := k.h.resolve(k.blocks[k.addrs[i]])
		if b.addr > at {
			f.gap = max(f.gap, b.addr-at)
		}
		at = max(at, b.addr+b.size)
		f.covered += min(b.size, end-b.addr)
	}
	if end > at {
		f.gap = max(f.gap, end-at)
	}
	k.stat[start] = f
	k.cover += f.covered
	k.gaps[f.gap]++
	k.tot.LargestFree = max(k.tot.LargestFree, f.gap)
}

func (k *walker) dropStat(start uint64) {
	f, ok := k.stat[start]
	if !ok {
		return
	}
	delete(k.stat, start)
	k.cover -= f.covered
	if k.gaps[f.gap]--; k.gaps[f.gap] > 0 {
		return
	}
	delete(k.gaps, f.gap)
	if f.gap == k.tot.LargestFree {
		k.tot.LargestFree = 0
		for g := range k.gaps {
			k.tot.LargestFree = max(k.tot.LargestFree, g)
		}
	}
}

func (k *walker) addBlockTotals(r blockRef, sign int) {
	b := k.h.resolve(r)
	d := func(v *uint64, x uint64) {
		if sign > 0 {
			*v += x
		} else {
			*v -= x
		}
	}
	d(&k.tot.Allocated, b.requested)
	d(&k.tot.RealAllocated, b.size)
	if b.size > b.requested {
		d(&k.tot.RoundingWaste, b.size-b.requested)
	}
}

func (k *walker) totals(c *StateChange) {
	if len(k.w.segs.dups) > 0 {
		// Segments sharing a start: buildState's own figures.
		st := k.h.buildState(c.Index, k.h.sortFull(k.w))
		c.Totals = StateTotals{st.Allocated, st.Reserved, st.RealAllocated, st.RoundingWaste, st.FreeBytes, st.LargestFree}
		return
	}
	c.Totals = k.tot
	c.Totals.FreeBytes = 0
	if k.cover < k.tot.Reserved {
		c.Totals.FreeBytes = k.tot.Reserved - k.cover
	}
}

func (k *walker) segState(s segRec) SegmentState {
	return SegmentState{Addr: s.addr, Size: s.size, Stream: s.stream, Version: s.version, PoolID: k.h.pools[s.pool], Stack: s.stack}
}

func (k *walker) drawn(a uint64, r blockRef, seg uint64, in bool) DrawnBlock {
	b := k.h.resolve(r)
	return DrawnBlock{StateBlock{Addr: b.addr, Size: b.size, Requested: b.requested, Version: b.version,
		PendingFree: b.pending, Stack: b.stack, Segment: -1}, seg, in}
}

func sortedInsert(s []uint64, v uint64) []uint64 {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

func sortedRemove(s []uint64, v uint64) []uint64 {
	if i, found := slices.BinarySearch(s, v); found {
		return slices.Delete(s, i, i+1)
	}
	return s
}
