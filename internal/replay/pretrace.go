package replay

import "github.com/gpumem/gpumem/snapshot"

// PreTraceFrees counts blocks and segments that the trace frees without
// having allocated them: they were allocated before the trace's first
// entry, because recording started late or the max_entries ring buffer
// dropped the oldest entries. It uses addrTable, not Go maps: a map's
// hashing and growth were most of info's time after the decode on a
// 264 MB snapshot.
func PreTraceFrees(events []snapshot.Event) (blocks, segments int) {
	const (
		live = iota
		requested
	)
	state := newAddrTable(1 << 9)
	segs := newAddrTable(1 << 9)
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			state.put(e.Addr, live)
		case snapshot.ActionFreeRequested:
			if _, ok := state.get(e.Addr); !ok {
				blocks++
			}
			state.put(e.Addr, requested)
		case snapshot.ActionFreeCompleted:
			if _, ok := state.take(e.Addr); !ok {
				blocks++
			}
		case snapshot.ActionSegmentAlloc:
			segs.put(e.Addr, live)
		case snapshot.ActionSegmentFree:
			if _, ok := segs.take(e.Addr); !ok {
				segments++
			}
		}
	}
	return blocks, segments
}
