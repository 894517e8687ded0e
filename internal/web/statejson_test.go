package web

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/replay"
)

// decodeAny decodes b for comparison.
func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v in %.200s", err, b)
	}
	return v
}

// TestStateJSONMatchesEncodingJSON: the hand-written state answer decodes
// to what encoding/json writes for the same state, at several moments of
// the demo snapshot, with each block an array [offset, size, requested,
// pending (a bool), version].
func TestStateJSONMatchesEncodingJSON(t *testing.T) {
	snap, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	dev := snap.DefaultDevice()
	h := &stateHistory{d: newDeviceData(snap, dev), h: replay.NewHistory(snap, dev)}
	n := h.h.Len()
	blocks := 0
	for _, idx := range []int{n - 1, n - 2, n / 2, 1, 0, -1} {
		st := h.build(idx)
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if got, exp := decodeAny(t, st.appendJSON(nil)), decodeAny(t, want); !reflect.DeepEqual(got, exp) {
			t.Errorf("state after %d: hand-written and encoding/json answers differ", idx)
		}
		for _, s := range st.Segments {
			for _, b := range s.Blocks {
				blocks++
				exp, _ := json.Marshal([]any{b.Offset, b.Size, b.Requested, b.Pending, b.Version})
				if got := string(b.appendJSON(nil)); got != string(exp) {
					t.Fatalf("block %+v: wrote %s, want %s", b, got, exp)
				}
				var back blockJSON
				if err := json.Unmarshal(exp, &back); err != nil || back != b {
					t.Fatalf("block %s read back as %+v (%v)", exp, back, err)
				}
			}
		}
	}
	if blocks == 0 {
		t.Fatal("the demo's states have no blocks to check")
	}
}

// TestStateJSONStrings: text that JSON must escape, and numbers
// encoding/json writes with an exponent, come out as it writes them.
func TestStateJSONStrings(t *testing.T) {
	st := &stateJSON{Event: "alloc \"x\"\n\tb'\\'", Stack: "f ← g \x01", Text: "<(1 GiB)>", Frag: 1e-9, Allocated: 3e21,
		Segments: []segJSON{{Addr: "b'7f\"0", Size: 2, Pool: []int64{1, 2}, Blocks: []blockJSON{{1, 2, 0.5, true, 3}}}}, Omitted: 4}
	want, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if got, exp := decodeAny(t, st.appendJSON(nil)), decodeAny(t, want); !reflect.DeepEqual(got, exp) {
		t.Errorf("got %s\nwant %s", st.appendJSON(nil), want)
	}
	if err := json.Unmarshal([]byte(`[1,2,3,"no",5]`), new(blockJSON)); err == nil {
		t.Error("a block with a string for pending was read")
	}
}
