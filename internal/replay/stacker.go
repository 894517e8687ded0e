package replay

import "slices"

// stacker is process_alloc_data's third phase, the stack, run over the
// actions in order before the initial stack is known, so that it can run
// while the trace is still decoded (FedLayout).
//
// The initial stack (the dump's blocks allocated before the trace and the
// frees of addresses the trace never allocated) lies under every element
// the trace pushes, and is known only at the trace's end. So positions
// count the pushed elements only, and totals leave out the initial stack
// but for the frees of its elements, which the trace shows: total is the
// pushed bytes minus the initial bytes freed so far, modulo 2^64. finish
// adds the initial stack: it shifts the positions by its length and the
// totals (and bottom edges) by its bytes.
type stacker struct {
	// Per element, by id, for the elements seen so far.
	start, end []int32
	off0       []uint64 // pushed ones: total when pushed (before finish, without the initial stack)
	pos        []int32  // pushed ones: position among the pushed (before finish); -1 others
	slid       []bool

	byPos []int32 // the pushed elements in push order
	live  *liveStack
	cruns *compactRuns
	// The frees that slid, by end: their ends, sizes and positions among
	// the pushed (recorded here, where the element is at hand: queries
	// read them in time order, and looking each up by element missed the
	// cache).
	freeEnd, freePos []int32
	freeSize         []uint64

	total    uint64
	timestep int32
	seen     int // how many of the actions given to take it took
}

// newStacker sizes a stacker for about elems elements and actions actions.
func newStacker(elems, actions int) *stacker {
	st := &stacker{
		start: make([]int32, 0, elems), end: make([]int32, 0, elems), off0: make([]uint64, 0, elems),
		pos: make([]int32, 0, elems), slid: make([]bool, 0, elems),
		byPos: make([]int32, 0, elems),
		// At most every element's free slides. Reserved whole, these grow
		// without copying: doubling them copied and faulted in 15 MB on
		// the way to an 80 MB snapshot's first paint, and room never
		// written is never faulted in.
		freeEnd: make([]int32, 0, elems), freePos: make([]int32, 0, elems), freeSize: make([]uint64, 0, elems),
		live: newLiveStack(elems),
		// Every free adds one run, or two when it slides: sized for the
		// common case (about one free per two actions), appends grow it.
		cruns: &compactRuns{code: make([]uint32, 0, actions+actions/2), cp: make([]uint64, 0, actions/runBlock+2),
			lo: make([]int64, 0, actions/runBlock+2), hi: make([]int64, 0, actions/runBlock+2)},
	}
	return st
}

// grow makes room for element id: elements not seen yet start at zero,
// with position -1 (not pushed).
func (st *stacker) grow(id int32) {
	n := int(id) + 1
	if n <= len(st.start) {
		return
	}
	// Within the room reserved, the columns are resliced: make zeroed
	// it, and only appends wrote below it. Only pos needs writing.
	if n <= cap(st.start) && n <= cap(st.end) && n <= cap(st.off0) && n <= cap(st.pos) && n <= cap(st.slid) {
		old := len(st.pos)
		st.start, st.end, st.off0, st.slid = st.start[:n], st.end[:n], st.off0[:n], st.slid[:n]
		st.pos = st.pos[:n]
		for i := old; i < n; i++ {
			st.pos[i] = -1
		}
		return
	}
	for n > len(st.start) {
		st.start = append(st.start, 0)
		st.end = append(st.end, 0)
		st.off0 = append(st.off0, 0)
		st.pos = append(st.pos, -1)
		st.slid = append(st.slid, false)
	}
}

// advance records the run of an action of element id and moves the
// clock k timesteps on. It is called once or twice an action: within a
// block of runs and the room reserved it only appends and widens the
// block's extremes (which give the peak in finish).
func (st *stacker) advance(id int32, kind int, k int32) {
	r := st.cruns
	if n := len(r.code); n%runBlock != 0 && n < cap(r.code) {
		v, b := int64(st.total), len(r.lo)-1
		r.lo[b], r.hi[b] = min(r.lo[b], v), max(r.hi[b], v)
		r.code = r.code[:n+1]
		r.code[n] = uint32(id)<<2 | uint32(kind)
	} else {
		r.add(id, kind, st.total)
	}
	st.timestep += k
}

