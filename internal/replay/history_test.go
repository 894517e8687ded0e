package replay

import (
	"fmt"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gpumem/gpumem/snapshot"
)

// naiveState is simulate_memory: the dump state with every event after idx
// undone, one event at a time from the end.
func naiveState(h *History, idx int) *State {
	w := dumpWork(h)
	for i := len(h.viz) - 1; i > idx; i-- {
		h.undo(w, i)
	}
	return h.buildState(idx, h.sortFull(w))
}

// dumpWork is the dump's state made from the snapshot as simulate_memory
// starts, in the snapshot's order, independently of how the history keeps
// it (sorted arrays, maps for inconsistent dumps).
func dumpWork(h *History) *work {
	s := h.s
	w := &work{segs: newSegSet(0), blocks: newBlockMap(0)}
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != h.device {
			continue
		}
		pool := int32(slices.Index(h.pools, seg.PoolID))
		w.segs.insert(segRec{seg.Address, seg.TotalSize, seg.Stream, seg.Version, pool, seg.Stack})
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			if b.State == snapshot.BlockInactive {
				continue
			}
			r := blockRef(uint32(bi)) | refDump
			if b.State == snapshot.BlockActivePendingFree {
				r |= refPending
			}
			w.blocks.set(b.Addr, r)
		}
	}
	return w
}

// randomSegmentSnapshot is a trace of every event kind the history undoes,
// at addresses drawn from a small set so that they collide (segments
// sharing a start or an end, blocks outside any segment, maps carving the
// middle of a segment), and a dump that may be inconsistent the same way
// (irregular: two segments start at one address, or end at one).
func randomSegmentSnapshot(r *rand.Rand, n int, irregular bool) *snapshot.Snapshot {
	const unit = 0x100000
	addr := func() uint64 { return unit * uint64(1+r.Intn(64)) }
	size := func() uint64 { return unit * uint64(1+r.Intn(4)) }
	var segs []snapshot.Segment
	var blocks []snapshot.Block
	for at := uint64(unit); at < 64*unit; {
		sz := size()
		if r.Intn(3) > 0 {
			sg := snapshot.Segment{Address: at, TotalSize: sz, FirstBlock: int32(len(blocks)), Stream: snapshot.StreamID(r.Intn(2))}
			if r.Intn(8) == 0 {
				sg.PoolID = [2]int64{1, int64(r.Intn(3))}
			}
			for b := at; b < at+sz; b += unit / 2 {
				st := snapshot.BlockActiveAllocated
				switch r.Intn(4) {
				case 0:
					st = snapshot.BlockInactive
				case 1:
					st = snapshot.BlockActivePendingFree
				}
				blocks = append(blocks, snapshot.Block{Addr: b, Size: unit / 2, RequestedSize: uint64(1 + r.Intn(unit/2)), State: st})
				sg.NumBlocks++
			}
			segs = append(segs, sg)
		}
		at += sz
	}
	if irregular && len(segs) > 2 {
		// One segment again at another's start, one ending at another's end.
		a, b := segs[r.Intn(len(segs))], segs[r.Intn(len(segs))]
		a.TotalSize, a.NumBlocks = a.TotalSize+unit, 0
		segs = append(segs, a)
		if b.TotalSize > unit {
			b.Address, b.TotalSize, b.NumBlocks = b.Address+unit, b.TotalSize-unit, 0
			segs = append(segs, b)
		}
	}
	actions := []snapshot.Action{aAlloc, aAlloc, aFreeR, aFreeC, snapshot.ActionFree,
		snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap}
	var evs []ev
	segEnd := uint64(64 * unit)
	for i := 0; i < n; i++ {
		a := actions[r.Intn(len(actions))]
		switch a {
		case aAlloc, aFreeR, aFreeC, snapshot.ActionFree:
			evs = append(evs, ev{a, addr() + unit/2*uint64(r.Intn(2)), uint64(1 + r.Intn(unit/2))})
		default:
			// Mostly far from the dump's segments and from each other,
			// so that many states have no two segments at one start (the
			// ones whose sorted arrays change in place). Some right after
			// the last one, where undoing maps and unmaps carves and
			// merges segments; some at the end of a dump's segment, or
			// its last unit (carving and growing the dump's own). At any
			// dump address only with an irregular dump: undoing an event
			// there often adds a segment at a start taken, and such a
			// state is never merged nor changed in place.
			at, sz := unit*uint64(64+r.Intn(1<<14)), size()
			switch r.Intn(10) {
			case 0:
				if irregular {
					at = addr()
				}
			case 1, 2, 3:
				at = segEnd
			case 4, 5:
				if len(segs) > 0 {
					d := &segs[r.Intn(len(segs))]
					at = d.Address + d.TotalSize
					if r.Intn(2) == 0 {
						at, sz = at-unit, unit
					}
				}
			}
			segEnd = at + sz
			evs = append(evs, ev{a, at, sz})
		}
	}
	return mkSnapshot(evs, segs, blocks)
}

