package replay

import (
	"math/bits"
	"sort"

	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/snapshot"
)

// Lifetimes lists the elements of one memory_viz timeline (allocations of
// the Active Memory Timeline, or segments of the Active Cached Segment
// Timeline) with the actions between which each is live, so that "what is
// live after action k" is answered without building a Timeline.
//
// Actions are memory_viz's: the viz events that push or pop an element
// (alloc and free/free_completed, or segment_alloc and segment_free), in
// order. An element is live after action k when Born <= k < Died; Born ==
// -1 means live before the first action (a block allocated before the
// trace), Died == len(Events) means live at the end.
type Lifetimes struct {
	Kind Kind
	// src are the elements (their size and their alloc's and free's
	// events), 16 bytes each: the timeline's own when the lifetimes are
	// made from one (Timeline.Lifetimes), not a copy; span holds each
	// element's born and died actions. A Lifetime an element (24 bytes)
	// kept a second copy of src: 84 MB of the 1 GB tile's viewer at its
	// peak.
	src  []elemSrc
	span []lifeSpan
	// Events[k] is the raw trace event index (into Trace.Events) of
	// action k, in increasing order.
	Events []int32
	// Action k's timestep is k plus 3 for each free among the actions
	// before it that leaves a gap in the stack (see Timestep): those
	// frees as bits, and their count before each word's first action, an
	// eighth of the 4 bytes an action a column of timesteps took.
	gaps       []uint64
	gapsBefore []int32
	// PeakBytes is max(max_at_time), the number ComputeStats reports as
	// PeakBytes; PeakAction is the first action after which the live total
	// equals it (-1: before the first action).
	PeakBytes  uint64
	PeakAction int
	// Pause, when set, is the function NewLifetimesPaused called now and
	// then; Live calls it too, every pauseEvery+1 elements. It may block:
	// a viewer pauses its background work this way while the user waits
	// for an answer.
	Pause func()
}

// pauseEvery+1 is how many elements or events a long loop handles
// between two calls of its pause function: about a millisecond of work.
const pauseEvery = 1<<16 - 1

// pauseAt calls pause, when set, at the first and every pauseEvery+1-th
// step i of a long loop.
func pauseAt(pause func(), i int) {
	if pause != nil && i&pauseEvery == 0 {
		pause()
	}
}

// Lifetime is one timeline element (Lifetimes.Item).
type Lifetime struct {
	// Size is the plotted size: the requested bytes of an allocation, the
	// total size of a segment.
	Size uint64
	// Alloc and Free are raw trace event indices, negative when not in
	// the trace. An Alloc below -1 holds the element's dump entry (see
	// Dump), which only elements not allocated in the trace have.
	Alloc, Free int32
	Born, Died  int32
}

// Dump is the index into Snapshot.Blocks (allocations) or
// Snapshot.Segments (segments) of the dump entry this element comes from
// when its allocation is not in the trace; -1 otherwise.
func (it Lifetime) Dump() int32 {
	if it.Alloc < -1 {
		return -2 - it.Alloc
	}
	return -1
}

// Len is the number of elements.
func (lt *Lifetimes) Len() int { return len(lt.src) }

// Item returns element i.
func (lt *Lifetimes) Item(i int) Lifetime {
	e := &lt.src[i]
	return Lifetime{Size: e.size, Alloc: e.allocField(), Free: e.freeEvent(), Born: lt.span[i].born, Died: lt.span[i].died}
}

// allocField is Lifetime.Alloc of element e: its alloc's raw event, -2
// minus its dump entry when it comes from the dump, or -1.
func (e *elemSrc) allocField() int32 {
	switch e.kind() {
	case srcAlloc:
		return e.ref
	case srcGhostBlock, srcDumpSeg:
		return -2 - e.ref
	}
	return -1
}

// Size is element i's Size.
func (lt *Lifetimes) Size(i int) uint64 { return lt.src[i].size }

// Born is element i's Born: the action that pushes it (-1: live before
// the first).
func (lt *Lifetimes) Born(i int) int32 { return lt.span[i].born }

