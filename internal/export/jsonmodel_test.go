package export

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// JSONModel is WriteJSON's documented schema, for reading it back.
type JSONModel struct {
	Schema string `json:"schema"`
	Source struct {
		Name           string `json:"name"`
		Generation     string `json:"generation"`
		Encoding       string `json:"encoding"`
		Compression    string `json:"compression"`
		PickleProtocol int    `json:"pickle_protocol"`
		Bytes          int64  `json:"bytes"`
	} `json:"source"`
	Frames []struct {
		Filename string `json:"filename"`
		Name     string `json:"name"`
		Line     int64  `json:"line"`
	} `json:"frames"`
	Stacks   [][]int32 `json:"stacks"`
	Streams  []int64   `json:"streams"`
	Segments []struct {
		Device        int       `json:"device"`
		Address       uint64    `json:"address"`
		TotalSize     uint64    `json:"total_size"`
		AllocatedSize uint64    `json:"allocated_size"`
		ActiveSize    uint64    `json:"active_size"`
		RequestedSize uint64    `json:"requested_size"`
		Stream        int       `json:"stream"`
		SegmentType   string    `json:"segment_type"`
		PoolID        *[2]int64 `json:"pool_id"`
		IsExpandable  bool      `json:"is_expandable"`
		Stack         int32     `json:"stack"`
		Blocks        []struct {
			Address       uint64  `json:"address"`
			Size          uint64  `json:"size"`
			RequestedSize *uint64 `json:"requested_size"`
			State         string  `json:"state"`
			Stack         int32   `json:"stack"`
			History       []struct {
				Address  uint64 `json:"address"`
				RealSize uint64 `json:"real_size"`
				Stack    int32  `json:"stack"`
			} `json:"history,omitempty"`
		} `json:"blocks"`
	} `json:"segments"`
	Devices []struct {
		Device int `json:"device"`
		Events []struct {
			Action         string `json:"action"`
			Address        uint64 `json:"address"`
			Size           uint64 `json:"size"`
			Stream         int    `json:"stream"`
			TimeUS         *int64 `json:"time_us"`
			Stack          int32  `json:"stack"`
			CompileContext string `json:"compile_context,omitempty"`
			UserMetadata   string `json:"user_metadata,omitempty"`
		} `json:"events"`
	} `json:"devices"`
	AllocatorSettings map[string]json.RawMessage `json:"allocator_settings"`
	Annotations       []struct {
		Device int    `json:"device"`
		TimeUS int64  `json:"time_us"`
		Name   string `json:"name"`
		Stage  string `json:"stage"`
	} `json:"annotations"`
}

// TestJSONCorpus exports every real snapshot and reads it back: the same
// segments, blocks, events, frames and stacks as the decoded snapshot.
func TestJSONCorpus(t *testing.T) {
	for _, path := range corpus.Files(t) {
		s := load(t, path)
		var buf bytes.Buffer
		if err := WriteJSON(&buf, s, -1); err != nil {
			t.Fatal(err)
		}
		var m JSONModel
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		name := filepath.Base(path)
		if m.Schema != JSONSchema || m.Source.Generation != string(s.Source.Generation) {
			t.Errorf("%s: schema %q generation %q", name, m.Schema, m.Source.Generation)
		}
		if len(m.Segments) != len(s.Segments) || len(m.Frames) != len(s.Frames) || len(m.Stacks) != s.Stacks.Len() {
			t.Errorf("%s: %d segments %d frames %d stacks, want %d %d %d", name,
				len(m.Segments), len(m.Frames), len(m.Stacks), len(s.Segments), len(s.Frames), s.Stacks.Len())
		}
		blocks, allocated := 0, uint64(0)
		for _, seg := range m.Segments {
			blocks += len(seg.Blocks)
			var sum uint64
			for _, b := range seg.Blocks {
				sum += b.Size
				if b.State == "active_allocated" {
					allocated += b.Size
				}
				for _, f := range m.Stacks[b.Stack] {
					if int(f) >= len(m.Frames) {
						t.Fatalf("%s: stack %d names frame %d of %d", name, b.Stack, f, len(m.Frames))
					}
				}
			}
			if sum != seg.TotalSize {
				t.Errorf("%s: segment %#x blocks sum to %d, total_size %d", name, seg.Address, sum, seg.TotalSize)
			}
		}
		var wantAlloc uint64
		for _, b := range s.Blocks {
			if b.State == snapshot.BlockActiveAllocated {
				wantAlloc += b.Size
			}
		}
		if blocks != len(s.Blocks) || allocated != wantAlloc {
			t.Errorf("%s: %d blocks, %d allocated; want %d, %d", name, blocks, allocated, len(s.Blocks), wantAlloc)
		}
		events := 0
		for _, d := range m.Devices {
			events += len(d.Events)
			for i, e := range d.Events {
				raw := s.Traces[d.Device].Events[i]
				if e.Action != raw.Action.String() || e.Size != raw.Size || e.Address != raw.Addr {
					t.Fatalf("%s: device %d event %d: %+v, want %v", name, d.Device, i, e, raw)
				}
			}
		}
		want := 0
		for _, tr := range s.Traces {
			want += len(tr.Events)
		}
		if events != want {
			t.Errorf("%s: %d events, want %d", name, events, want)
		}
	}
}
