package analysis

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// ev is one trace entry of a hand-built snapshot; frames are
// "file:line:name" strings, innermost first.
type ev struct {
	action string
	addr   uint64
	size   uint64
	time   int64
	frames []string
	free   uint64 // device_free for oom
}

// blk is one block of a hand-built dump segment.
type blk struct {
	size, req uint64
	state     string
	frames    []string
}

// seg is one hand-built dump segment at addr.
type seg struct {
	addr   uint64
	blocks []blk
}

// build decodes a hand-built snapshot written as PyTorch's JSON (the
// spec's key names), so tests go through the real decoder.
func build(t testing.TB, segs []seg, events []ev, annotations ...map[string]any) *snapshot.Snapshot {
	t.Helper()
	frames := func(fs []string) []map[string]any {
		out := []map[string]any{}
		for _, f := range fs {
			p := strings.SplitN(f, ":", 3)
			line := 0
			for _, c := range p[1] {
				line = line*10 + int(c-'0')
			}
			out = append(out, map[string]any{"filename": p[0], "line": line, "name": p[2]})
		}
		return out
	}
	var js []map[string]any
	for _, sg := range segs {
		addr := sg.addr
		var total, alloc, active, req uint64
		var blocks []map[string]any
		for _, b := range sg.blocks {
			blocks = append(blocks, map[string]any{"address": addr, "size": b.size, "requested_size": b.req, "state": b.state, "frames": frames(b.frames)})
			addr += b.size
			total += b.size
			if b.state != "inactive" {
				active += b.size
				req += b.req
				if b.state == "active_allocated" {
					alloc += b.size
				}
			}
		}
		js = append(js, map[string]any{"device": 0, "address": sg.addr, "total_size": total, "allocated_size": alloc,
			"active_size": active, "requested_size": req, "stream": 0, "segment_type": "large",
			"segment_pool_id": []int{0, 0}, "is_expandable": false, "frames": []any{}, "blocks": blocks})
	}
	var tr []map[string]any
	for _, e := range events {
		m := map[string]any{"action": e.action}
		if e.action == "oom" {
			m["device_free"] = e.free
		} else {
			m["addr"] = e.addr
		}
		m["size"], m["stream"], m["time_us"] = e.size, 0, e.time
		if e.frames != nil {
			m["frames"] = frames(e.frames)
		}
		tr = append(tr, m)
	}
	if js == nil {
		js = []map[string]any{}
	}
	if tr == nil {
		tr = []map[string]any{}
	}
	doc := map[string]any{"segments": js, "device_traces": [][]map[string]any{tr}}
	if annotations != nil {
		doc["external_annotations"] = annotations
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Decode(strings.NewReader(string(b)), "test.json", nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