// TestHistoryEveryCheckpoint: the state of every checkpoint, as stored
// (changes to the dump's sorted arrays) and as reached by StateAt, is the
// brute-force replay's from the snapshot, on random traces of every event
// kind with regular and inconsistent dumps.
func TestHistoryEveryCheckpoint(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for iter := 0; iter < 8; iter++ {
		irregular := iter%2 == 1
		s := randomSegmentSnapshot(r, 3*CheckpointEvery+r.Intn(CheckpointEvery), irregular)
		h := NewHistory(s, 0)
		if h.baseSorted(); irregular != (h.base != nil) || irregular == h.overlay {
			t.Fatalf("iter %d: irregular dump %v, kept as maps %v, states as overlays %v", iter, irregular, h.base != nil, h.overlay)
		}
		checkCheckpoints(t, fmt.Sprint("iter ", iter), h)
	}
}

// TestHistorySegmentStepsMatchNaive: steps back and forth through traces
// of every event kind, their sorted arrays changed in place (StateTop
// holds none of them), and jumps are the brute-force replay's.
func TestHistorySegmentStepsMatchNaive(t *testing.T) {
	r := rand.New(rand.NewSource(12))
	defer func(m int) { maxJournal = m }(maxJournal)
	for iter := 0; iter < 12; iter++ {
		maxJournal = []int{1 << 16, 20}[iter%2]
		s := randomSegmentSnapshot(r, 600+r.Intn(400), iter%4 >= 2)
		h := NewHistory(s, 0)
		idx := h.Len() - 1
		for k := 0; k < 400; k++ {
			switch {
			case k%50 == 49:
				idx = r.Intn(h.Len()+1) - 1 // a jump
			case k%9 == 4:
				idx -= r.Intn(30) // several events back
			case k%7 == 3:
				idx += 1 + r.Intn(3) // forward, through the states passed
			default:
				idx--
			}
			idx = max(-1, min(idx, h.Len()-1))
			if got, want := h.StateTop(idx, 3), topOf(naiveState(h, idx), 3); !reflect.DeepEqual(got, want) {
				t.Fatalf("iter %d step %d: StateTop(%d, 3) differs from the brute-force replay", iter, k, idx)
			}
		}
	}
}

// checkCheckpoints compares every checkpoint of h, and StateAt there and
// one event before, with the brute-force replay.
func checkCheckpoints(t *testing.T, name string, h *History) {
	t.Helper()
	h.wait()
	if len(h.ckpt) < 2 && h.Len() > 2*h.every {
		t.Fatalf("%s: %d checkpoints for %d events", name, len(h.ckpt), h.Len())
	}
	for _, c := range h.ckpt {
		want := naiveState(h, c.after)
		w := h.load(&c)
		blocks, segs := 0, 0
		w.blocks.each(func(uint64, blockRef) { blocks++ })
		w.segs.byStart.each(func(segRec) { segs++ })
		if blocks != w.blocks.len() || segs != w.segs.byStart.len() || blocks != len(want.Blocks) {
			t.Fatalf("%s: checkpoint after event %d holds %d blocks and %d segments, counts %d and %d, the replay %d blocks",
				name, c.after, blocks, segs, w.blocks.len(), w.segs.byStart.len(), len(want.Blocks))
		}
		if got := h.buildState(c.after, h.sortFull(w)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: checkpoint after event %d differs from the brute-force replay", name, c.after)
		}
		if got := h.StateAt(c.after); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: StateAt(%d) differs from the brute-force replay", name, c.after)
		}
		if c.after >= 0 {
			if got := h.StateAt(c.after - 1); !reflect.DeepEqual(got, naiveState(h, c.after-1)) {
				t.Fatalf("%s: StateAt(%d) differs from the brute-force replay", name, c.after-1)
			}
		}
	}
}

