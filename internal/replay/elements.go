package replay

import (
	"cmp"
	"math/bits"
	"slices"

	"github.com/gpumem/gpumem/snapshot"
)

// Element sources: where an element's details come from.
const (
	srcAlloc      uint8 = iota // an alloc (segment_alloc) trace event
	srcFree                    // a free with no alloc in the trace
	srcGhostBlock              // an active_allocated dump block
	srcDumpSeg                 // a dump segment (segment timeline)
)

// elemSrc is one process_alloc_data element before stacking.
type elemSrc struct {
	size uint64
	// ref is the raw trace event index (srcAlloc, srcFree), the block index
	// into Snapshot.Blocks (srcGhostBlock) or segment index (srcDumpSeg).
	ref  int32
	free int32 // raw index of the matching free event, -1 if none
	kind uint8
}

// elementList is process_alloc_data's first two phases: elements, the
// order of actions and the initial stack.
type elementList struct {
	elems   []elemSrc
	actions []int32 // element indices in action order
	initial []int32 // initial stack, bottom first
}

// deviceSegments returns the indices of the device's dump segments sorted
// by address, as memory_viz's find_pool_id uses them.
func deviceSegments(s *snapshot.Snapshot, device int) []int32 {
	var out []int32
	for i := range s.Segments {
		if int(s.Segments[i].Device) == device {
			out = append(out, int32(i))
		}
	}
	byAddr := func(a, b int32) int { return cmp.Compare(s.Segments[a].Address, s.Segments[b].Address) }
	// PyTorch writes segments sorted by address: check before sorting.
	if !slices.IsSortedFunc(out, byAddr) {
		slices.SortStableFunc(out, byAddr)
	}
	return out
}

// findSegment returns the dump segment containing addr, or -1.
func findSegment(s *snapshot.Snapshot, segs []int32, addr uint64) int32 {
	lo, hi := 0, len(segs)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		seg := &s.Segments[segs[mid]]
		switch {
		case addr < seg.Address:
			hi = mid - 1
		case addr >= seg.Address+seg.TotalSize:
			lo = mid + 1
		default:
			return segs[mid]
		}
	}
	return -1
}

// legacyBlock reports whether blocks of this snapshot lack a frames key, so
// that memory_viz takes requested size and frames from the history.
func legacyBlock(s *snapshot.Snapshot) bool {
	g := s.Source.Generation
	return g == snapshot.GenL || g == snapshot.GenD1
}

// blockStack is the stack memory_viz shows for a dump block.
func blockStack(s *snapshot.Snapshot, b *snapshot.Block) snapshot.StackID {
	if legacyBlock(s) && b.NumHistory > 0 {
		h := &s.History[b.FirstHistory]
		if h.HasStack {
			return h.Stack
		}
		return snapshot.NoStack
	}
	return b.Stack
}

// vizEvents returns the raw indices of the device's trace in memory_viz
// order. Snapshots whose decoder left Viz empty get the raw order with
// merges computed here.
func vizEvents(s *snapshot.Snapshot, device int) []int32 {
	if device < 0 || device >= len(s.Traces) {
		return nil
	}
	tr := &s.Traces[device]
	if len(tr.Viz) > 0 || len(tr.Events) == 0 {
		return tr.Viz
	}
	out := make([]int32, 0, len(tr.Events))
	for i := range tr.Events {
		e := &tr.Events[i]
		if e.Action == snapshot.ActionFreeCompleted && len(out) > 0 {
			p := &tr.Events[out[len(out)-1]]
			if p.Action == snapshot.ActionFreeRequested && p.Addr == e.Addr {
				p.Flags |= snapshot.FlagMergedFree
				continue
			}
		}
		out = append(out, int32(i))
	}
	return out
}

// buildElements runs process_alloc_data's phases 1 and 2.
func buildElements(s *snapshot.Snapshot, device int, segmentsView bool) *elementList {
	l := &elementList{}
	var initial []int32
	viz := vizEvents(s, device)
	// Every viz event but merged frees is one action; at most half of
	// them add an element (a free of an unseen address adds one too, but
	// such frees are few).
	l.elems = make([]elemSrc, 0, len(viz)/2+16)
	l.actions = make([]int32, 0, len(viz))
	addrToAlloc := newAddrTable(1024)
	var events []snapshot.Event
	if device >= 0 && device < len(s.Traces) {
		events = s.Traces[device].Events
	}
	allocAct, freeAct, freeAct2 := snapshot.ActionAlloc, snapshot.ActionFree, snapshot.ActionFreeCompleted
	if segmentsView {
		allocAct, freeAct, freeAct2 = snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentFree
	}
	for _, raw := range viz {
		e := &events[raw]
		a := e.VizAction()
		switch a {
		case allocAct:
			l.elems = append(l.elems, elemSrc{size: e.Size, ref: raw, free: -1, kind: srcAlloc})
			id := int32(len(l.elems) - 1)
			addrToAlloc.put(e.Addr, id)
			l.actions = append(l.actions, id)
		case freeAct, freeAct2:
			if id, ok := addrToAlloc.take(e.Addr); ok {
				l.actions = append(l.actions, id)
				l.elems[id].free = raw
			} else {
				l.elems = append(l.elems, elemSrc{size: e.Size, ref: raw, free: raw, kind: srcFree})
				id := int32(len(l.elems) - 1)
				initial = append(initial, id)
				l.actions = append(l.actions, id)
			}
		}
	}
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		if segmentsView {
			if _, ok := addrToAlloc.get(seg.Address); !ok {
				l.elems = append(l.elems, elemSrc{size: seg.TotalSize, ref: int32(si), free: -1, kind: srcDumpSeg})
				initial = append(initial, int32(len(l.elems)-1))
			}
			continue
		}
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			if b.State != snapshot.BlockActiveAllocated {
				continue
			}
			if _, ok := addrToAlloc.get(b.Addr); ok {
				continue
			}
			l.elems = append(l.elems, elemSrc{size: s.Requested(b), ref: bi, free: -1, kind: srcGhostBlock})
			initial = append(initial, int32(len(l.elems)-1))
		}
	}
	// memory_viz reverses the initial list and, with no actions, pops the
	// last one into the actions so that a flat graph is drawn.
	for i, j := 0, len(initial)-1; i < j; i, j = i+1, j-1 {
		initial[i], initial[j] = initial[j], initial[i]
	}
	if len(l.actions) == 0 && len(initial) > 0 {
		l.actions = append(l.actions, initial[len(initial)-1])
		initial = initial[:len(initial)-1]
	}
	l.initial = initial
	return l
}

