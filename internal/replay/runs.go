package replay

import (
	"math"
	"sync/atomic"
)

// compactRuns is max_at_time as runs for a stacked timeline, in 4 bytes a
// run instead of 12: a run is the push or free of one element, so its
// timestep follows from the element's start or end and its value from the
// element sizes, walked from a stored total every runBlock runs.
type compactRuns struct {
	code []uint32 // element id << 2 | run kind
	// cp[b] is the value of run b*runBlock.
	cp []uint64
	// lo[b] and hi[b] are the least and the greatest value of block b's
	// runs as add got them, signed: they leave out the initial stack,
	// whose bytes (shift) finish adds later, and may be below zero. Kept as
	// the runs come, they spare finishRuns a walk over every run (half of
	// laying out the first view after the decode, on an 80 MB snapshot).
	lo, hi []int64
	shift  uint64
	// starts, once set (runStarts), holds the first timestep of run
	// b*runBlock at b: the runs' starts are searched a block at a time
	// (columns). It is found beside the first window, and the windows
	// before it search the runs themselves.
	starts atomic.Pointer[[]int32]
	blockMinMax
}

const runBlock = 64

// Run kinds: what the run records and where its timestep comes from.
const (
	runPush      = iota // push: value after the push, at start
	runFree             // free that did not slide: at end-1, size removed after
	runFreeSlide        // first run of a free that slides: at end-1
	runSlideEnd         // its second run: at end, size removed after
)

func (r *compactRuns) add(id int32, kind int, value uint64) {
	v := int64(value)
	if len(r.code)%runBlock == 0 {
		r.cp = append(r.cp, value)
		r.lo, r.hi = append(r.lo, v), append(r.hi, v)
	} else {
		b := len(r.lo) - 1
		r.lo[b], r.hi[b] = min(r.lo[b], v), max(r.hi[b], v)
	}
	r.code = append(r.code, uint32(id)<<2|uint32(kind))
}

// shiftKeepsOrder reports whether every run's value, shifted, lies in
// [0, 2^63): then the signed order of the values add got is the order of
// the shifted ones, and lo and hi shifted are the blocks' extremes.
func (r *compactRuns) shiftKeepsOrder() bool {
	if r.shift > math.MaxInt64 || len(r.lo) != len(r.cp) {
		return false
	}
	s := int64(r.shift)
	for b := range r.lo {
		if r.lo[b] < -s || r.hi[b] > math.MaxInt64-s {
			return false
		}
	}
	return true
}

// start is run i's first timestep.
func (t *Timeline) runStartAt(i int) int32 {
	c := t.cruns.code[i]
	id := c >> 2
	switch c & 3 {
	case runPush:
		return t.start[id]
	case runSlideEnd:
		return t.end[id]
	}
	return t.end[id] - 1
}

// walkRuns calls fn with the values of runs [i0, i1), which need not be
// in one block.
func (t *Timeline) walkRuns(i0, i1 int, fn func(v uint64)) {
	r := t.cruns
	b := i0 / runBlock
	v := r.cp[b]
	for i := b * runBlock; i < i1; i++ {
		if i > b*runBlock {
			prev := r.code[i-1]
			if k := prev & 3; k == runFree || k == runSlideEnd {
				v -= t.src[prev>>2].size
			}
			if c := r.code[i]; c&3 == runPush {
				v += t.src[c>>2].size
			}
		}
		if i >= i0 {
			fn(v)
		}
	}
}

// finishRuns builds the block min/max trees: from the extremes add kept,
// or, when shifting them could change their order (sizes near 2^64, in
// made-up input only), by walking the runs.
func (t *Timeline) finishRuns() {
	r := t.cruns
	if r.shiftKeepsOrder() {
		r.blockMinMax = newBlockMinMax(len(r.cp), func(b int) (uint64, uint64) {
			return uint64(r.lo[b]) + r.shift, uint64(r.hi[b]) + r.shift
		})
		return
	}
	r.blockMinMax = newBlockMinMax(len(r.cp), func(b int) (uint64, uint64) {
		mn, mx := uint64(math.MaxUint64), uint64(0)
		t.walkRuns(b*runBlock, min((b+1)*runBlock, len(r.code)), func(v uint64) {
			mn, mx = min(mn, v), max(mx, v)
		})
		return mn, mx
	})
}

// runStarts sets cruns.starts (a cache miss or two a block: 8 ms of the
// 1 GB tile's layout, where the first window waited for it).
func (t *Timeline) runStarts() {
	r := t.cruns
	starts := make([]int32, len(r.cp))
	for b := range starts {
		starts[b] = t.runStartAt(b * runBlock)
	}
	r.starts.Store(&starts)
}

// queryRuns returns the min and max value of runs [i0, i1) (i0 < i1).
func (t *Timeline) queryRuns(i0, i1 int) (mn, mx uint64) {
	r := t.cruns
	mn = math.MaxUint64
	see := func(v uint64) { mn, mx = min(mn, v), max(mx, v) }
	b0, b1 := i0/runBlock, (i1-1)/runBlock
	if b1-b0 <= 1 {
		t.walkRuns(i0, i1, see)
		return
	}
	t.walkRuns(i0, (b0+1)*runBlock, see)
	t.walkRuns(b1*runBlock, i1, see)
	return r.fold(b0+1, b1, mn, mx)
}

// ActionSlides returns a bit per memory_viz action of a stacked timeline,
// in action order, set for a free that slides the elements above it down
// (3 timesteps more than the one every action takes), and the number of
// actions. ok is false for a materialized timeline (the private pools
// view with pools), whose clock also moves for the pools' envelopes.
//
// It reads the runs, one or two per action in order, so that the viewer's
// event axis (the timestep of each trace event) is a walk over the trace
// beside it rather than a second pairing and stack of every allocation.
func (t *Timeline) ActionSlides() (slides []uint64, actions int, ok bool) {
	if t.cruns == nil {
		return nil, 0, false
	}
	code := t.cruns.code
	slides = make([]uint64, (len(code)+63)/64)
	for _, c := range code {
		switch c & 3 {
		case runSlideEnd:
			continue // the second run of the free before it
		case runFreeSlide:
			slides[actions>>6] |= 1 << (actions & 63)
		}
		actions++
	}
	return slides[:(actions+63)/64], actions, true
}