func TestHistoryHandMade(t *testing.T) {
	// Segment 0x100000 (2 MiB) holds a live block at the dump; the trace
	// allocated it, allocated and freed another block, and an expandable
	// segment was mapped in two steps.
	evs := []ev{
		{snapshot.ActionSegmentAlloc, 0x100000, 2 << 20},
		{aAlloc, 0x100000, 1000},
		{aAlloc, 0x100400, 3000},
		{aFreeR, 0x100400, 3000},
		{snapshot.ActionSegmentMap, 0x800000, 2 << 20},
		{snapshot.ActionSegmentMap, 0xa00000, 2 << 20},
		{aFreeC, 0x100400, 3000},
	}
	segs := []snapshot.Segment{
		{Address: 0x100000, TotalSize: 2 << 20, FirstBlock: 0, NumBlocks: 2},
		{Address: 0x800000, TotalSize: 4 << 20, FirstBlock: 2, NumBlocks: 1, IsExpandable: true},
	}
	blocks := []snapshot.Block{
		{Addr: 0x100000, Size: 1024, RequestedSize: 1000, State: snapshot.BlockActiveAllocated},
		{Addr: 0x100400, Size: 2<<20 - 1024, State: snapshot.BlockInactive},
		{Addr: 0x800000, Size: 4 << 20, State: snapshot.BlockInactive},
	}
	s := mkSnapshot(evs, segs, blocks)
	h := NewHistory(s, 0)
	if h.Len() != 7 {
		t.Fatalf("Len %d", h.Len())
	}
	cases := []struct {
		idx                 int
		segs, blocks        int
		reserved, allocated uint64
		pending             int
	}{
		{6, 2, 1, 6 << 20, 1000, 0},
		{5, 2, 2, 6 << 20, 4000, 1}, // before free_completed: pending
		{4, 2, 2, 4 << 20, 4000, 1}, // second map undone
		{3, 1, 2, 2 << 20, 4000, 1},
		{2, 1, 2, 2 << 20, 4000, 0}, // before free_requested
		{1, 1, 1, 2 << 20, 1000, 0},
		{0, 1, 0, 2 << 20, 0, 0},
		{-1, 0, 0, 0, 0, 0},
	}
	for _, c := range cases {
		st := h.StateAt(c.idx)
		if len(st.Segments) != c.segs || len(st.Blocks) != c.blocks || st.Reserved != c.reserved ||
			st.Allocated != c.allocated || st.PendingFree != c.pending {
			t.Errorf("StateAt(%d): %d segs %d blocks reserved %d allocated %d pending %d; want %+v",
				c.idx, len(st.Segments), len(st.Blocks), st.Reserved, st.Allocated, st.PendingFree, c)
		}
	}
	st := h.StateAt(6)
	if st.RoundingWaste != 24 || st.LargestFree != 4<<20 || st.FreeBytes != 6<<20-1024 {
		t.Errorf("dump state waste %d largest free %d free %d", st.RoundingWaste, st.LargestFree, st.FreeBytes)
	}
	if got := h.Event(4).Text; got != "segment_map    s'800000_0         2.0MiB (2097152 bytes)\n              (stream 0)" {
		t.Errorf("Event(4).Text = %q", got)
	}
}

func TestHistoryCheckpointsMatchNaive(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for iter := 0; iter < 10; iter++ {
		s := randomSnapshot(r, 9000+r.Intn(6000))
		h := NewHistory(s, 0)
		if len(h.ckpt) < 2 {
			t.Fatalf("iter %d: only %d checkpoints for %d events", iter, len(h.ckpt), h.Len())
		}
		for k := 0; k < 10; k++ {
			idx := r.Intn(h.Len()+1) - 1
			got, want := h.StateAt(idx), naiveState(h, idx)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("iter %d: StateAt(%d) differs from naive replay", iter, idx)
			}
		}
	}
}

