package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// TestRoundTrip decodes every real snapshot, writes it as pickle and as
// JSON, decodes those and expects the same model.
func TestRoundTrip(t *testing.T) {
	for _, f := range corpus.Files(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			orig, err := Open(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			encs := []string{"pickle"}
			if st, _ := os.Stat(f); st.Size() < 400<<10 {
				// JSON repeats every shared frame inline; keep it to small files.
				encs = append(encs, "json")
			}
			for _, enc := range encs {
				var buf bytes.Buffer
				write := WritePickle
				if enc == "json" {
					write = WriteJSON
				}
				if err := write(&buf, orig); err != nil {
					t.Fatalf("%s: %v", enc, err)
				}
				again, err := DecodeBytes(buf.Bytes(), "again", nil)
				if err != nil {
					os.WriteFile("/tmp/rt."+enc, buf.Bytes(), 0o644)
					t.Fatalf("%s: decode written file: %v", enc, err)
				}
				compareModels(t, enc, orig, again)
			}
		})
	}
}

func compareModels(t *testing.T, enc string, a, b *Snapshot) {
	t.Helper()
	if a.Source.Generation != b.Source.Generation {
		t.Errorf("%s: generation %s -> %s", enc, a.Source.Generation, b.Source.Generation)
	}
	check := func(name string, x, y any) {
		if !reflect.DeepEqual(x, y) {
			t.Errorf("%s: %s differ", enc, name)
		}
	}
	check("segments", a.Segments, b.Segments)
	check("blocks", a.Blocks, b.Blocks)
	check("history", a.History, b.History)
	check("traces", a.Traces, b.Traces)
	// Frame ids follow the order in which frame dicts complete, which
	// differs between writers; compare stacks by the frames they name.
	check("frames", sortedFrames(a), sortedFrames(b))
	check("stacks", resolvedStacks(a), resolvedStacks(b))
	check("strings", a.Strings, b.Strings)
	check("streams", a.Streams, b.Streams)
	if len(a.Extras) != len(b.Extras) {
		t.Errorf("%s: %d extras, want %d", enc, len(b.Extras), len(a.Extras))
	}
	check("settings", a.AllocatorSettings, b.AllocatorSettings)
	check("annotations", a.Annotations, b.Annotations)
	check("extra", a.Extra, b.Extra)
}

func sortedFrames(s *Snapshot) []string {
	out := make([]string, len(s.Frames))
	for i, f := range s.Frames {
		out[i] = fmt.Sprintf("%q %q %d %v", f.Filename, f.Name, f.Line, extraOf(s, f.Extra))
	}
	sort.Strings(out)
	return out
}

func resolvedStacks(s *Snapshot) [][]Frame {
	out := make([][]Frame, s.Stacks.Len())
	for i := range out {
		for _, f := range s.Stacks.Frames(StackID(i)) {
			fr := s.Frames[f]
			fr.Extra = 0
			out[i] = append(out[i], fr)
		}
	}
	return out
}