// pushAction takes the push of element id (not seen before, or of the
// initial stack) of size bytes and returns its position among the pushed.
func (st *stacker) pushAction(id int32, size uint64) int32 {
	st.grow(id)
	p := int32(len(st.byPos))
	st.pos[id] = p
	st.byPos = append(st.byPos, id)
	st.start[id] = st.timestep
	st.off0[id] = st.total
	st.live.push()
	st.total += size
	st.advance(id, runPush, 1)
	return p
}

// freeAction takes the free of element id of size bytes, at position p
// among the pushed, or -1 for an element of the initial stack (a free
// with no alloc in the trace): everything above such an element is
// pushed or freed already (the initial stack lists such frees from the
// top down).
func (st *stacker) freeAction(id, p int32, size uint64) {
	st.grow(id)
	var slides bool
	if p < 0 {
		slides = st.live.top() >= 0
	} else {
		slides = st.live.free(p)
	}
	if slides {
		st.advance(id, runFreeSlide, 1)
	} else {
		st.advance(id, runFree, 1)
	}
	st.end[id] = st.timestep // at least 1: the free took a timestep
	if slides {
		st.slid[id] = true
		// Collected here, the slid frees come sorted by end.
		st.freeEnd = append(st.freeEnd, st.timestep)
		st.freeSize = append(st.freeSize, size)
		// An element of the initial stack (not pushed) gets its
		// position in finish: its id is kept until then, as -1-id.
		if p < 0 {
			p = -1 - id
		}
		st.freePos = append(st.freePos, p)
		st.advance(id, runSlideEnd, 3)
	}
	st.total -= size
}

// take takes the actions not taken yet.
func (st *stacker) take(elems []elemSrc, actions []int32) {
	for _, id := range actions[st.seen:] {
		st.grow(id)
		e := &elems[id]
		if e.kind() != srcFree && st.pos[id] < 0 {
			st.pushAction(id, e.size)
			continue
		}
		if st.end[id] != 0 {
			continue // freed already (cannot happen: an element has one alloc and one free)
		}
		st.freeAction(id, st.pos[id], e.size)
	}
	st.seen = len(actions)
}

// finish takes the rest of l's actions, puts l's initial stack under the
// pushed elements and fills in t's stack (start, end, off0, pos, slid,
// byPos, the slid frees, the runs, timesteps and peak).
func (st *stacker) finish(t *Timeline, l *elementList) {
	st.take(l.elems, l.actions)
	n := len(l.elems)
	if n > 0 {
		st.grow(int32(n - 1))
	}
	k := int32(len(l.initial))
	var initBytes uint64
	for i, id := range l.initial {
		st.start[id] = 0
		st.off0[id] = initBytes
		initBytes += l.elems[id].size
		st.pos[id] = int32(i)
	}
	for _, id := range st.byPos {
		st.pos[id] += k
		st.off0[id] += initBytes
	}
	for b := range st.cruns.cp {
		st.cruns.cp[b] += initBytes
	}
	st.cruns.shift = initBytes
	// The peak is the highest total at a run, as a signed number: the
	// highest of the blocks' extremes.
	if len(st.cruns.hi) > 0 {
		t.peak = uint64(slices.Max(st.cruns.hi)) + initBytes
	}
	// The initial stack goes under the pushed elements: in place when the
	// room reserved for them holds it too (a new array was 2 MB more to
	// fault in and fill on the way to an 80 MB snapshot's first paint).
	if pushed := len(st.byPos); pushed+int(k) <= cap(st.byPos) {
		t.byPos = st.byPos[:pushed+int(k)]
		copy(t.byPos[k:], t.byPos[:pushed])
		copy(t.byPos, l.initial)
	} else {
		t.byPos = append(append(make([]int32, 0, n), l.initial...), st.byPos...)
	}
	t.start, t.end, t.off0, t.pos, t.slid = st.start, st.end, st.off0, st.pos, st.slid
	t.cruns = st.cruns
	t.timesteps = int(st.timestep)
	// Kept with their room, as src is (see newTimeline).
	t.freeEnd, t.freeSize, t.freePos = st.freeEnd, st.freeSize, st.freePos
	for i, p := range t.freePos {
		if p < 0 {
			t.freePos[i] = t.pos[-1-p]
		} else {
			t.freePos[i] = p + k
		}
	}
}
