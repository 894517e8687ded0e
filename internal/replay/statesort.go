package replay

import (
	"cmp"
	"slices"
	"sort"
)

// sortedState is a work state's blocks and segments in the orders
// buildState lays them out in. It is kept with the last state asked for
// (and made once for the dump's), so that the next state, a few undos
// away, is a merge of what those undos touched into sorted arrays instead
// of a sort of a million blocks and segments (a step took 0.5 s on a
// state of 900 k blocks and 760 k segments).
type sortedState struct {
	blocks []StateBlock // by address
	segs   []segRec     // by address
	// addrPos lists the positions in segs by (size, address), ties by
	// position: the order buildState packs them in; sizes[i] is the size
	// of segment addrPos[i], so that packing reads memory in order (by
	// addrPos alone it missed the cache at every segment: 60 ms of a
	// step on 760 k segments). A copy of the segments in that order was
	// a third of a big state's arrays (36 MB of three states on a 1 GB
	// snapshot).
	addrPos []int32
	sizes   []uint64
	// dups: two segments share a start address (only inconsistent traces
	// have them); such a state is only ever sorted in full.
	dups bool
	// shared: a State holds blocks, so they are not reused; base: the
	// dump's, kept for good.
	shared, base bool
}

// owned reports whether ss's arrays may be changed: no State holds them
// and they are not the dump's.
func (ss *sortedState) owned() bool { return ss != nil && !ss.shared && !ss.base && !ss.dups }

// updateSorted applies to ss, in place, the changes of w at blockAddrs
// and segAddrs (added, removed or replaced): what mergeSorted returns,
// for a step's few changes, in O(k·n) moves without a second set of
// arrays. w has no segments sharing a start.
func (h *History) updateSorted(ss *sortedState, w *work, blockAddrs, segAddrs []uint64) {
	slices.Sort(blockAddrs)
	for _, a := range slices.Compact(blockAddrs) {
		p, found := slices.BinarySearchFunc(ss.blocks, a, func(b StateBlock, a uint64) int { return cmp.Compare(b.Addr, a) })
		r, has := w.blocks.get(a)
		switch {
		case found && has:
			ss.blocks[p] = h.stateBlock(r)
		case found:
			ss.blocks = slices.Delete(ss.blocks, p, p+1)
		case has:
			ss.blocks = slices.Insert(ss.blocks, p, h.stateBlock(r))
		}
	}
	slices.Sort(segAddrs)
	for _, a := range slices.Compact(segAddrs) {
		p, found := slices.BinarySearchFunc(ss.segs, a, func(s segRec, a uint64) int { return cmp.Compare(s.addr, a) })
		sg, has := w.segs.byStart.get(a)
		switch {
		case found && has:
			if ss.segs[p] != sg {
				ss.dropSize(p)
				ss.segs[p] = sg
				ss.addSize(p)
			}
		case found:
			ss.dropSize(p)
			ss.segs = slices.Delete(ss.segs, p, p+1)
			for i, x := range ss.addrPos {
				if int(x) > p {
					ss.addrPos[i] = x - 1
				}
			}
		case has:
			ss.segs = slices.Insert(ss.segs, p, sg)
			for i, x := range ss.addrPos {
				if int(x) >= p {
					ss.addrPos[i] = x + 1
				}
			}
			ss.addSize(p)
		}
	}
}

// sizeOrder returns where the segment at position p by address is, or
// would go, in the size order.
func (ss *sortedState) sizeOrder(p int) (int, bool) {
	size, addr := ss.segs[p].size, ss.segs[p].addr
	lo, _ := slices.BinarySearch(ss.sizes, size)
	hi := lo
	for hi < len(ss.sizes) && ss.sizes[hi] == size {
		hi++
	}
	i := lo + sort.Search(hi-lo, func(x int) bool { return ss.segs[ss.addrPos[lo+x]].addr >= addr })
	return i, i < hi && ss.segs[ss.addrPos[i]].addr == addr
}

// dropSize removes the segment at position p from the size order.
func (ss *sortedState) dropSize(p int) {
	if i, found := ss.sizeOrder(p); found {
		ss.addrPos = slices.Delete(ss.addrPos, i, i+1)
		ss.sizes = slices.Delete(ss.sizes, i, i+1)
	}
}

// addSize adds the segment at position p to the size order.
func (ss *sortedState) addSize(p int) {
	i, _ := ss.sizeOrder(p)
	ss.addrPos = slices.Insert(ss.addrPos, i, int32(p))
	ss.sizes = slices.Insert(ss.sizes, i, ss.segs[p].size)
}

