package web

import (
	"math/bits"
	"sort"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// stepAxis is the timestep at which each memory_viz event of a device
// happens on a timeline (the event axis), nondecreasing. It follows
// process_alloc_data's clock: an alloc or free takes one timestep, and a
// free with live elements above it three more while they slide down. So
// it is kept as two bits an event (it acts; its free slides) and the
// timestep of every 64th event: 20 bytes per 64 events where a column of
// timesteps took 256 (3.3 MB against 40 MiB on the 1 GB tile, for the
// whole server's life).
type stepAxis struct {
	n     int
	cp    []int32  // cp[w]: the timestep of event 64w
	act   []uint64 // bit i: event i is an action (one timestep)
	slide []uint64 // bit i: that action is a free that slides (three more)
	// plain, when not nil, holds the timesteps themselves (the private
	// pools view, whose clock moves for the pools' envelopes too).
	plain []int32
}

// len is the number of events.
func (a *stepAxis) len() int {
	if a.plain != nil {
		return len(a.plain)
	}
	return a.n
}

// at is event i's timestep (0 <= i < len()).
func (a *stepAxis) at(i int) int32 {
	if a.plain != nil {
		return a.plain[i]
	}
	w, below := i>>6, uint64(1)<<(i&63)-1
	return a.cp[w] + int32(bits.OnesCount64(a.act[w]&below)) + 3*int32(bits.OnesCount64(a.slide[w]&below))
}

// search returns the first event whose timestep satisfies f, which is
// false and then true along the axis (sort.Search), len() if none does.
func (a *stepAxis) search(f func(step int32) bool) int {
	return sort.Search(a.len(), func(i int) bool { return f(a.at(i)) })
}

// vizSteps returns the event axis of tl, the device's timeline of the
// Active Memory (or, with segments, the Active Cached Segment) view, and
// its number of timesteps. ok is false when it cannot be told from the
// trace and the timeline's actions: the decoder left memory_viz's order to
// replay, the timeline is materialized, or its actions are not the
// trace's (then the page derives it from the elements).
//
// The actions are the events that push or pop an element, in order, and
// the timeline knows which of its frees slid (replay's ActionSlides): one
// walk over the trace, where pairing the allocations and stacking them
// again took a second of CPU and 130 MB on the 1 GB tile. TestAxes checks
// it against every element's start and end on every real snapshot.
func vizSteps(s *snapshot.Snapshot, device int, segmentsView bool, tl *replay.Timeline) (axis *stepAxis, total int32, ok bool) {
	if device < 0 || device >= len(s.Traces) {
		return &stepAxis{}, 0, true
	}
	events, viz := s.Traces[device].Events, s.Traces[device].Viz
	if len(viz) == 0 && len(events) > 0 {
		return nil, 0, false // the decoder left memory_viz's order to replay
	}
	slides, actions, ok := tl.ActionSlides()
	if !ok {
		return nil, 0, false
	}
	allocAct, freeAct, freeAct2 := snapshot.ActionAlloc, snapshot.ActionFree, snapshot.ActionFreeCompleted
	if segmentsView {
		allocAct, freeAct, freeAct2 = snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentFree
	}
	words := (len(viz) + 63) / 64
	a := &stepAxis{n: len(viz), cp: make([]int32, words), act: make([]uint64, words), slide: make([]uint64, words)}
	k := 0 // actions so far
	for i, raw := range viz {
		if i&63 == 0 {
			a.cp[i>>6] = total
		}
		switch events[raw].VizAction() {
		case allocAct, freeAct, freeAct2:
		default:
			continue
		}
		if k >= actions {
			return nil, 0, false
		}
		a.act[i>>6] |= 1 << (i & 63)
		total++
		if slides[k>>6]&(1<<(k&63)) != 0 {
			a.slide[i>>6] |= 1 << (i & 63)
			total += 3
		}
		k++
	}
	// With no event that acts, memory_viz draws the dump as one action of
	// its own, with no event: the axis is all zeros.
	if k != actions && k != 0 {
		return nil, 0, false
	}
	return a, total, true
}
