package replay

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// checkDump fails when a Dump's state differs from the History's at its
// last event, in full and with only the largest segments.
func checkDump(t *testing.T, name string, s *snapshot.Snapshot, device int) {
	t.Helper()
	h := NewHistory(s, device)
	n := h.Len()
	segs := len(h.StateAt(n - 1).Segments)
	for _, top := range []int{1 << 30, segs, segs - 1, 3, 1} {
		if top < 1 {
			continue
		}
		want := h.StateTop(n-1, top)
		d := NewDump(s, device)
		if d.Len() != n {
			t.Fatalf("%s device %d: Dump.Len() = %d, History's %d", name, device, d.Len(), n)
		}
		got := d.StateTop(top)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s device %d top %d: the Dump's state (%d segments, %d blocks, %d allocated) differs from the History's at %d (%d, %d, %d)",
				name, device, top, len(got.Segments), len(got.Blocks), got.Allocated, n-1, len(want.Segments), len(want.Blocks), want.Allocated)
		}
		if n > 0 && d.EventStack(n-1, got) != h.EventStack(n-1, want) {
			t.Fatalf("%s device %d: event texts differ", name, device)
		}
	}
}

// TestDumpMatchesHistory: on random dumps, regular and inconsistent (two
// segments at one start or end, two blocks at one address, private
// pools, another device), a Dump's state is the History's at its end.
func TestDumpMatchesHistory(t *testing.T) {
	r := rand.New(rand.NewSource(32))
	for iter := 0; iter < 60; iter++ {
		s := randomSegmentSnapshot(r, r.Intn(300), iter%2 == 1)
		if iter%3 == 0 && len(s.Segments) > 1 {
			// A segment whose blocks are another's again (a map keeps the
			// last at each address), on a segment of its own address range.
			a := s.Segments[r.Intn(len(s.Segments))]
			first := int32(len(s.Blocks))
			for bi := a.FirstBlock; bi < a.FirstBlock+a.NumBlocks; bi++ {
				b := s.Blocks[bi]
				b.State = snapshot.BlockState(r.Intn(3))
				b.RequestedSize = uint64(1 + r.Intn(1000))
				s.Blocks = append(s.Blocks, b)
			}
			a.FirstBlock, a.Version = first, 1
			s.Segments = append(s.Segments, a)
		}
		if iter%4 == 0 {
			// Segments of device 1, which device 0's state leaves out.
			s.Segments = append(s.Segments, snapshot.Segment{Device: 1, Address: 0x100000, TotalSize: 0x100000, FirstBlock: 0, NumBlocks: 1})
		}
		for dev := 0; dev < 2; dev++ {
			checkDump(t, "random", s, dev)
		}
	}
	// No segments, no events.
	checkDump(t, "empty", mkSnapshot(nil, nil, nil), 0)
}

// TestCorpusDumpMatchesHistory: on every real snapshot with segments, a
// Dump's state is the History's at its end.
func TestCorpusDumpMatchesHistory(t *testing.T) {
	eachCorpusDevice(t, func(name string, s *snapshot.Snapshot, dev int) {
		checkDump(t, name, s, dev)
	})
}

// eachCorpusDevice calls f for every device of every real snapshot with
// segments (a dump to lay out), and fails when there is none.
func eachCorpusDevice(t *testing.T, f func(name string, s *snapshot.Snapshot, dev int)) {
	files := corpus.Files(t)
	checked := 0
	for _, path := range files {
		s, err := snapshot.Open(path, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(s.Segments) == 0 {
			continue
		}
		checked++
		for _, dev := range s.Devices() {
			f(filepath.Base(path), s, dev)
		}
	}
	t.Logf("%d of %d snapshots have segments", checked, len(files))
	if checked == 0 {
		corpus.Missing(t, "no real snapshot with segments")
	}
}

// checkDumpHistory fails when the History a Dump starts (from its sorted
// state, after the view's open: StateTop) answers any of idxs other than
// a History of its own (NewHistory, which takes in the dump from the
// snapshot) and the naive replay, or when the Dump's state at the end
// changes meanwhile (the History reads the Dump's arrays, which stay as
// they are). Steps are asked as the view asks them: one after another,
// with the Dump's open beside them.
func checkDumpHistory(t *testing.T, name string, s *snapshot.Snapshot, device int, idxs []int) {
	t.Helper()
	ref := NewHistory(s, device)
	d := NewDump(s, device)
	open := d.StateTop(maxTop)
	h := d.StartHistory(nil, nil, nil)
	if h != d.StartHistory(nil, nil, nil) {
		t.Fatalf("%s device %d: a second StartHistory started another History", name, device)
	}
	if !d.shared {
		// StartHistoryPaused's, unchanged. On an inconsistent dump
		// (segments sharing an end) its states can depend on where it
		// undoes from and on the order of its maps: two of them can
		// differ by a segment (a merge undoing an unmap), so none is the
		// reference here.
		h.wait()
		return
	}
	for _, idx := range idxs {
		got, want := h.StateTop(idx, maxTop), ref.StateTop(idx, maxTop)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s device %d: at %d the Dump's History (%d segments, %d blocks, %d allocated) differs from NewHistory's (%d, %d, %d)",
				name, device, idx, len(got.Segments), len(got.Blocks), got.Allocated, len(want.Segments), len(want.Blocks), want.Allocated)
		}
		if got := h.StateTop(idx, 3); !reflect.DeepEqual(got, ref.StateTop(idx, 3)) {
			t.Fatalf("%s device %d: at %d the Dump's History's 3 largest segments differ from NewHistory's", name, device, idx)
		}
	}
	if again := d.StateTop(maxTop); !reflect.DeepEqual(again, open) {
		t.Fatalf("%s device %d: the Dump's state changed while its History answered", name, device)
	}
	h.wait()
}