// Died is element i's Died: the action that pops it (len(Events): live
// at the end).
func (lt *Lifetimes) Died(i int) int32 { return lt.span[i].died }

// lifeSpan is an element's born and died actions, side by side: most
// readers take both (Live, Item).
type lifeSpan struct{ born, died int32 }

// newLifetimes makes the lifetimes of elements src with n actions, each
// element live throughout (Born -1, Died n) until its actions are set.
func newLifetimes(kind Kind, src []elemSrc, n int, pause func()) *Lifetimes {
	lt := &Lifetimes{
		Kind:       kind,
		src:        src[:len(src):len(src)],
		span:       make([]lifeSpan, len(src)),
		Events:     make([]int32, n),
		gaps:       make([]uint64, (n+63)/64),
		gapsBefore: make([]int32, (n+63)/64),
		Pause:      pause,
	}
	for i := range lt.span {
		pauseAt(pause, i)
		lt.span[i] = lifeSpan{-1, int32(n)}
	}
	return lt
}

// NewLifetimes computes the lifetimes of the elements of a device's
// timeline of kind KindActive or KindSegments (KindActiveWithPools is
// treated as KindActive: the same allocations). O(n) after the element
// list that ComputeStats builds too.
func NewLifetimes(s *snapshot.Snapshot, device int, kind Kind) *Lifetimes {
	return NewLifetimesPaused(s, device, kind, nil)
}

// NewLifetimesPaused is NewLifetimes with pause (which may be nil) called
// now and then meanwhile, and kept as the result's Pause.
func NewLifetimesPaused(s *snapshot.Snapshot, device int, kind Kind, pause func()) *Lifetimes {
	if kind == KindActiveWithPools {
		kind = KindActive
	}
	l := buildElements(s, device, kind == KindSegments, nil, pause)
	n := len(l.actions)
	// The lifetimes keep the element list itself (16 bytes an element),
	// and add each element's two actions.
	lt := newLifetimes(kind, l.elems, n, pause)
	src, span := lt.src, lt.span
	// While an element is live its died holds -1 minus its stack
	// position, which the free reads: no column of positions beside
	// (a third line of memory read at each free, in random order); the
	// elements still live at the end get died n after the actions.
	live := newLiveStack(len(src))
	var total uint64
	for _, id := range l.initial {
		span[id].died = -1 - live.size()
		live.push()
		total += src[id].size
	}
	lt.PeakBytes, lt.PeakAction = total, -1
	if n == 0 {
		lt.PeakBytes = 0 // memory_viz counts the initial stack only at an action
	}
	gaps := int32(0)
	for k, id := range l.actions {
		pauseAt(pause, k)
		e, sp := &src[id], &span[id]
		if k&63 == 0 {
			lt.gapsBefore[k>>6] = gaps
		}
		if sp.died >= 0 { // not live: an alloc, pushed on top
			sp.born = int32(k)
			sp.died = -1 - live.size()
			live.push()
			total += e.size
			// -1 only for a dump block popped into an empty trace's
			// actions (its Alloc holds its dump entry, below -1).
			lt.Events[k] = max(e.allocField(), -1)
			if total > lt.PeakBytes {
				lt.PeakBytes, lt.PeakAction = total, k
			}
			continue
		}
		// a free
		if live.free(-1 - sp.died) {
			lt.gaps[k>>6] |= 1 << (k & 63)
			gaps++
		}
		sp.died = int32(k)
		lt.Events[k] = e.freeEvent()
		total -= e.size
	}
	for i := range span {
		pauseAt(pause, i)
		if span[i].died < 0 {
			span[i].died = int32(n)
		}
	}
	return lt
}

