package snapshot

import (
	"slices"
	"testing"
	"unsafe"
)

// TestEventSize keeps a trace entry at 32 bytes: the entries are most of
// a decoded snapshot's memory (half the file's size at 32 bytes; the
// address version and the meta are columns of the Trace).
func TestEventSize(t *testing.T) {
	if n := unsafe.Sizeof(Event{}); n != 32 {
		t.Fatalf("Event is %d bytes, want 32", n)
	}
}

// TestAddMeta checks that AddMeta gives each distinct EventMeta one id,
// the zero one 0, and that EventMeta reads them back, an id out of range
// as none.
func TestAddMeta(t *testing.T) {
	var s Snapshot
	metas := []EventMeta{
		{}, {CompileContext: 1}, {CompileContext: 1}, {UserMetadata: 2}, {CompileContext: 1},
		{CompileContext: 1, UserMetadata: 2}, {Extra: 3}, {UserMetadata: 2}, {}, {CompileContext: 1, UserMetadata: 2, Extra: 4},
	}
	ids := map[EventMeta]MetaID{}
	for i, m := range metas {
		id := s.AddMeta(m)
		if m == (EventMeta{}) && id != 0 {
			t.Fatalf("meta %d: the zero EventMeta has id %d", i, id)
		}
		if prev, ok := ids[m]; ok && prev != id {
			t.Fatalf("meta %d %+v: id %d, earlier %d", i, m, id, prev)
		}
		ids[m] = id
		if got := s.Meta(id); got != m {
			t.Fatalf("meta %d: read back %+v, added %+v", i, got, m)
		}
	}
	if len(s.Metas) != 6 { // the zero one and five distinct
		t.Fatalf("%d metas kept, want 6: %+v", len(s.Metas), s.Metas)
	}
	// A snapshot whose Metas were filled in without AddMeta.
	s2 := Snapshot{Metas: []EventMeta{{}, {CompileContext: 7}}}
	if id := s2.AddMeta(EventMeta{CompileContext: 7}); id != 1 {
		t.Fatalf("existing meta got id %d, want 1", id)
	}
	for _, id := range []MetaID{-1, 2, 99} {
		if got := s2.Meta(id); got != (EventMeta{}) {
			t.Fatalf("id %d out of range read as %+v", id, got)
		}
	}
}

// TestMetaRuns checks the runs of a trace's MetaIDs against one id per
// event: SetMetas, MetaID, the cursor read in order, backwards and by
// jumps, EventMeta, and the runs of a part of the trace (a trace that is
// a part of the decoded entries).
func TestMetaRuns(t *testing.T) {
	cases := [][]MetaID{
		nil,
		{0, 0, 0},
		{1, 1, 1, 1},
		{0, 0, 2, 2, 0, 3, 3, 3, 1, 0},
		{4, 0, 4, 0, 4},
		{1, 2, 3, 4, 5, 6},
	}
	s := Snapshot{Metas: []EventMeta{{}, {CompileContext: 1}, {UserMetadata: 2}, {Extra: 3}, {CompileContext: 4}, {Extra: 5}, {Extra: 6}}}
	for ci, ids := range cases {
		var tr Trace
		tr.SetMetas(ids)
		nonzero := false
		for _, id := range ids {
			nonzero = nonzero || id != 0
		}
		if (tr.MetaRuns == nil) == nonzero {
			t.Errorf("case %d: runs %v for %v", ci, tr.MetaRuns, ids)
		}
		for k, r := range tr.MetaRuns {
			if k == 0 && r.Meta == 0 || k > 0 && (r.Meta == tr.MetaRuns[k-1].Meta || r.First <= tr.MetaRuns[k-1].First) {
				t.Errorf("case %d: runs %v not in their form", ci, tr.MetaRuns)
			}
		}
		c := tr.Metas()
		for i, id := range ids {
			if got := tr.MetaID(i); got != id {
				t.Errorf("case %d: MetaID(%d) %d, want %d", ci, i, got, id)
			}
			if got := c.At(i); got != id {
				t.Errorf("case %d: cursor at %d: %d, want %d", ci, i, got, id)
			}
			if got := s.EventMeta(&tr, i); got != s.Metas[id] {
				t.Errorf("case %d: EventMeta(%d) %+v", ci, i, got)
			}
		}
		c = tr.Metas()
		for i := len(ids) - 1; i >= 0; i -= 2 {
			if got := c.At(i); got != ids[i] {
				t.Errorf("case %d: cursor back at %d: %d, want %d", ci, i, got, ids[i])
			}
		}
		for lo := 0; lo <= len(ids); lo++ {
			for hi := lo; hi <= len(ids); hi++ {
				var want Trace
				want.SetMetas(ids[lo:hi])
				got := sliceMetaRuns(tr.MetaRuns, lo, hi)
				if !slices.Equal(got, want.MetaRuns) {
					t.Errorf("case %d: runs of %d..%d %v, want %v", ci, lo, hi, got, want.MetaRuns)
				}
			}
		}
	}
}

// TestMetasOutOfOrder checks the metas of a trace whose entries are not
// a run of the decoded ones (listed out of order, after being decoded in
// another list): each entry keeps its own compile context.
func TestMetasOutOfOrder(t *testing.T) {
	str := func(s string) []byte { return append([]byte{0x8c, byte(len(s))}, s...) }
	entry := func(addr byte, cc string) []byte {
		b := []byte{'}', '('}
		b = append(b, str("action")...)
		b = append(b, str("alloc")...)
		b = append(b, str("addr")...)
		b = append(b, 'K', addr)
		b = append(b, str("size")...)
		b = append(b, 'K', 16)
		if cc != "" {
			b = append(b, str("compile_context")...)
			b = append(b, str(cc)...)
		}
		return append(b, 'u')
	}
	var b []byte
	b = append(b, 0x80, 4, '}', '(')
	b = append(b, str("segments")...)
	b = append(b, ']')
	b = append(b, str("x")...)
	b = append(b, ']', '(')
	b = append(b, entry(1, "a")...)
	b = append(b, 'q', 1)
	b = append(b, entry(2, "b")...)
	b = append(b, 'q', 2)
	b = append(b, entry(3, "")...)
	b = append(b, 'q', 3, 'e')
	b = append(b, str("device_traces")...)
	b = append(b, ']', '(', ']', '(')
	b = append(b, 'h', 2, 'h', 1, 'h', 3)
	b = append(b, entry(4, "a")...)
	b = append(b, 'e', 'e', 'u', '.')
	s, err := DecodeBytes(b, "out-of-order.pickle", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &s.Traces[0]
	want := []struct {
		addr uint64
		cc   string
	}{{2, "b"}, {1, "a"}, {3, ""}, {4, "a"}}
	if len(tr.Events) != len(want) {
		t.Fatalf("%d entries, want %d", len(tr.Events), len(want))
	}
	for i, w := range want {
		if got := s.Text(s.EventMeta(tr, i).CompileContext); tr.Events[i].Addr != w.addr || got != w.cc {
			t.Errorf("entry %d: addr %d compile_context %q, want %d %q", i, tr.Events[i].Addr, got, w.addr, w.cc)
		}
	}
}
