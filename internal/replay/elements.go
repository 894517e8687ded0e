package replay

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"

	"github.com/gpumem/gpumem/snapshot"
)

// Element sources: where an element's details come from.
const (
	srcAlloc      uint8 = iota // an alloc (segment_alloc) trace event
	srcFree                    // a free with no alloc in the trace
	srcGhostBlock              // an active_allocated dump block
	srcDumpSeg                 // a dump segment (segment timeline)
)

// elemSrc is one process_alloc_data element before stacking. It is 16
// bytes: its source (kind) is told by free, not kept in a byte that
// padded it to 24 (a fifth of a big timeline's columns).
type elemSrc struct {
	size uint64
	// ref is the raw trace event index (srcAlloc, srcFree), the block index
	// into Snapshot.Blocks (srcGhostBlock) or segment index (srcDumpSeg).
	ref int32
	// free is the raw index of the matching free event (ref itself for
	// srcFree), freeNone for an alloc not freed in the trace, or
	// freeGhost or freeDumpSeg.
	free int32
}

// elemSrc.free's values other than event indices.
const (
	freeNone    int32 = -1
	freeGhost   int32 = -2 // srcGhostBlock
	freeDumpSeg int32 = -3 // srcDumpSeg
)

// kind is where e's details come from (srcAlloc, ...).
func (e *elemSrc) kind() uint8 {
	switch {
	case e.free == freeGhost:
		return srcGhostBlock
	case e.free == freeDumpSeg:
		return srcDumpSeg
	case e.free == e.ref: // a free's own event: an alloc's free comes after it
		return srcFree
	}
	return srcAlloc
}

// freeEvent is the raw index of e's free event, -1 if none.
func (e *elemSrc) freeEvent() int32 { return max(e.free, -1) }

// elementList is process_alloc_data's first two phases: elements, the
// order of actions and the initial stack.
type elementList struct {
	elems   []elemSrc
	actions []int32 // element indices in action order (after taken)
	initial []int32 // initial stack, bottom first
	// segs, when not nil, is deviceSegments, found by the walk over the
	// dump that lists its elements (the first view's layout: a pass of
	// its own over the segments took 13 ms of the 1 GB tile's first
	// paint).
	segs []int32
	// taken counts the first actions, left out of actions: a stacker
	// took them while the trace was decoded (FedLayout).
	taken int
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
	return sortSegments(s, out)
}

// sortSegments sorts segs, indices of dump segments in snapshot order, by
// address.
func sortSegments(s *snapshot.Snapshot, segs []int32) []int32 {
	byAddr := func(a, b int32) int { return cmp.Compare(s.Segments[a].Address, s.Segments[b].Address) }
	// PyTorch writes segments sorted by address: check before sorting.
	if !slices.IsSortedFunc(segs, byAddr) {
		slices.SortStableFunc(segs, byAddr)
	}
	return segs
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
		if len(out) > 0 && snapshot.MergesFree(&tr.Events[out[len(out)-1]], e) {
			tr.Events[out[len(out)-1]].Flags |= snapshot.FlagMergedFree
			continue
		}
		out = append(out, int32(i))
	}
	return out
}

// pairing is process_alloc_data's first phase over a trace: an element
// per allocation, paired with its free by address, and one per free of an
// address not allocated in the trace.
type pairing struct {
	elems   []elemSrc
	actions []int32 // element indices in action order
	unseen  []int32 // elements of frees with no alloc, in trace order
	live    *addrTable
	// sorted, when not nil, holds the addresses live at the end as
	// sortedHalves does, in place of live (sortedLive).
	sorted [][]uint64
	// stack, when not nil, has taken the first taken actions so far,
	// which actions no longer holds (FedLayout): add stacks each as it
	// comes.
	stack *stacker
	taken int
	// The actions that push and pop elements: alloc and free (or
	// free_completed), or segment_alloc and segment_free.
	allocAct, freeAct, freeAct2 snapshot.Action
}