// Lifetimes returns the lifetimes of t's elements, as NewLifetimesPaused
// makes them for t's device and KindActive, from what t holds: its
// elements and its runs, which list its actions in order (a push, or a
// free and whether it slid). nil when t is not a stacked timeline of the
// Active Memory Timeline's elements (the segment view, or the private
// pools view with pools).
//
// NewLifetimesPaused pairs the trace's allocations and stacks them again:
// on the 1 GB tile that was a second element list and action order (126
// MB, let go after) and most of a second of CPU, in the viewer's
// background beside the user's first zooms.
func (t *Timeline) Lifetimes(pause func()) *Lifetimes {
	if t.kind == KindSegments || t.cruns == nil || t.ser != nil {
		return nil
	}
	code := t.cruns.code
	n := 0 // actions: the runs but a sliding free's second
	for _, c := range code {
		if c&3 != runSlideEnd {
			n++
		}
	}
	// The elements are the timeline's (t.src is written once, when the
	// timeline is built).
	lt := newLifetimes(KindActive, t.src, n, pause)
	// The initial stack's bytes are the runs' shift (stacker.finish).
	total := t.cruns.shift
	lt.PeakBytes, lt.PeakAction = total, -1
	if n == 0 {
		lt.PeakBytes = 0 // memory_viz counts the initial stack only at an action
	}
	k, gaps := 0, int32(0)
	for _, c := range code {
		kind := c & 3
		if kind == runSlideEnd {
			continue
		}
		pauseAt(pause, k)
		id := c >> 2
		e := &lt.src[id]
		if k&63 == 0 {
			lt.gapsBefore[k>>6] = gaps
		}
		if kind == runPush {
			lt.span[id].born = int32(k)
			total += e.size
			lt.Events[k] = max(e.allocField(), -1)
			if total > lt.PeakBytes {
				lt.PeakBytes, lt.PeakAction = total, k
			}
		} else {
			lt.span[id].died = int32(k)
			lt.Events[k] = e.freeEvent()
			if kind == runFreeSlide {
				lt.gaps[k>>6] |= 1 << (k & 63)
				gaps++
			}
			total -= e.size
		}
		k++
	}
	return lt
}

// Timestep is memory_viz's timestep of action k (0 <= k < len(Events))
// with every element drawn (the viewer's x axis): one per action before
// it, and 3 more per free before it that left a gap in the stack.
func (lt *Lifetimes) Timestep(k int) int32 {
	w := k >> 6
	before := lt.gapsBefore[w] + int32(bits.OnesCount64(lt.gaps[w]&(1<<(k&63)-1)))
	return int32(k) + 3*before
}

// ActionAtEvent returns the last action whose raw event index is at most
// raw (-1 when none is): the state "after raw trace event raw".
func (lt *Lifetimes) ActionAtEvent(raw int) int {
	return sort.Search(len(lt.Events), func(k int) bool { return int(lt.Events[k]) > raw }) - 1
}

// Live calls f for every element live after action k (k == -1: before
// the first action). O(elements).
func (lt *Lifetimes) Live(k int, f func(i int)) {
	for i, sp := range lt.span {
		pauseAt(lt.Pause, i)
		if int(sp.born) <= k && k < int(sp.died) {
			f(i)
		}
	}
}

// KeepFrame reports whether memory_viz shows a frame (its frameFilter
// hides interpreter and dispatcher internals).
func KeepFrame(f *snapshot.Frame) bool { return keepFrame(f) }

// Rounder returns the caching allocator's round_size under the snapshot's
// roundup_power2_divisions setting: the block size a request of n bytes
// gets (before any split remainder too small to split off).
func Rounder(s *snapshot.Snapshot) func(n uint64) uint64 {
	divs := s.AllocatorSettings.Divisions()
	return func(n uint64) uint64 { return rules.RoundSize(n, divs) }
}

// DeviceSegments returns the indices of device's dump segments sorted by
// address (memory_viz's order for finding an address's pool).
func DeviceSegments(s *snapshot.Snapshot, device int) []int32 { return deviceSegments(s, device) }

// FindSegment returns the segment of segs (from DeviceSegments) that
// contains addr, or -1.
func FindSegment(s *snapshot.Snapshot, segs []int32, addr uint64) int32 {
	return findSegment(s, segs, addr)
}