// TestHistoryStepsMatchNaive: states reached by stepping from the last one
// (merged into its sorted arrays, see sortedState) and by jumps from
// checkpoints are the naive replay's.
func TestHistoryStepsMatchNaive(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	defer func(m int) { maxJournal = m }(maxJournal)
	for iter := 0; iter < 6; iter++ {
		if iter >= 3 {
			maxJournal = 20 // the journal drops its oldest records often
		}
		s := randomSnapshot(r, 3000+r.Intn(3000))
		h := NewHistory(s, 0)
		idx := h.Len() - 1
		for k := 0; k < 60; k++ {
			switch {
			case k%20 == 19:
				idx = r.Intn(h.Len()+1) - 1 // a jump
			case k%5 == 4:
				idx -= r.Intn(40) // several events back
			case k%7 == 3:
				idx += 1 + r.Intn(3) // forward, through the states passed
			default:
				idx-- // one step back
			}
			idx = max(-1, min(idx, h.Len()-1))
			want := naiveState(h, idx)
			if k%3 == 2 {
				n := 1 + r.Intn(len(want.Segments)+2)
				if got := h.StateTop(idx, n); !reflect.DeepEqual(got, topOf(want, n)) {
					t.Fatalf("iter %d step %d: StateTop(%d, %d) differs from naive replay's largest segments", iter, k, idx, n)
				}
				continue
			}
			if got := h.StateAt(idx); !reflect.DeepEqual(got, want) {
				t.Fatalf("iter %d step %d: StateAt(%d) differs from naive replay", iter, k, idx)
			}
		}
	}
}

// topOf is st with only its n largest segments and their blocks, as
// StateTop documents it.
func topOf(st *State, n int) *State {
	out := *st
	first := max(0, len(st.Segments)-n)
	if first == 0 {
		return st
	}
	out.Omitted = first
	out.Segments = slices.Clone(st.Segments[first:])
	out.Blocks = []StateBlock{}
	for i := range out.Segments {
		out.Segments[i].FirstBlock = -1
	}
	for _, b := range st.Blocks {
		if int(b.Segment) < first {
			continue
		}
		b.Segment -= int32(first)
		if sg := &out.Segments[b.Segment]; sg.FirstBlock < 0 {
			sg.FirstBlock = int32(len(out.Blocks))
		}
		out.Blocks = append(out.Blocks, b)
	}
	for i := range out.Segments {
		out.Segments[i].FirstBlock = max(out.Segments[i].FirstBlock, 0)
	}
	return &out
}

// TestStartHistoryMatchesNaive: with the checkpoints built in the
// background, states asked for at once (the end, steps back, anywhere,
// from several goroutines) are the naive replay's.
func TestStartHistoryMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for iter := 0; iter < 4; iter++ {
		s := randomSnapshot(r, 9000+r.Intn(6000))
		h := StartHistory(s, 0, nil, nil)
		n := h.Len()
		idxs := []int{n - 1, n - 2, n - 3, n - 10, n / 2, 0, -1, n - 4}
		for k := 0; k < 6; k++ {
			idxs = append(idxs, r.Intn(n+1)-1)
		}
		var wg sync.WaitGroup
		errs := make(chan string, len(idxs))
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for k, idx := range idxs {
					if k%3 != g && k > 3 {
						continue
					}
					if !reflect.DeepEqual(h.StateAt(idx), naiveState(h, idx)) {
						errs <- fmt.Sprintf("iter %d: StateAt(%d) differs from naive replay", iter, idx)
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Fatal(e)
		}
		h.wait()
		if len(h.ckpt) < 2 {
			t.Fatalf("iter %d: only %d checkpoints for %d events", iter, len(h.ckpt), n)
		}
	}
}

