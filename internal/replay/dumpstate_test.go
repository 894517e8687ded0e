package replay

import (
	"math/rand"
	"path/filepath"
	"reflect"
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
			checkDump(t, filepath.Base(path), s, dev)
		}
	}
	t.Logf("%d of %d snapshots have segments", checked, len(files))
	if checked == 0 {
		corpus.Missing(t, "no real snapshot with segments")
	}
}
