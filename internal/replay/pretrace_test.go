package replay

import (
	"math/rand/v2"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// TestPreTraceFreesTable: PreTraceFrees' table against a map on random
// traces over few addresses (collisions, deletions in probe runs).
func TestPreTraceFreesTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(3000)
		events := make([]snapshot.Event, n)
		for i := range events {
			events[i] = snapshot.Event{
				Addr:   uint64(rng.IntN(1+round*5)) * 512,
				Action: []snapshot.Action{snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree}[rng.IntN(5)],
			}
		}
		// The rule with Go maps, as info had it.
		state, segs := map[uint64]uint8{}, map[uint64]bool{}
		var wb, ws int
		for _, e := range events {
			switch e.Action {
			case snapshot.ActionAlloc:
				state[e.Addr] = 1
			case snapshot.ActionFreeRequested:
				if state[e.Addr] == 0 {
					wb++
				}
				state[e.Addr] = 2
			case snapshot.ActionFreeCompleted:
				if state[e.Addr] == 0 {
					wb++
				}
				delete(state, e.Addr)
			case snapshot.ActionSegmentAlloc:
				segs[e.Addr] = true
			case snapshot.ActionSegmentFree:
				if !segs[e.Addr] {
					ws++
				}
				delete(segs, e.Addr)
			}
		}
		if b, s := PreTraceFrees(events); b != wb || s != ws {
			t.Fatalf("round %d: %d, %d; want %d, %d", round, b, s, wb, ws)
		}
	}
}