// reuse returns s emptied when it holds n, else a new slice for n and
// the changes of many more steps, so that it serves as a spare for long.
func reuse[T any](s []T, n int) []T {
	if s != nil && cap(s) >= n {
		return s[:0]
	}
	return make([]T, 0, withRoom(n))
}

// withRoom is the capacity allocated for n sorted blocks or segments.
func withRoom(n int) int { return n + n/64 + 1024 }

func (h *History) stateBlock(r blockRef) StateBlock {
	b := h.resolve(r)
	return StateBlock{Addr: b.addr, Size: b.size, Requested: b.requested, Version: b.version, PendingFree: b.pending, Stack: b.stack}
}

// sortFull sorts every block and segment of w.
func (h *History) sortFull(w *work) *sortedState {
	ss := &sortedState{dups: len(w.segs.dups) > 0}
	// The blocks need nothing from the segments: sort them on another
	// core meanwhile (a big state has a million of each).
	blocksDone := make(chan []StateBlock, 1)
	go func() {
		bs := make([]StateBlock, 0, w.blocks.len())
		w.blocks.each(func(_ uint64, r blockRef) { bs = append(bs, h.stateBlock(r)) })
		slices.SortFunc(bs, func(a, b StateBlock) int { return cmp.Compare(a.Addr, b.Addr) })
		blocksDone <- bs
	}()
	ss.segs = w.segs.sorted()
	ss.orderBySize()
	ss.blocks = <-blocksDone
	return ss
}

