package snapshot

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// checkDecoderViz decodes data and checks that the Viz and merged-free
// flags the decoder decided as it read the events are the ones Annotate
// computes afresh.
func checkDecoderViz(t *testing.T, name string, data []byte) {
	t.Helper()
	s, err := DecodeBytes(data, name, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	type trace struct {
		viz   []int32
		flags []EventFlag
	}
	got := make([]trace, len(s.Traces))
	for i, tr := range s.Traces {
		got[i].viz = slices.Clone(tr.Viz)
		for _, e := range tr.Events {
			got[i].flags = append(got[i].flags, e.Flags)
		}
	}
	s.Annotate()
	for i, tr := range s.Traces {
		if !slices.Equal(got[i].viz, tr.Viz) {
			t.Fatalf("%s trace %d: decoded Viz %v, annotated %v", name, i, head(got[i].viz), head(tr.Viz))
		}
		for j, e := range tr.Events {
			if got[i].flags[j] != e.Flags {
				t.Fatalf("%s trace %d event %d (%s): decoded flags %#x, annotated %#x", name, i, j, e.Action, got[i].flags[j], e.Flags)
			}
		}
	}
}

func head(v []int32) []int32 { return v[:min(len(v), 20)] }

// TestDecoderVizMatchesAnnotate: the merges decided while decoding (see
// builder.keptViz) against annotate's pass, on every real snapshot, on
// random traces, and on traces whose boundaries fall inside a
// free_requested / free_completed pair (a merge must not cross them).
func TestDecoderVizMatchesAnnotate(t *testing.T) {
	ev := func(a Action, addr uint64) Event { return Event{Action: a, Addr: addr, Size: 64} }
	pair := []Event{ev(ActionAlloc, 100), ev(ActionFreeRequested, 100)}
	tail := []Event{ev(ActionFreeCompleted, 100), ev(ActionFreeCompleted, 100), ev(ActionAlloc, 200), ev(ActionFreeRequested, 200), ev(ActionFreeCompleted, 200)}
	for name, traces := range map[string][][]Event{
		"boundary":            {pair, tail},
		"boundary, then more": {pair, tail[:1], pair, tail},
		"empty between":       {pair, {}, tail},
		"one device":          {append(slices.Clone(pair), tail...)},
	} {
		s := &Snapshot{Segments: []Segment{{Address: 100, TotalSize: 512, NumBlocks: 1}}, Blocks: []Block{{Size: 512}}}
		for _, evs := range traces {
			s.Traces = append(s.Traces, Trace{Events: slices.Clone(evs)})
		}
		var buf bytes.Buffer
		if err := WritePickle(&buf, s); err != nil {
			t.Fatal(err)
		}
		checkDecoderViz(t, name, buf.Bytes())
	}
	r := rand.New(rand.NewSource(3))
	actions := []Action{ActionAlloc, ActionFreeRequested, ActionFreeCompleted, ActionFree, ActionSegmentAlloc}
	for iter := range 50 {
		s := &Snapshot{Segments: []Segment{{Address: 0, TotalSize: 1 << 20, NumBlocks: 1}}, Blocks: []Block{{Size: 1 << 20}}}
		for range 1 + r.Intn(3) {
			evs := make([]Event, r.Intn(60))
			for i := range evs {
				evs[i] = ev(actions[r.Intn(len(actions))], uint64(r.Intn(3)))
			}
			s.Traces = append(s.Traces, Trace{Events: evs})
		}
		var buf bytes.Buffer
		if err := WritePickle(&buf, s); err != nil {
			t.Fatal(err)
		}
		checkDecoderViz(t, fmt.Sprint("random ", iter), buf.Bytes())
	}
	if testing.Short() {
		return
	}
	for _, f := range corpus.Files(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkDecoderViz(t, f, data)
	}
}