// newPairing sizes a pairing for a trace of events viz events, with room
// for actions actions at first.
func newPairing(events, actions int, segmentsView bool) *pairing {
	// At most half of the events add an element (a free of an unseen
	// address adds one too, but such frees are few).
	p := &pairing{
		elems:    make([]elemSrc, 0, events/2+16),
		actions:  make([]int32, 0, actions),
		live:     newAddrTable(1024),
		allocAct: snapshot.ActionAlloc, freeAct: snapshot.ActionFree, freeAct2: snapshot.ActionFreeCompleted,
	}
	if segmentsView {
		p.allocAct, p.freeAct, p.freeAct2 = snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentFree
	}
	return p
}

// sizedPairing makes the pairing for a whole trace with its arrays sized
// from a count of its actions: what newPairing reserves for an unknown
// trace (an element for half of the events, an action for each) was,
// for the segment view of a trace with few segment events, 60 MB of a
// 264 MB tile's arrays made, zeroed and left empty. Elements are the
// allocations, the frees of addresses allocated before the trace (a
// few: room for a sixteenth of the frees, the rest by growth) and the
// dump's segments or blocks that no allocation explains (at most all of
// them).
func sizedPairing(s *snapshot.Snapshot, device int, events []snapshot.Event, viz []int32, segmentsView bool) *pairing {
	p := newPairing(0, 0, segmentsView)
	allocs, frees := 0, 0
	for _, raw := range viz {
		switch a := events[raw].VizAction(); a {
		case p.allocAct:
			allocs++
		case p.freeAct, p.freeAct2:
			frees++
		}
	}
	dump := 0
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		if segmentsView {
			dump++
			continue
		}
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			if s.Blocks[bi].State == snapshot.BlockActiveAllocated {
				dump++
			}
		}
	}
	p.elems = make([]elemSrc, 0, allocs+dump+min(frees, 1024+frees/16))
	p.actions = make([]int32, 0, allocs+frees)
	return p
}

// sortedLive puts the addresses live at the end of the trace in sorted
// parts (sortedHalves), which buildElements looks the dump's blocks up
// in, and lets the address table go: garbage before the collection that
// precedes the fed layout (NewTimelineFed).
func (p *pairing) sortedLive() {
	if p.sorted == nil && p.live != nil {
		p.sorted = sortedHalves(p.live)
		p.live = nil
	}
}

// add takes the viz event e (raw index raw) shown as action a. With a
// stacker (the fed layout), the action is stacked at once rather than
// listed: the element it frees is then still in the cache, and its
// position comes from the address table's slot, read anyway.
func (p *pairing) add(e *snapshot.Event, a snapshot.Action, raw int32) {
	st := p.stack
	switch a {
	case p.allocAct:
		p.elems = append(p.elems, elemSrc{size: e.Size, ref: raw, free: freeNone})
		id := int32(len(p.elems) - 1)
		if st != nil {
			p.live.putAux(e.Addr, id, st.pushAction(id, e.Size))
			p.taken++
			return
		}
		p.live.put(e.Addr, id)
		p.actions = append(p.actions, id)
	case p.freeAct, p.freeAct2:
		if st != nil {
			if id, pos, ok := p.live.takeAux(e.Addr); ok {
				el := &p.elems[id]
				el.free = raw
				st.freeAction(id, pos, el.size)
			} else {
				p.elems = append(p.elems, elemSrc{size: e.Size, ref: raw, free: raw})
				id := int32(len(p.elems) - 1)
				p.unseen = append(p.unseen, id)
				st.freeAction(id, -1, e.Size)
			}
			p.taken++
			return
		}
		if id, ok := p.live.take(e.Addr); ok {
			p.actions = append(p.actions, id)
			p.elems[id].free = raw
		} else {
			p.elems = append(p.elems, elemSrc{size: e.Size, ref: raw, free: raw})
			id := int32(len(p.elems) - 1)
			p.unseen = append(p.unseen, id)
			p.actions = append(p.actions, id)
		}
	}
}

