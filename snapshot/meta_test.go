package snapshot

import (
	"testing"
	"unsafe"
)

// TestEventSize keeps a trace entry at 40 bytes: the entries are most of
// a decoded snapshot's memory (0.6 of the file's size at 40 bytes).
func TestEventSize(t *testing.T) {
	if n := unsafe.Sizeof(Event{}); n != 40 {
		t.Fatalf("Event is %d bytes, want 40", n)
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
		if got := s.EventMeta(&Event{Meta: id}); got != m {
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
		if got := s2.EventMeta(&Event{Meta: id}); got != (EventMeta{}) {
			t.Fatalf("id %d out of range read as %+v", id, got)
		}
	}
}
