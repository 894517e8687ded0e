package alloc

import (
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// TestStartBlocksAreReplays pins the simulator's blocks at trace start to
// memory_viz's state before the first event (replay's undo of the trace):
// the same addresses, requested sizes and pending states, and the dump's
// real size for blocks the trace never touches. Only the dump's blocks in
// private pools that the trace never touches are left out (the simulator
// models the default pool). See ARCHITECTURE.md for why initialState finds
// them with one forward pass instead of calling replay.
func TestStartBlocksAreReplays(t *testing.T) {
	traces, blocks := 0, 0
	for _, f := range corpus.Files(t) {
		s, err := snapshot.Open(f, nil)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		private := map[uint64]bool{}
		for i := range s.Segments {
			if s.Segments[i].InPrivatePool() {
				for _, b := range s.SegmentBlocks(i) {
					private[b.Addr] = true
				}
			}
		}
		for d := range s.Traces {
			st, err := rebuildStart(s, d)
			if err != nil {
				t.Fatal(err)
			}
			touched := map[uint64]bool{}
			for _, e := range s.Traces[d].Events {
				switch e.Action {
				case snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
					touched[e.Addr] = true
				}
			}
			var want []replay.StateBlock
			for _, b := range replay.NewHistory(s, d).StateAt(-1).Blocks {
				if touched[b.Addr] || !private[b.Addr] {
					want = append(want, b)
				}
			}
			traces++
			blocks += len(want)
			name := filepath.Base(f)
			if len(st.blocks) != len(want) {
				t.Errorf("%s device %d: %d blocks at trace start, replay has %d", name, d, len(st.blocks), len(want))
				continue
			}
			for i, b := range st.blocks {
				w := want[i]
				if b.addr != w.Addr || b.requested != w.Requested || b.pending != w.PendingFree || (!touched[b.addr] && b.size != w.Size) {
					t.Errorf("%s device %d: block %d at %#x (%d requested, pending %v, size %d), replay %#x (%d, %v, %d)",
						name, d, i, b.addr, b.requested, b.pending, b.size, w.Addr, w.Requested, w.PendingFree, w.Size)
					break
				}
			}
		}
	}
	if traces < 20 || blocks == 0 {
		t.Errorf("only %d traces, %d blocks compared", traces, blocks)
	}
	t.Logf("%d traces, %d start blocks equal replay's", traces, blocks)
}
