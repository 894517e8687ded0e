package replay

import (
	"runtime"
	"sync/atomic"

	"github.com/gpumem/gpumem/snapshot"
)

// FedLayout is most of the Active Memory Timeline's layout (allocations
// paired with their frees, then stacked) done over a decode's EventFeed
// while the decoder goes on, on the second core: the layout that waits for
// the decode then has the initial stack and the indexes left to do. See
// NewTimelineFed.
type FedLayout struct {
	feed *snapshot.EventFeed
	done chan struct{}
	p    *pairing
	used atomic.Bool
}

// LayoutFeed starts laying out f's entries with run (which runs its
// argument on another goroutine, e.g. `func(f func()) { go f() }`).
func LayoutFeed(f *snapshot.EventFeed, run func(func())) *FedLayout {
	fp := &FedLayout{feed: f, done: make(chan struct{})}
	run(fp.pair)
	return fp
}

// pair reads the feed to its end, pairing and stacking.
func (fp *FedLayout) pair() {
	defer close(fp.done)
	var f fedPairer
	for {
		evs, done := fp.feed.Next(f.have)
		if len(evs) < f.have {
			return // the decode failed
		}
		f.next(evs, fp.feed.Expected(), fp.feed.Live())
		if done {
			fp.p = f.p
			return
		}
	}
}

// fedPairer pairs and stacks a trace as its entries come. An entry is
// kept back until the next one is there, which says whether memory_viz
// merges the two (a free_requested followed by its free_completed is one
// free, at the free_requested).
type fedPairer struct {
	p       *pairing
	have    int // entries seen
	pending int // a free_requested not yet merged or not; -1 none
}

// next takes evs[f.have:], evs being every entry so far; expected is the
// number of entries the decoder reserved room for, live the number of
// allocated blocks in the dump (EventFeed.Live).
func (f *fedPairer) next(evs []snapshot.Event, expected, live int) {
	p := f.p
	if p == nil {
		// The decoder reserves room for every entry it expects; the
		// arrays reserved for as many are never copied as they fill
		// (sized from cap(evs), which ends at the splitter's part
		// while it reads, they grew three times on the 1 GB tile:
		// 0.27 s of the second core's CPU before the first paint).
		n := max(cap(evs), expected)
		p = newPairing(n, 0, false)
		// The address table grows from small to its size at once
		// (addrTable.expect), which comes from the dump's allocated
		// blocks (live is that count): doubled all the way, its copies
		// were 32 MB of fresh pages on the 1 GB tile, 8,000 page faults
		// on the way to the first paint, each a table written whole.
		// Those blocks include the allocations made before the trace,
		// which the table never holds, so it expects three quarters of
		// them (the 1 GB tile's table held 651,000 addresses at the
		// end, of 894,000 allocated blocks; an 80 MB tile's 50,750 of
		// 69,658): a table twice too big is as much memory as the
		// copies it saves. A trace that keeps few addresses live (a
		// short one beside a big dump) never takes that size.
		p.live.expect(live * 3 / 4)
		p.stack = newStacker(n/2, n)
		f.p, f.pending = p, -1
	}
	pending := f.pending
	// The address table's slot of the entry prefetchAhead entries on is
	// fetched now, so that its put or take finds it in the cache; not
	// while the table is small enough to stay in the cache.
	ahead := len(evs)
	if len(p.live.slots) >= prefetchSlots {
		ahead = prefetchAhead
		for i := f.have; i < min(f.have+prefetchAhead, len(evs)); i++ {
			p.prefetch(&evs[i])
		}
	}
	for i := f.have; i < len(evs); i++ {
		if j := i + ahead; j < len(evs) {
			p.prefetch(&evs[j])
		}
		e := &evs[i]
		if pending >= 0 {
			prev := &evs[pending]
			pending = -1
			if snapshot.MergesFree(prev, e) {
				p.add(prev, snapshot.ActionFree, int32(i-1))
				continue
			}
		}
		if e.Action == snapshot.ActionFreeRequested {
			pending = i
			continue
		}
		p.add(e, e.Action, int32(i))
	}
	f.pending, f.have = pending, len(evs)
}

// prefetchAhead is how many trace entries ahead of the one paired the
// fed layout prefetches the address table's slot for (see
// pairing.prefetch): far enough that the slot is in the cache when the
// entry comes (tens of ns a entry, against a miss's 100 ns or more).
const prefetchAhead = 16

// prefetchSlots is the size of the address table (1 MB) from which the
// fed layout prefetches its slots; tests lower it so that small traces
// take that path.
var prefetchSlots = 1 << 16

// prefetch starts bringing in the address table's slot that pairing e
// will read, if it is an allocation or a free: on a long trace the table
// is tens of MB, larger than the cache, and its addresses are hashed all
// over it; a put or take that waited for its miss, one after the other,
// was most of the fed layout's time on the 1 GB tile, where prefetched
// the misses overlap.
func (p *pairing) prefetch(e *snapshot.Event) {
	switch e.Action {
	case p.allocAct, p.freeAct, p.freeAct2:
		p.live.prefetch(e.Addr)
	}
}

// result waits for the work and returns it when it covers exactly trace,
// nil otherwise (another device's trace, several traces in the feed, a
// failed decode).
func (fp *FedLayout) result(trace []snapshot.Event) *pairing {
	if fp == nil {
		return nil
	}
	<-fp.done
	if fp.p == nil || !fp.feed.Whole(trace) {
		return nil
	}
	return fp.p
}

// NewTimelineFed is NewTimeline, using fp's work (fp may be nil) when it
// covers the device's whole trace and kind is KindActive (or
// KindActiveWithPools without private pools); the work is used once.
//
// It does not start the indexes of narrower windows (see StartIndexes):
// built beside the first whole-trace window, which needs none, they
// slowed it, and the first paint with it.
func NewTimelineFed(s *snapshot.Snapshot, device int, kind Kind, fp *FedLayout) *Timeline {
	if kind == KindSegments || device < 0 || device >= len(s.Traces) || (kind == KindActiveWithPools && hasPrivatePools(s, device)) {
		return newTimeline(s, device, kind, nil)
	}
	pre := fp.take(s.Traces[device].Events)
	if pre != nil && len(pre.elems) >= gcBeforeLayoutMin {
		// The decoder's garbage (its memo, its stacks, the arrays it
		// outgrew) and the address table are collected before the
		// layout makes its arrays, which then reuse those pages rather
		// than fault in fresh ones: the decode's last collection ran
		// before most of that garbage was made, and the next would wait
		// for the heap to double. On the 1 GB tile that was 150-180 MB
		// of the 1.35 GB touched on the way to the first paint, 35,000
		// page faults (a fresh page costs 1.5 us of system CPU here);
		// the collection takes 1-3 ms, the heap being nearly all
		// pointer-free columns, which it does not scan.
		pre.sortedLive()
		runtime.GC()
	}
	return newTimeline(s, device, kind, pre)
}

// gcBeforeLayoutMin is the number of elements of a fed pairing from which
// NewTimelineFed collects before it lays out: below it the garbage is a
// few MB.
const gcBeforeLayoutMin = 1 << 17

// take is result, once: the timeline that uses the work owns it, and work
// that does not fit is let go (it holds tens of MB on a big file).
func (fp *FedLayout) take(trace []snapshot.Event) *pairing {
	if fp == nil || fp.used.Swap(true) {
		return nil
	}
	p := fp.result(trace)
	fp.p = nil
	return p
}
