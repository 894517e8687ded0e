package replay

import (
	"cmp"
	"slices"
	"sync"

	"github.com/gpumem/gpumem/snapshot"
)

// Dump answers the Allocator State History at its last event, the dump
// itself, from the snapshot's segments and blocks alone: no maps, no
// checkpoints, no replay. A viewer opens the history there, and on a big
// snapshot a History takes seconds to prepare (bench/RESULTS-web.md,
// #32 part 32i). Its State is the one History.StateTop gives at Len()-1.
//
// The dump sorted (segments and blocks by address, with the blocks'
// references) is made once and kept: it is the History's own base
// (History.baseSS and the arrays beside it), so that StartHistory starts
// from it without taking in the dump again (0.65 s of CPU on a 1 GB
// snapshot, which the state view's first step back waited for:
// bench/RESULTS-web.md, #32 part 32l). A dump whose segments share a
// start or an end address, or overlap (inconsistent traces), which a
// History keeps as maps, is sorted anew at each StateTop instead, and
// its History is NewHistory's.
type Dump struct {
	h *History // the fields a state's layout and the events' texts read
	// pools numbers the segments' pools as newHistory does (History.pools);
	// poolAt is the reverse.
	pools  sync.Once
	poolAt map[[2]int64]int32

	sortOnce sync.Once
	// shared: h's base holds the dump sorted (sortDump), which layouts
	// only read (layoutState writes nothing in a base's arrays).
	shared bool

	started sync.Once
	hist    *History // StartHistory's
}

// NewDump prepares a device's Dump; it does nothing costly (a server
// reads the events' texts from one while the history is prepared).
func NewDump(s *snapshot.Snapshot, device int) *Dump {
	h := &History{s: s, device: device, viz: vizEvents(s, device), divs: s.AllocatorSettings.Divisions()}
	if device >= 0 && device < len(s.Traces) {
		h.events = s.Traces[device].Events
	}
	return &Dump{h: h}
}

// Len returns the number of memory_viz events; the dump is the state
// after event Len()-1.
func (d *Dump) Len() int { return d.h.Len() }

// Event and EventStack are History's.
func (d *Dump) Event(i int) EventInfo              { return d.h.Event(i) }
func (d *Dump) EventStack(i int, st *State) string { return d.h.EventStack(i, st) }

// StateTop is History.StateTop(Len()-1, n). Calls may run at once, and
// beside the History's (StartHistory).
func (d *Dump) StateTop(n int) *State {
	ss := d.sorted()
	return d.h.layoutState(len(d.h.viz)-1, ss, max(n, 1))
}

// sorted returns the dump sorted: h's base once sortDump made it (kept),
// or, for a dump a History keeps as maps, a state sorted anew.
func (d *Dump) sorted() *sortedState {
	d.sortOnce.Do(func() { d.shared = d.sortDump() })
	if d.shared {
		return d.h.baseSS
	}
	return d.sortMaps()
}

// numberPools numbers the device's segments' pools as newHistory does.
func (d *Dump) numberPools() {
	h, s := d.h, d.h.s
	d.pools.Do(func() {
		h.pools = [][2]int64{{}}
		d.poolAt = map[[2]int64]int32{{}: 0}
		for si := range s.Segments {
			if seg := &s.Segments[si]; int(seg.Device) == h.device {
				if _, ok := d.poolAt[seg.PoolID]; !ok {
					d.poolAt[seg.PoolID] = int32(len(h.pools))
					h.pools = append(h.pools, seg.PoolID)
				}
			}
		}
	})
}

