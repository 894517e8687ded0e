package replay

import (
	"math/rand"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// checkWalk walks h, applying each change to what it drew so far, and
// compares the totals and the drawn segments and blocks with StateAt at
// every moment check says.
func checkWalk(t *testing.T, name string, h *History, check func(idx int) bool) (checked int) {
	t.Helper()
	segs := map[uint64]SegmentState{}
	blocks := map[uint64]DrawnBlock{}
	want := h.Len() - 1
	fails := 0
	h.Walk(func(c *StateChange) {
		if c.Index != want {
			t.Fatalf("%s: step for %d, want %d", name, c.Index, want)
		}
		want--
		for _, a := range c.SegmentsGone {
			delete(segs, a)
		}
		for _, s := range c.Segments {
			segs[s.Addr] = s
		}
		for _, a := range c.BlocksGone {
			delete(blocks, a)
		}
		for _, b := range c.Blocks {
			blocks[b.Addr] = b
		}
		if !check(c.Index) || fails > 3 {
			return
		}
		checked++
		st := h.StateAt(c.Index)
		tot := StateTotals{st.Allocated, st.Reserved, st.RealAllocated, st.RoundingWaste, st.FreeBytes, st.LargestFree}
		bad := func(f string, a ...any) {
			fails++
			t.Errorf("%s after event %d: "+f, append([]any{name, c.Index}, a...)...)
		}
		if c.Totals != tot {
			bad("totals %+v, StateAt %+v", c.Totals, tot)
		}
		if len(segs) != len(st.Segments) || len(blocks) != len(st.Blocks) {
			bad("%d segments %d blocks, StateAt %d and %d", len(segs), len(blocks), len(st.Segments), len(st.Blocks))
			return
		}
		for _, s := range st.Segments {
			g := segs[s.Addr]
			if g.Addr != s.Addr || g.Size != s.Size || g.Stream != s.Stream || g.Version != s.Version || g.PoolID != s.PoolID {
				bad("segment %+v, StateAt %+v", g, s)
			}
		}
		for _, b := range st.Blocks {
			g := blocks[b.Addr]
			wantSeg, in := uint64(0), b.Segment >= 0
			if in {
				wantSeg = st.Segments[b.Segment].Addr
			}
			if g.Size != b.Size || g.Requested != b.Requested || g.Version != b.Version || g.PendingFree != b.PendingFree ||
				g.InSegment != in || g.Segment != wantSeg {
				bad("block %+v, StateAt %+v in segment %#x", g, b, wantSeg)
			}
		}
	})
	if want != -2 {
		t.Errorf("%s: walk stopped before %d", name, want+1)
	}
	return checked
}

func TestWalkMatchesStateAt(t *testing.T) {
	every := func(int) bool { return true }
	hand := mkSnapshot([]ev{
		{snapshot.ActionSegmentAlloc, 0x100000, 2 << 20},
		{aAlloc, 0x100000, 1000},
		{aAlloc, 0x100400, 3000},
		{aFreeR, 0x100400, 3000},
		{snapshot.ActionSegmentMap, 0x800000, 2 << 20},
		{aAlloc, 0xa00000, 5000},
		{snapshot.ActionSegmentMap, 0xa00000, 2 << 20},
		{snapshot.ActionSegmentUnmap, 0xc00000, 2 << 20},
		{aFreeC, 0x100400, 3000},
	}, []snapshot.Segment{
		{Address: 0x100000, TotalSize: 2 << 20, FirstBlock: 0, NumBlocks: 2},
		{Address: 0x800000, TotalSize: 4 << 20, FirstBlock: 2, NumBlocks: 2, IsExpandable: true},
	}, []snapshot.Block{
		{Addr: 0x100000, Size: 1024, RequestedSize: 1000, State: snapshot.BlockActiveAllocated},
		{Addr: 0x100400, Size: 2<<20 - 1024, State: snapshot.BlockInactive},
		{Addr: 0x800000, Size: 2 << 20, State: snapshot.BlockInactive},
		{Addr: 0xa00000, Size: 5120, RequestedSize: 5000, State: snapshot.BlockActiveAllocated},
	})
	checkWalk(t, "hand-made", NewHistory(hand, 0), every)
	r := rand.New(rand.NewSource(9))
	for iter := 0; iter < 5; iter++ {
		checkWalk(t, "random", NewHistory(randomSnapshot(r, 500+r.Intn(1500)), 0), every)
	}
}

// TestWalkCorpus compares Walk with StateAt on every real trace, at 40
// moments each.
func TestWalkCorpus(t *testing.T) {
	dir := corpus.Shared(t)
	traces, moments := 0, 0
	for _, ef := range loadExpected(t, dir) {
		s := openCached(t, filepath.Join(dir, "snapshots", "real", ef.File))
		for d := range s.Traces {
			h := NewHistory(s, d)
			n := h.Len()
			if n == 0 {
				continue
			}
			step := max(1, n/40)
			moments += checkWalk(t, ef.File, h, func(idx int) bool { return idx < 2 || idx%step == 0 || idx >= n-2 })
			traces++
		}
	}
	if traces < 20 {
		t.Errorf("only %d real traces walked", traces)
	}
	t.Logf("%d traces, %d moments compared", traces, moments)
}