// maxTop asks for every segment of a state.
const maxTop = 1 << 30

// stepIdxs are the state view's indexes: the first steps back from the
// end, a step forward, a jump far back and steps from there, and some
// anywhere.
func stepIdxs(r *rand.Rand, n int) []int {
	var idxs []int
	for k := 2; k <= 7 && n-k >= -1; k++ {
		idxs = append(idxs, n-k)
	}
	idxs = append(idxs, n-3, n-1, n-2)
	for k := 0; k < 4; k++ {
		i := r.Intn(n+1) - 1
		idxs = append(idxs, i, max(i-1, -1), i)
	}
	return append(idxs, -1, 0, n-2)
}

// TestDumpHistoryMatchesHistory: on random dumps and traces of every
// event kind, regular (whose History starts from the Dump's sorted state:
// checked) and inconsistent (two segments at one start or end, blocks at
// one address, segments out of address order), the History a Dump starts
// answers every state the view asks as NewHistory's and the naive replay.
func TestDumpHistoryMatchesHistory(t *testing.T) {
	r := rand.New(rand.NewSource(321))
	shared := 0
	for iter := 0; iter < 40; iter++ {
		irregular := iter%4 == 3
		s := randomSegmentSnapshot(r, 200+r.Intn(3*CheckpointEvery), irregular)
		switch iter % 5 {
		case 1:
			// The snapshot's segments out of address order.
			r.Shuffle(len(s.Segments), func(i, j int) { s.Segments[i], s.Segments[j] = s.Segments[j], s.Segments[i] })
		case 2:
			// A block at an address another segment's block has (a map
			// keeps the last), in a segment of its own.
			if len(s.Blocks) > 0 {
				b := s.Blocks[r.Intn(len(s.Blocks))]
				b.State, b.RequestedSize = snapshot.BlockActiveAllocated, 7
				s.Segments = append(s.Segments, snapshot.Segment{Address: 1 << 40, TotalSize: 1 << 20, FirstBlock: int32(len(s.Blocks)), NumBlocks: 1})
				s.Blocks = append(s.Blocks, b)
			}
		}
		d := NewDump(s, 0)
		d.sorted()
		if d.shared {
			shared++
		}
		n := d.Len()
		idxs := stepIdxs(r, n)
		for idx := range n + 1 {
			if idx%401 == 0 {
				idxs = append(idxs, idx-1)
			}
		}
		checkDumpHistory(t, fmt.Sprintf("random %d (shared %v)", iter, d.shared), s, 0, idxs)
		if !d.shared {
			// NewHistory's own (checked above): on an inconsistent dump
			// it can differ from the naive replay after loading a
			// checkpoint (segments sharing an end), which the Dump's
			// History does not change.
			continue
		}
		for _, idx := range idxs {
			h := d.StartHistory(nil, nil, nil)
			if got := h.StateAt(idx); !reflect.DeepEqual(got, naiveState(h, idx)) {
				t.Fatalf("iter %d: at %d the Dump's History differs from the naive replay", iter, idx)
			}
		}
	}
	if shared < 20 {
		t.Fatalf("only %d of 40 random dumps started their History from the Dump's sorted state", shared)
	}
	checkDumpHistory(t, "empty", mkSnapshot(nil, nil, nil), 0, []int{-1})
}

// TestDumpHistoryConcurrent: the Dump lays out its state while its
// History builds its checkpoints and answers steps (go test -race).
func TestDumpHistoryConcurrent(t *testing.T) {
	s := randomSegmentSnapshot(rand.New(rand.NewSource(9)), 3*CheckpointEvery, false)
	d := NewDump(s, 0)
	want := d.StateTop(5)
	if !d.shared {
		t.Fatal("a regular dump's History does not start from its sorted state")
	}
	h := d.StartHistory(nil, nil, nil)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if got := d.StateTop(5); !reflect.DeepEqual(got, want) {
				t.Error("the Dump's state changed while its History answered")
				return
			}
		}
	}()
	n := h.Len()
	for k := 2; k < 40; k++ {
		if got := h.StateAt(n - k); !reflect.DeepEqual(got, naiveState(h, n-k)) {
			t.Fatalf("at %d the Dump's History differs from the naive replay", n-k)
		}
	}
	wg.Wait()
	h.wait()
}

// TestCorpusDumpHistoryMatchesHistory: on every real snapshot with
// segments, the History a Dump starts answers the view's steps back from
// the end, a step forward, jumps and the states at checkpoints as
// NewHistory's.
func TestCorpusDumpHistoryMatchesHistory(t *testing.T) {
	r := rand.New(rand.NewSource(32))
	shared, devices := 0, 0
	eachCorpusDevice(t, func(name string, s *snapshot.Snapshot, dev int) {
		devices++
		d := NewDump(s, dev)
		if d.sorted(); d.shared {
			shared++
		}
		n := d.Len()
		idxs := stepIdxs(r, n)
		for c := n - 1 - CheckpointEvery; c >= 0 && len(idxs) < 40; c -= CheckpointEvery {
			idxs = append(idxs, c, c-1)
		}
		checkDumpHistory(t, name, s, dev, idxs)
	})
	t.Logf("%d of %d devices' Histories started from the Dump's sorted state", shared, devices)
	if shared == 0 {
		t.Fatal("no real dump's History started from the Dump's sorted state")
	}
}