// buildElements runs process_alloc_data's phases 1 and 2; pre, when not
// nil, is the first phase over the device's trace done already (see
// LayoutFeed). pause, when not nil, is called now and then (see
// Lifetimes.Pause).
func buildElements(s *snapshot.Snapshot, device int, segmentsView bool, pre *pairing, pause func()) *elementList {
	p := pre
	if p == nil {
		viz := vizEvents(s, device)
		var events []snapshot.Event
		if len(viz) > 0 {
			events = s.Traces[device].Events
		}
		p = sizedPairing(s, device, events, viz, segmentsView)
		for k, raw := range viz {
			pauseAt(pause, k)
			e := &events[raw]
			p.add(e, e.VizAction(), raw)
		}
	}
	l := &elementList{elems: p.elems, actions: p.actions, taken: p.taken}
	initial := p.unseen
	addrToAlloc, sorted := p.live, p.sorted
	// The dump's segments or blocks that no allocation explains. For the
	// fed layout (the first view, which the first paint waits on) the
	// blocks are walked in two halves, one on another goroutine, against
	// the live addresses sorted (sortedHalves), the second half appended
	// after the first: a hash lookup per block, two cache misses each,
	// was 53 ms of CPU for the 1 GB tile's 900,000 active blocks. The walk
	// lists the device's segments too (elementList.segs).
	// The first half (or the whole) appends to the elements and a list
	// of segments with room for all; the second to room of its own, and
	// is appended after (growing a part's arrays by doubling copied and
	// faulted in a fifth of the walk's time).
	n := len(s.Segments)
	base := len(l.elems)
	first := dumpPart{elems: l.elems, segs: make([]int32, 0, n)}
	var second dumpPart
	if pre != nil && n >= twoCoreMin {
		if !segmentsView && sorted == nil {
			sorted = sortedHalves(addrToAlloc)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			room := dumpPart{elems: make([]elemSrc, 0, n-n/2), segs: make([]int32, 0, n-n/2)}
			second = dumpElements(s, device, segmentsView, addrToAlloc, sorted, room, n/2, n)
		}()
		first = dumpElements(s, device, segmentsView, addrToAlloc, sorted, first, 0, n/2)
		<-done
	} else {
		first = dumpElements(s, device, segmentsView, addrToAlloc, sorted, first, 0, n)
	}
	l.elems = append(first.elems, second.elems...)
	l.segs = append(first.segs, second.segs...)
	if !first.inOrder || len(second.segs) > 0 && (!second.inOrder || len(first.segs) > 0 &&
		s.Segments[first.segs[len(first.segs)-1]].Address > s.Segments[second.segs[0]].Address) {
		l.segs = sortSegments(s, l.segs)
	}
	initial = slices.Grow(initial, len(l.elems)-base)
	for id := base; id < len(l.elems); id++ {
		initial = append(initial, int32(id))
	}
	// memory_viz reverses the initial list and, with no actions, pops the
	// last one into the actions so that a flat graph is drawn.
	for i, j := 0, len(initial)-1; i < j; i, j = i+1, j-1 {
		initial[i], initial[j] = initial[j], initial[i]
	}
	if l.taken+len(l.actions) == 0 && len(initial) > 0 {
		l.actions = append(l.actions, initial[len(initial)-1])
		initial = initial[:len(initial)-1]
	}
	l.initial = initial
	return l
}

// twoCoreMin is the smallest number of items (the dump's segments, the
// stacked elements) that the first view's layout splits over two
// goroutines (buildElements, newTimeline); tests lower it so that the
// corpus takes that path.
var twoCoreMin = 1 << 14