// mergeSorted returns w sorted, given prev, the sorted state w was before
// the blocks at blockAddrs and the segments starting at segAddrs changed
// (added, removed or replaced): O(n) copying plus O(k log n) for k
// changes, into spare's arrays when it is not nil (a step then allocates
// nothing big). It returns nil when a merge does not apply (duplicate
// segment addresses); the caller sorts in full.
func (h *History) mergeSorted(prev, spare *sortedState, w *work, blockAddrs, segAddrs []uint64) *sortedState {
	if prev == nil || prev.dups || len(w.segs.dups) > 0 {
		return nil
	}
	if spare == nil {
		spare = &sortedState{}
	}
	ss := &sortedState{}
	ss.blocks = mergeByAddr(spare.blocks, prev.blocks, blockAddrs, func(b *StateBlock) uint64 { return b.Addr },
		func(a uint64) (StateBlock, bool) {
			r, ok := w.blocks.get(a)
			if !ok {
				return StateBlock{}, false
			}
			return h.stateBlock(r), true
		})

	// Segments by address, remembering where each old position went.
	slices.Sort(segAddrs)
	segAddrs = slices.Compact(segAddrs)
	type change struct {
		oldPos int  // lower bound of the address in prev.segs
		had    bool // prev.segs[oldPos] starts there (and is removed)
		old    segRec
		has    bool // w has a segment there (inserted)
		seg    segRec
		before int // removed minus inserted at lower addresses
		newPos int // of the inserted segment
	}
	cs := make([]change, len(segAddrs))
	shift := 0
	for j, a := range segAddrs {
		c := &cs[j]
		c.oldPos, c.had = slices.BinarySearchFunc(prev.segs, a, func(s segRec, a uint64) int { return cmp.Compare(s.addr, a) })
		if c.had {
			c.old = prev.segs[c.oldPos]
		}
		c.seg, c.has = w.segs.byStart.get(a)
		c.before = shift
		if c.had {
			shift++
		}
		if c.has {
			shift--
		}
	}
	ss.segs = reuse(spare.segs, len(prev.segs)+len(cs))
	at := 0
	for j := range cs {
		c := &cs[j]
		ss.segs = append(ss.segs, prev.segs[at:c.oldPos]...)
		at = c.oldPos
		if c.had {
			at++
		}
		if c.has {
			c.newPos = len(ss.segs)
			ss.segs = append(ss.segs, c.seg)
		}
	}
	ss.segs = append(ss.segs, prev.segs[at:]...)
	// newPos maps an old position that is kept to its new one: shifted by
	// the removals and insertions at lower addresses.
	breaks := make([]int, len(cs))
	shifts := make([]int, len(cs)) // removals minus insertions up to change j
	for j := range cs {
		c := &cs[j]
		breaks[j], shifts[j] = c.oldPos, c.before
		if c.had {
			shifts[j]++
		}
		if c.has {
			shifts[j]--
		}
	}
	newPos := func(x int) int32 {
		// Changes j with oldPos <= x lie at lower addresses than the kept
		// segment at x (its own address is not among them). A step
		// changes one or two: scan those.
		j := 0
		if len(breaks) > 8 {
			j, _ = slices.BinarySearch(breaks, x+1)
		} else {
			for j < len(breaks) && breaks[j] <= x {
				j++
			}
		}
		if j == 0 {
			return int32(x)
		}
		return int32(x - shifts[j-1])
	}

	// Segments by (size, address): drop the old records of the changed
	// addresses, insert the new ones.
	key := func(s *segRec) [2]uint64 { return [2]uint64{s.size, s.addr} }
	cmpKey := func(a, b [2]uint64) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	}
	type sizeEdit struct {
		k   [2]uint64
		rec segRec
		pos int32
		add bool
	}
	var edits []sizeEdit
	for j := range cs {
		c := &cs[j]
		if c.had {
			edits = append(edits, sizeEdit{k: key(&c.old)})
		}
		if c.has {
			edits = append(edits, sizeEdit{k: key(&c.seg), rec: c.seg, pos: int32(c.newPos), add: true})
		}
	}
	// Removals sort before an insertion of the same key.
	slices.SortFunc(edits, func(a, b sizeEdit) int {
		if c := cmpKey(a.k, b.k); c != 0 {
			return c
		}
		return cmp.Compare(boolInt(a.add), boolInt(b.add))
	})
	ss.addrPos = reuse(spare.addrPos, len(ss.segs))
	ss.sizes = reuse(spare.sizes, len(ss.segs))
	at = 0
	copyRun := func(to int) {
		for x := at; x < to; x++ {
			ss.addrPos = append(ss.addrPos, newPos(int(prev.addrPos[x])))
		}
		ss.sizes = append(ss.sizes, prev.sizes[at:to]...)
		at = to
	}
	keyAt := func(x int) [2]uint64 { return [2]uint64{prev.sizes[x], prev.segs[prev.addrPos[x]].addr} }
	for _, e := range edits {
		// The sizes first (in order in memory), then the addresses of
		// that size.
		lo, _ := slices.BinarySearch(prev.sizes[at:], e.k[0])
		lo += at
		hi := lo
		for hi < len(prev.sizes) && prev.sizes[hi] == e.k[0] {
			hi++
		}
		p := lo + sort.Search(hi-lo, func(x int) bool { return cmpKey(keyAt(lo+x), e.k) >= 0 })
		found := p < len(prev.sizes) && cmpKey(keyAt(p), e.k) == 0
		copyRun(p)
		if !e.add {
			if found {
				at++
			}
			continue
		}
		ss.addrPos = append(ss.addrPos, e.pos)
		ss.sizes = append(ss.sizes, e.k[0])
	}
	copyRun(len(prev.addrPos))
	return ss
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mergeByAddr copies sorted (by addr) into buf's array with the elements
// at the changed addresses replaced by cur's (absent where cur says none).
func mergeByAddr[T any](buf, sorted []T, changed []uint64, addr func(*T) uint64, cur func(uint64) (T, bool)) []T {
	slices.Sort(changed)
	changed = slices.Compact(changed)
	out := reuse(buf, len(sorted)+len(changed))
	at := 0
	for _, a := range changed {
		p, found := slices.BinarySearchFunc(sorted[at:], a, func(x T, a uint64) int { return cmp.Compare(addr(&x), a) })
		out = append(out, sorted[at:at+p]...)
		at += p
		if found {
			at++
		}
		if v, ok := cur(a); ok {
			out = append(out, v)
		}
	}
	return append(out, sorted[at:]...)
}

// orderBySize sets addrPos, the positions in ss.segs (address order) by
// size, smallest first (equal sizes by address, then position), and
// sizes, the sizes in that order, which a state's layout reads in order.
func (ss *sortedState) orderBySize() {
	order := make([]int32, len(ss.segs))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		sa, sb := &ss.segs[a], &ss.segs[b]
		if c := cmp.Compare(sa.size, sb.size); c != 0 {
			return c
		}
		if c := cmp.Compare(sa.addr, sb.addr); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	ss.addrPos = order
	ss.sizes = make([]uint64, len(order))
	for i, k := range order {
		ss.sizes[i] = ss.segs[k].size
	}
}