// TestStartHistoryBusy: while busy reports true the background build
// pauses, but a StateAt that needs a checkpoint it has not reached gets
// it (no deadlock), and the states are still the naive replay's; once busy
// clears, the build finishes.
func TestStartHistoryBusy(t *testing.T) {
	s := randomSnapshot(rand.New(rand.NewSource(7)), 30000)
	var busy atomic.Bool
	busy.Store(true)
	h := StartHistory(s, 0, nil, busy.Load)
	n := h.Len()
	done := make(chan bool)
	go func() {
		ok := true
		for _, idx := range []int{n - 2, n / 2, 0, -1} {
			ok = ok && reflect.DeepEqual(h.StateAt(idx), naiveState(h, idx))
		}
		done <- ok
	}()
	select {
	case ok := <-done:
		if !ok {
			t.Error("states differ from the naive replay while busy")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("StateAt far back never returned while the user was busy")
	}
	busy.Store(false)
	h.wait()
	if len(h.ckpt) < 2 {
		t.Fatalf("only %d checkpoints for %d events", len(h.ckpt), n)
	}
}

func TestFormatAddr(t *testing.T) {
	if got := FormatAddr(false, 0x7f4c00000, 3); got != "b'7f4c00000_3" {
		t.Errorf("addr %q", got)
	}
	if got := FormatAddr(true, 0xabc, 0); got != "s'abc_0" {
		t.Errorf("addr %q", got)
	}
	got := elideRepeats([]string{"a", "b", "b", "c", "c", "c", "c", "d"})
	want := []string{"a", "b", "b", "c", "<repeats 3 times>", "d"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("elideRepeats = %q", got)
	}
}

// TestHistoryManySegments builds the history of 100k segments live at the
// dump and 100k short-lived ones (300k segment events): undoing a segment
// event must not cost a pass over all segments (that took minutes). The
// bounds are far above the linear cost (well under a second) so that a
// loaded machine cannot fail the test, yet far below the quadratic one.
func TestHistoryManySegments(t *testing.T) {
	const live = 100_000
	var evs []ev
	var segs []snapshot.Segment
	var blocks []snapshot.Block
	tmp := uint64(1 << 44)
	for k := 0; k < live; k++ {
		addr, size := uint64(1<<40)+uint64(k)<<22, uint64(2<<20)+uint64(k%7)<<20
		evs = append(evs, ev{snapshot.ActionSegmentAlloc, addr, size},
			ev{snapshot.ActionSegmentAlloc, tmp, 2 << 20}, ev{snapshot.ActionSegmentFree, tmp, 2 << 20})
		tmp += 2 << 20
		segs = append(segs, snapshot.Segment{Address: addr, TotalSize: size, FirstBlock: int32(len(blocks)), NumBlocks: 1})
		blocks = append(blocks, snapshot.Block{Addr: addr, Size: size, State: snapshot.BlockInactive})
	}
	s := mkSnapshot(evs, segs, blocks)
	start := time.Now()
	h := NewHistory(s, 0)
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("NewHistory of %d segment events took %v, want < 30s (quadratic undo?)", len(evs), el)
	}
	for _, idx := range []int{len(evs) - 1, len(evs) / 2, len(evs)/2 + 1, 3000, -1} {
		start = time.Now()
		got := h.StateAt(idx)
		if el := time.Since(start); el > 10*time.Second {
			t.Errorf("StateAt(%d) took %v, want < 10s (a pass per segment?)", idx, el)
		}
		// Segment alloc k is event 3k; the temporary one is freed by 3k+2.
		want := 0
		if idx >= 0 {
			want = idx/3 + 1
			if idx%3 == 1 {
				want++
			}
		}
		if len(got.Segments) != want {
			t.Errorf("StateAt(%d): %d segments, want %d", idx, len(got.Segments), want)
		}
		if !reflect.DeepEqual(got, naiveState(h, idx)) {
			t.Errorf("StateAt(%d) differs from naive replay", idx)
		}
	}
}