// sortDump sorts the dump's segments and blocks by address, with the
// blocks' references, as a History's base (what baseSorted makes from
// newHistory's maps: one block per address, the last active one in
// snapshot order, since a map's set replaces), and sets it as h's base
// when the segments are such a History's overlay (no two share a start or
// an end, none overlaps: endsInOrder). It reports whether it did.
func (d *Dump) sortDump() bool {
	d.numberPools()
	h, s := d.h, d.h.s
	var order []int32 // the device's segments, by address (ties in snapshot order)
	for si := range s.Segments {
		if int(s.Segments[si].Device) == h.device {
			order = append(order, int32(si))
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(s.Segments[a].Address, s.Segments[b].Address) })
	ss := &sortedState{segs: make([]segRec, len(order))}
	nb := 0
	for i, si := range order {
		seg := &s.Segments[si]
		ss.segs[i] = segRec{seg.Address, seg.TotalSize, seg.Stream, seg.Version, d.poolAt[seg.PoolID], seg.Stack}
		nb += int(seg.NumBlocks)
	}
	for i := 1; i < len(ss.segs); i++ {
		if ss.segs[i].addr == ss.segs[i-1].addr {
			return false
		}
	}
	if !endsInOrder(ss.segs) {
		return false
	}
	// The active blocks segment by segment in address order: a snapshot's
	// segments hold their blocks by address and do not overlap, so these
	// are by address already, each at an address of its own, which is
	// the one order a stable sort of them in snapshot order gives. When
	// not, they are taken in snapshot order and sorted, the last at an
	// address kept.
	addrs := make([]uint64, 0, nb)
	refs := make([]blockRef, 0, nb)
	inOrder := true
	for _, si := range order {
		seg := &s.Segments[si]
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			r, ok := dumpBlockRef(b, bi)
			if !ok {
				continue
			}
			if n := len(addrs); n > 0 && b.Addr <= addrs[n-1] {
				inOrder = false
			}
			addrs = append(addrs, b.Addr)
			refs = append(refs, r)
		}
	}
	if !inOrder {
		type pair struct {
			addr uint64
			ref  blockRef
		}
		ps := make([]pair, 0, len(addrs))
		for si := range s.Segments {
			seg := &s.Segments[si]
			if int(seg.Device) != h.device {
				continue
			}
			for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
				if r, ok := dumpBlockRef(&s.Blocks[bi], bi); ok {
					ps = append(ps, pair{s.Blocks[bi].Addr, r})
				}
			}
		}
		slices.SortStableFunc(ps, func(a, b pair) int { return cmp.Compare(a.addr, b.addr) })
		addrs, refs = addrs[:0], refs[:0]
		for i := range ps {
			if i+1 < len(ps) && ps[i+1].addr == ps[i].addr {
				continue
			}
			addrs = append(addrs, ps[i].addr)
			refs = append(refs, ps[i].ref)
		}
	}
	ss.blocks = make([]StateBlock, len(refs))
	for i, r := range refs {
		ss.blocks[i] = h.stateBlock(r)
	}
	ss.orderBySize()
	ss.base = true
	segAddrs := make([]uint64, len(ss.segs))
	segEnds := make([]uint64, len(ss.segs))
	for i := range ss.segs {
		segAddrs[i] = ss.segs[i].addr
		segEnds[i] = ss.segs[i].addr + ss.segs[i].size
	}
	h.baseOnce.Do(func() {
		h.baseSS, h.overlay = ss, true
		h.baseRefs, h.baseAddrs = slices.Clip(refs), slices.Clip(addrs)
		h.baseSegAddrs, h.baseSegEnds = segAddrs, segEnds
	})
	return true
}

// sortMaps sorts the dump as sortFull sorts newHistory's maps: the
// segments by address, those sharing a start after the first in snapshot
// order (segSet's dups); one block per address, the last active one.
func (d *Dump) sortMaps() *sortedState {
	d.numberPools()
	h, s := d.h, d.h.s
	ss := &sortedState{}
	nb := 0
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != h.device {
			continue
		}
		ss.segs = append(ss.segs, segRec{seg.Address, seg.TotalSize, seg.Stream, seg.Version, d.poolAt[seg.PoolID], seg.Stack})
		nb += int(seg.NumBlocks)
	}
	slices.SortStableFunc(ss.segs, func(a, b segRec) int { return cmp.Compare(a.addr, b.addr) })
	for i := 1; i < len(ss.segs); i++ {
		if ss.segs[i].addr == ss.segs[i-1].addr {
			ss.dups = true
			break
		}
	}
	blocks := make([]StateBlock, 0, nb)
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != h.device {
			continue
		}
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			r, ok := dumpBlockRef(&s.Blocks[bi], bi)
			if !ok {
				continue
			}
			blocks = append(blocks, h.stateBlock(r))
		}
	}
	slices.SortStableFunc(blocks, func(a, b StateBlock) int { return cmp.Compare(a.Addr, b.Addr) })
	// Of blocks at one address, the last in snapshot order stays.
	out := blocks[:0]
	for i := range blocks {
		if i+1 < len(blocks) && blocks[i+1].Addr == blocks[i].Addr {
			continue
		}
		out = append(out, blocks[i])
	}
	ss.blocks = out
	ss.orderBySize()
	return ss
}

// StartHistory returns the device's History, started as StartHistoryPaused
// starts one, from the dump sorted: its intake of the dump is what this
// Dump has made (or makes now), and the steps back from the dump answer
// at once. Later calls return the same History. A dump a History keeps as
// maps (see Dump) starts one by StartHistoryPaused.
func (d *Dump) StartHistory(spawn func(func()), busy func() bool, pause func()) *History {
	d.started.Do(func() {
		d.sorted()
		if !d.shared {
			d.hist = StartHistoryPaused(d.h.s, d.h.device, spawn, busy, pause)
			return
		}
		if spawn == nil {
			spawn = func(f func()) { go f() }
		}
		h := d.h
		h.busy = busy
		h.grown = sync.NewCond(&h.mu)
		h.every = CheckpointEvery
		// The dump's own checkpoint (no changes), and the state for the
		// first step back, as newHistory's start makes them for an
		// overlay.
		h.ckpt = []checkpoint{{after: len(h.viz) - 1}}
		h.lastMu.Lock()
		h.last, h.lastIdx = h.overlayWork(), len(h.viz)-1
		h.lastMu.Unlock()
		in := h.overlayWork()
		spawn(func() { h.build(in) })
		d.hist = h
	})
	return d.hist
}
