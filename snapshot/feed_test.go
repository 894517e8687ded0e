package snapshot_test

import (
	"bytes"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

// readFeed reads f to its end on another goroutine, as a viewer does, and
// returns the entries it saw then.
func readFeed(f *snapshot.EventFeed) <-chan []snapshot.Event {
	out := make(chan []snapshot.Event, 1)
	go func() {
		var evs []snapshot.Event
		have := 0
		for {
			got, done := f.Next(have)
			evs, have = got, len(got)
			if done {
				out <- evs
				return
			}
		}
	}()
	return out
}

// TestEventFeed decodes the embedded demo with a feed, through both the
// in-memory and the streaming decoder: the reader sees every trace entry
// with its final action, address and size, the trace is the feed's whole,
// the feed's Live counts the dump's allocated blocks, and a decode that
// fails lets the reader go with nothing whole.
func TestEventFeed(t *testing.T) {
	data := demo.Bytes()
	for _, tc := range []struct {
		name   string
		decode func(opt *snapshot.Options) (*snapshot.Snapshot, error)
	}{
		{"bytes", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
			return snapshot.DecodeBytes(data, "demo", opt)
		}},
		{"stream", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
			return snapshot.Decode(bytes.NewReader(data), "demo", opt)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var feed *snapshot.EventFeed
			var seen <-chan []snapshot.Event
			s, err := tc.decode(&snapshot.Options{Feed: func(f *snapshot.EventFeed) { feed, seen = f, readFeed(f) }})
			if err != nil {
				t.Fatal(err)
			}
			if feed == nil {
				t.Fatal("Feed was not called for a pickle")
			}
			evs := <-seen
			var all []snapshot.Event
			for _, tr := range s.Traces {
				all = append(all, tr.Events...)
			}
			if len(evs) != len(all) || len(all) == 0 {
				t.Fatalf("the reader saw %d entries, the snapshot has %d", len(evs), len(all))
			}
			for i := range all {
				a, b := all[i], evs[i]
				if a.Action != b.Action || a.Addr != b.Addr || a.Size != b.Size {
					t.Fatalf("entry %d: fed %v %#x %d, decoded %v %#x %d", i, b.Action, b.Addr, b.Size, a.Action, a.Addr, a.Size)
				}
			}
			allocated := 0
			for i := range s.Blocks {
				if s.Blocks[i].State == snapshot.BlockActiveAllocated {
					allocated++
				}
			}
			if allocated == 0 || feed.Live() != allocated {
				t.Errorf("the feed's Live is %d, the dump before the trace has %d allocated blocks", feed.Live(), allocated)
			}
			if len(s.Traces) == 1 && !feed.Whole(s.Traces[0].Events) {
				t.Error("the only trace is not the feed's whole")
			}
			if feed.Whole(all[:len(all)-1]) {
				t.Error("a part of the trace counts as the feed's whole")
			}
		})
	}
	t.Run("truncated", func(t *testing.T) {
		var feed *snapshot.EventFeed
		var seen <-chan []snapshot.Event
		_, err := snapshot.DecodeBytes(data[:len(data)*2/3], "demo", &snapshot.Options{Feed: func(f *snapshot.EventFeed) { feed, seen = f, readFeed(f) }})
		if err == nil {
			t.Fatal("a truncated pickle decoded")
		}
		if evs := <-seen; len(evs) != 0 || feed.Whole(evs) {
			t.Errorf("a failed decode left %d entries in its feed", len(evs))
		}
	})
	t.Run("json", func(t *testing.T) {
		s, err := demo.Open()
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := snapshot.WriteJSON(&buf, s); err != nil {
			t.Fatal(err)
		}
		called := false
		if _, err := snapshot.DecodeBytes(buf.Bytes(), "demo.json", &snapshot.Options{Feed: func(*snapshot.EventFeed) { called = true }}); err != nil {
			t.Fatal(err)
		}
		if called {
			t.Error("JSON input has no feed, yet Feed was called")
		}
	})
}

// TestMergesFree pins memory_viz's merge of a free_requested and the
// free_completed right after it.
func TestMergesFree(t *testing.T) {
	req := snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: 0x100}
	for _, tc := range []struct {
		name string
		next snapshot.Event
		want bool
	}{
		{"same address", snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: 0x100}, true},
		{"other address", snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: 0x200}, false},
		{"not a free_completed", snapshot.Event{Action: snapshot.ActionAlloc, Addr: 0x100}, false},
	} {
		if got := snapshot.MergesFree(&req, &tc.next); got != tc.want {
			t.Errorf("%s: MergesFree = %v, want %v", tc.name, got, tc.want)
		}
	}
	if alloc := (snapshot.Event{Action: snapshot.ActionAlloc, Addr: 0x100}); snapshot.MergesFree(&alloc, &snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: 0x100}) {
		t.Error("a free_completed merges into an alloc")
	}
}
