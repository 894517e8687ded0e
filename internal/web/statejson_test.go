package web

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
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

// TestDumpStateJSONDemo: on the demo snapshot and on one with more
// segments than an answer draws (only the largest sent), the dump's
// answer is the history's byte for byte; /api/state without idx serves
// it before any history exists, and the events list needs none either.
func TestDumpStateJSONDemo(t *testing.T) {
	snap, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	checkDumpStateJSON(t, "demo", snap, snap.DefaultDevice())
	checkDumpStateJSON(t, "many segments", manySegments(maxStateSegments+50), 0)
}

// TestStateOpensWithoutHistory: the requests that open the state view
// (the events list, the state at the end) are answered from the dump,
// and the answer is the one at that index with the history, which the
// open starts from the same dump (no second intake of the snapshot).
func TestStateOpensWithoutHistory(t *testing.T) {
	srv, h := newTestServer(t)
	ev := get(t, h, "localhost:8123", "/api/events?view=state&from=0&count=200")
	end := get(t, h, "localhost:8123", "/api/state?view=state")
	if ev.Code != 200 || end.Code != 200 {
		t.Fatalf("status %d, %d", ev.Code, end.Code)
	}
	dd := srv.files[0].device(0)
	if !dd.dump.done.Load() {
		t.Fatal("the state at the end was not answered from the dump")
	}
	last := len(dd.viz) - 1
	if w := get(t, h, "localhost:8123", "/api/state?view=state&idx="+itoa(last)); w.Body.String() != end.Body.String() {
		t.Fatalf("idx %d answers\n%s\nthe default\n%s", last, w.Body.String(), end.Body.String())
	}
	hist, err := dd.stateHist()
	if err != nil {
		t.Fatal(err)
	}
	if hist.h != dd.dumpSource().StartHistory(nil, nil, nil) {
		t.Fatal("the state history is not the one the dump started")
	}
	var b strings.Builder
	if err := hist.build(last).writeTo(&b); err != nil {
		t.Fatal(err)
	}
	if b.String() != end.Body.String() {
		t.Fatalf("the history's state at the end\n%s\ndiffers from the answer\n%s", b.String(), end.Body.String())
	}
	if get(t, h, "localhost:8123", "/api/state?view=state&idx="+itoa(last-1)).Code != 200 {
		t.Fatal("a step back failed")
	}
}

// manySegments is a snapshot of n segments of sizes in no order, with
// blocks active, pending and free, and no trace.
func manySegments(n int) *snapshot.Snapshot {
	s := &snapshot.Snapshot{Strings: []string{""}, Streams: []int64{0}, Stacks: snapshot.StackTable{Offsets: []int32{0, 0}}}
	addr := uint64(1 << 30)
	for i := range n {
		size := uint64(2<<20) * uint64(1+(i*7919)%13)
		s.Segments = append(s.Segments, snapshot.Segment{Address: addr, TotalSize: size, FirstBlock: int32(len(s.Blocks)), NumBlocks: 2})
		s.Blocks = append(s.Blocks,
			snapshot.Block{Addr: addr, Size: size / 2, RequestedSize: size/2 - uint64(i%512), HasRequestedSize: true, State: snapshot.BlockState(i % 3)},
			snapshot.Block{Addr: addr + size/2, Size: size / 2, State: snapshot.BlockState((i + 1) % 3)})
		addr += size
	}
	s.Traces = []snapshot.Trace{{}}
	return s
}