// dumpPart is what dumpElements finds in a part of the dump.
type dumpPart struct {
	elems []elemSrc
	segs  []int32 // the device's segments, in snapshot order
	// inOrder says that segs are by address (as PyTorch writes them):
	// found by the walk, without a second pass over the segments (8 ms
	// of the 1 GB tile's first paint).
	inOrder bool
}

// dumpElements appends to out, in order, the elements of the dump's
// segments lo..hi-1 on device that no allocation in live explains: in the
// segment view the segments, else their active allocated blocks; and the
// device's segments among them. sorted, when not nil, holds live's
// addresses as sorted parts, which the blocks are looked up in.
func dumpElements(s *snapshot.Snapshot, device int, segmentsView bool, live *addrTable, sorted [][]uint64, out dumpPart, lo, hi int) dumpPart {
	out.inOrder = true
	var walks []sortedWalk
	for _, a := range sorted {
		walks = append(walks, sortedWalk{a: a, i: -1})
	}
	isLive := func(addr uint64) bool {
		if sorted == nil {
			_, ok := live.get(addr)
			return ok
		}
		for i := range walks {
			if walks[i].has(addr) {
				return true
			}
		}
		return false
	}
	for si := lo; si < hi; si++ {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		if n := len(out.segs); n > 0 && s.Segments[out.segs[n-1]].Address > seg.Address {
			out.inOrder = false
		}
		out.segs = append(out.segs, int32(si))
		if segmentsView {
			if _, ok := live.get(seg.Address); !ok {
				out.elems = append(out.elems, elemSrc{size: seg.TotalSize, ref: int32(si), free: freeDumpSeg})
			}
			continue
		}
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			if b.State != snapshot.BlockActiveAllocated || isLive(b.Addr) {
				continue
			}
			out.elems = append(out.elems, elemSrc{size: s.Requested(b), ref: bi, free: freeGhost})
		}
	}
	return out
}

// sortedHalves returns the keys of live in two sorted parts (the halves
// of its slots), each sorted on its own goroutine.
func sortedHalves(live *addrTable) [][]uint64 {
	n := live.size()
	parts := make([][]uint64, 2)
	done := make(chan struct{})
	go func() {
		defer close(done)
		parts[1] = radixSort(live.keysIn(make([]uint64, 0, live.n/2+live.n/8), n/2, n))
	}()
	parts[0] = radixSort(live.keysIn(make([]uint64, 0, live.n/2+live.n/8), 0, n/2))
	<-done
	return parts
}

// sortedWalk looks values up in a sorted array a, walking it forward
// while the values asked for rise (the dump's blocks come by address when
// its segments do: PyTorch writes them so), searching it otherwise.
type sortedWalk struct {
	a []uint64
	i int // the first index whose value is at least the last asked for; -1 before the first
}

// has reports whether x is in a.
func (w *sortedWalk) has(x uint64) bool {
	a := w.a
	if w.i < 0 || w.i > 0 && a[w.i-1] >= x {
		w.i = sort.Search(len(a), func(j int) bool { return a[j] >= x })
	} else {
		// A gallop: the values asked for may skip far ahead (another
		// device's segments, a part of the dump without live blocks).
		step := 1
		for w.i+step < len(a) && a[w.i+step-1] < x {
			w.i += step
			step *= 2
		}
		lo := w.i
		w.i += sort.Search(min(step, len(a)-lo), func(j int) bool { return a[lo+j] >= x })
	}
	return w.i < len(a) && a[w.i] == x
}