// drawSet marks the maxEntries largest elements as memory_viz's draw_elem
// does (stable sort by size, descending: among equal sizes the earlier
// elements win). maxEntries <= 0 draws all.
//
// Rather than sorting every element it finds the size of the last one
// drawn: the elements larger than it are all drawn, and of those equal to
// it the earliest, until maxEntries are drawn. Counting by bit length
// first narrows the search to one power-of-two class, so only that class
// is sorted.
func drawSet(elems []elemSrc, maxEntries int) []bool {
	drawn := make([]bool, len(elems))
	if maxEntries <= 0 || maxEntries >= len(elems) {
		for i := range drawn {
			drawn[i] = true
		}
		return drawn
	}
	var perClass [65]int
	for i := range elems {
		perClass[bits.Len64(elems[i].size)]++
	}
	// The class holding the maxEntries-th largest size, and how many of
	// the drawn come from above it.
	class, above := 64, 0
	for ; above+perClass[class] < maxEntries; class-- {
		above += perClass[class]
	}
	var sizes []uint64
	for i := range elems {
		if bits.Len64(elems[i].size) == class {
			sizes = append(sizes, elems[i].size)
		}
	}
	slices.Sort(sizes)
	cut := sizes[len(sizes)-(maxEntries-above)] // the smallest size drawn
	larger := 0
	for _, v := range sizes {
		if v > cut {
			larger++
		}
	}
	equal := maxEntries - above - larger // elements of size cut drawn
	for i := range elems {
		switch v := elems[i].size; {
		case v > cut:
			drawn[i] = true
		case v == cut && equal > 0:
			drawn[i] = true
			equal--
		}
	}
	return drawn
}

// liveStack records which stack positions are still alive, to tell
// whether freeing one makes the ones above it slide down. Positions are
// pushed in increasing order. A dead position points further down
// (union-find, halving paths as they are walked), so the highest live
// position is found in amortized nearly constant time, where a Fenwick
// tree of live counts costs two O(log n) walks per free.
type liveStack struct {
	// down[p] == p while p is alive; for a dead p, every position in
	// (down[p], p] is dead (down[p] == -1: none is alive below).
	down []int32
}

func newLiveStack(capacity int) *liveStack {
	return &liveStack{down: make([]int32, 0, capacity)}
}

// push adds the next position, alive.
func (s *liveStack) push() {
	s.down = append(s.down, int32(len(s.down)))
}

// free marks position p dead and reports whether a position above it is
// still alive.
func (s *liveStack) free(p int32) bool {
	s.down[p] = p - 1
	return s.top() > p
}

// top is the highest live position, -1 when none is.
func (s *liveStack) top() int32 {
	d := s.down
	x := int32(len(d)) - 1
	for x >= 0 {
		next := d[x]
		if next == x {
			return x
		}
		if next >= 0 {
			d[x] = d[next] // halve the path
		}
		x = d[x]
	}
	return -1
}

func computeStats(s *snapshot.Snapshot, device int, kind Kind, maxEntries int) TimelineCounts {
	if kind == KindActiveWithPools {
		return poolStats(s, device, maxEntries)
	}
	l := buildElements(s, device, kind == KindSegments)
	drawn := drawSet(l.elems, maxEntries)
	n := len(l.elems)
	pos := make([]int32, n) // stack position+1 while drawn and live; 0 otherwise
	live := newLiveStack(n)
	summarized := make([]uint8, n) // 0 never seen, 1 in band, 2 left band
	nextPos := 0
	var total, band, peak uint64
	steps := 0
	advance := func(k int) {
		steps += k
		if v := total + band; v > peak {
			peak = v
		}
	}
	push := func(id int32) {
		pos[id] = int32(nextPos + 1)
		live.push()
		nextPos++
		total += l.elems[id].size
	}
	for _, id := range l.initial {
		if drawn[id] {
			push(id)
		} else {
			band += l.elems[id].size
			summarized[id] = 1
		}
	}
	for _, id := range l.actions {
		size := l.elems[id].size
		if !drawn[id] {
			if summarized[id] != 0 {
				advance(1)
				band -= size
				summarized[id] = 2
			} else {
				band += size
				summarized[id] = 1
				advance(1)
			}
			continue
		}
		if pos[id] == 0 {
			push(id)
			advance(1)
			continue
		}
		advance(1)
		p := pos[id] - 1
		pos[id] = 0
		if live.free(p) { // something above it slides down
			advance(3)
		}
		total -= size
	}
	return TimelineCounts{PeakBytes: peak, Elements: n, Timesteps: steps}
}
