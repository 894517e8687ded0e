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
type Dump struct {
	h *History // the fields a state's layout and the events' texts read
	// pools numbers the segments' pools as newHistory does (History.pools);
	// poolAt is the reverse.
	pools  sync.Once
	poolAt map[[2]int64]int32
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

// StateTop is History.StateTop(Len()-1, n). Calls share nothing (each
// sorts the dump anew) and may run at once.
func (d *Dump) StateTop(n int) *State {
	h := d.h
	s := h.s
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
	// What newHistory's maps hold, sorted as sortFull sorts them: the
	// segments by address, those sharing a start after the first in
	// snapshot order (segSet's dups); one block per address, the last
	// active one (a map's set replaces).
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
	return h.layoutState(len(h.viz)-1, ss, max(n, 1))
}