// radixSort sorts a (least significant digit first, 12 bits a digit,
// over the bits in which the values differ: addresses share their top
// bits and the low ones of their alignment) and returns it.
func radixSort(a []uint64) []uint64 {
	if len(a) < 1024 {
		slices.Sort(a)
		return a
	}
	or, and := uint64(0), ^uint64(0)
	for _, v := range a {
		or, and = or|v, and&v
	}
	varying := or ^ and
	if varying == 0 {
		return a // all equal
	}
	const digit = 12
	const mask = 1<<digit - 1
	lo, hi := bits.TrailingZeros64(varying), bits.Len64(varying)
	digits := (hi - lo + digit - 1) / digit
	counts := make([][1 << digit]int, digits)
	for _, v := range a {
		for d := range digits {
			counts[d][v>>(lo+d*digit)&mask]++
		}
	}
	src, dst := a, make([]uint64, len(a))
	for d := range digits {
		c := &counts[d]
		shift := lo + d*digit
		at := 0
		for k, n := range c {
			c[k] = at
			at += n
		}
		for _, v := range src {
			k := v >> shift & mask
			dst[c[k]] = v
			c[k]++
		}
		src, dst = dst, src
	}
	return src
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
// pushed in increasing order. It is a bit per position with a summary
// bit per word of the level below (a 64-way tree), and the highest live
// position kept: a free below it answers at once, and a free of it finds
// the next live one below in a few word operations per level. A column of
// int32 links (a union-find of the dead runs) was 20 MB of fresh memory
// for the 1 GB tile's 5 M positions, against 0.6 MB here, and each of its
// walks missed the cache.
type liveStack struct {
	// bits[0] has a bit per position, set while it is alive; bits[k+1]
	// a bit per word of bits[k], set while that word is not zero. The
	// last level is one word.
	bits [][]uint64
	n    int32 // positions pushed
	hi   int32 // the highest live position, -1 when none is
}

func newLiveStack(capacity int) *liveStack {
	s := &liveStack{hi: -1}
	for w := (capacity + 63) / 64; ; w = (w + 63) / 64 {
		s.bits = append(s.bits, make([]uint64, 0, max(w, 1)))
		if w <= 1 {
			return s
		}
	}
}

// size is the number of positions pushed.
func (s *liveStack) size() int32 { return s.n }

// push adds the next position, alive.
func (s *liveStack) push() {
	p := int(s.n)
	if p>>(6*len(s.bits)) != 0 {
		// The tree is full: a level more above its one-word top.
		var w uint64
		if top := s.bits[len(s.bits)-1]; top[0] != 0 {
			w = 1
		}
		s.bits = append(s.bits, []uint64{w})
	}
	s.n++
	s.hi = int32(p)
	for k, lv := range s.bits {
		w := p >> 6
		if w == len(lv) { // positions come in order: a word at a time
			lv = append(lv, 0)
			s.bits[k] = lv
		}
		old := lv[w]
		lv[w] = old | 1<<(p&63)
		if old != 0 {
			return // the levels above have this word's bit set
		}
		p = w
	}
}

// free marks position p dead and reports whether a position above it is
// still alive.
func (s *liveStack) free(p int32) bool {
	q := int(p)
	for _, lv := range s.bits {
		w := q >> 6
		if lv[w] &^= 1 << (q & 63); lv[w] != 0 {
			break
		}
		q = w
	}
	if p != s.hi {
		return s.hi > p
	}
	s.hi = s.below(p)
	return false
}

// below is the highest live position under p, -1 when none is: up the
// levels to the first word with a bit set under the one p is under, then
// down through the highest bits set.
func (s *liveStack) below(p int32) int32 {
	q := int(p)
	for k, lv := range s.bits {
		w := q >> 6
		if m := lv[w] & (1<<(q&63) - 1); m != 0 {
			q = w<<6 | (63 - bits.LeadingZeros64(m))
			for ; k > 0; k-- {
				q = q<<6 | (63 - bits.LeadingZeros64(s.bits[k-1][q]))
			}
			return int32(q)
		}
		q = w
	}
	return -1
}

// top is the highest live position, -1 when none is.
func (s *liveStack) top() int32 { return s.hi }

func computeStats(s *snapshot.Snapshot, device int, kind Kind, maxEntries int) TimelineCounts {
	if kind == KindActiveWithPools {
		return poolStats(s, device, maxEntries)
	}
	l := buildElements(s, device, kind == KindSegments, nil, nil)
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