// TestStepsAllocateLittle: after the dump's state, steps back change the
// last state's sorted arrays in place (a second set was 70 MB on a 1 GB
// snapshot, and faulting fresh arrays in was most of a step's time), and
// are still the naive replay's. After a StateAt, whose State holds the
// blocks, the next step allocates the arrays, which shows the measure can
// fail.
func TestStepsAllocateLittle(t *testing.T) {
	const live = 40_000
	var evs []ev
	var segs []snapshot.Segment
	var blocks []snapshot.Block
	tmp := uint64(1 << 44)
	for k := 0; k < live; k++ {
		addr, size := uint64(1<<40)+uint64(k)<<22, uint64(2<<20)+uint64(k%7)<<20
		evs = append(evs, ev{snapshot.ActionSegmentAlloc, addr, size}, ev{snapshot.ActionAlloc, addr, 1 << 20})
		segs = append(segs, snapshot.Segment{Address: addr, TotalSize: size, FirstBlock: int32(len(blocks)), NumBlocks: 2})
		blocks = append(blocks, snapshot.Block{Addr: addr, Size: 1 << 20, RequestedSize: 1 << 20, State: snapshot.BlockActiveAllocated},
			snapshot.Block{Addr: addr + 1<<20, Size: size - 1<<20, State: snapshot.BlockInactive})
	}
	for k := 0; k < 4; k++ {
		evs = append(evs, ev{snapshot.ActionSegmentAlloc, tmp, 2 << 20}, ev{snapshot.ActionSegmentFree, tmp, 2 << 20})
		tmp += 2 << 20
	}
	s := mkSnapshot(evs, segs, blocks)
	arrays := uint64(live) * uint64(unsafe.Sizeof(StateBlock{})+unsafe.Sizeof(segRec{})+4+8)
	allocated := func(f func()) uint64 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		f()
		runtime.ReadMemStats(&m1)
		return m1.TotalAlloc - m0.TotalAlloc
	}
	for _, shared := range []bool{false, true} {
		h := StartHistory(s, 0, nil, nil)
		h.wait()
		n := h.Len()
		h.StateTop(n-1, 100)
		steps := []int{n - 2, n - 3, n - 4, n - 3}
		if shared {
			h.StateAt(n - 2)
			steps = steps[1:]
		}
		var most uint64
		for _, idx := range steps {
			var st *State
			most = max(most, allocated(func() { st = h.StateTop(idx, 100) }))
			if !reflect.DeepEqual(st, topOf(naiveState(h, idx), 100)) {
				t.Fatalf("shared %v: StateTop(%d) differs from the naive replay", shared, idx)
			}
		}
		switch {
		case !shared && most > arrays/4:
			t.Errorf("a step allocated %d bytes, want < %d (a quarter of the sorted arrays)", most, arrays/4)
		case shared && most < arrays:
			t.Errorf("a step from a shared state allocated only %d bytes, want the sorted arrays' %d: the measure cannot tell", most, arrays)
		}
	}
}

// TestStartHistoryPause checks that StartHistoryPaused calls its pause
// about every 65,536 blocks and segments while it takes in the dump's
// state and does not go on while the pause blocks (a server parks it so
// while it answers a window), and that the states are the naive replay's.
func TestStartHistoryPause(t *testing.T) {
	s := randomSnapshot(rand.New(rand.NewSource(11)), 30000)
	items := 0
	for _, seg := range s.Segments {
		if seg.Device == 0 {
			items += 1 + int(seg.NumBlocks)
		}
	}
	var calls atomic.Int32
	hold := make(chan struct{})
	done := make(chan *History)
	go func() {
		done <- StartHistoryPaused(s, 0, nil, nil, func() {
			calls.Add(1)
			<-hold
		})
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("StartHistoryPaused went on while its pause blocked")
	default:
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("%d pauses while held, want 1", c)
	}
	close(hold)
	h := <-done
	if want := (items + pauseEvery) / (pauseEvery + 1); int(calls.Load()) < want {
		t.Fatalf("%d pauses over %d blocks and segments, want at least %d", calls.Load(), items, want)
	}
	n := h.Len()
	for _, idx := range []int{n - 1, n - 2, n / 2, -1} {
		if !reflect.DeepEqual(h.StateAt(idx), naiveState(h, idx)) {
			t.Fatalf("state after %d differs from the naive replay", idx)
		}
	}
}
