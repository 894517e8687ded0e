package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestEntryReader decodes every real snapshot with and without the
// trace-entry reader: the models must be identical.
func TestEntryReader(t *testing.T) {
	dir := corpusDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.pickle"))
	if err != nil || len(files) == 0 {
		t.Skipf("no pickles in %s", dir)
	}
	taken := 0
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			decodeWith := func(off bool) *Snapshot {
				noEntryReader = off
				defer func() { noEntryReader = false }()
				s, err := Decode(bytes.NewReader(raw), f, nil)
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			fast, slow := decodeWith(false), decodeWith(true)
			if !reflect.DeepEqual(fast, slow) {
				for i := range slow.Traces {
					if i < len(fast.Traces) && !reflect.DeepEqual(fast.Traces[i], slow.Traces[i]) {
						t.Errorf("trace %d differs", i)
					}
				}
				t.Fatalf("entry reader changes the model (strings %d vs %d, streams %v vs %v)",
					len(fast.Strings), len(slow.Strings), fast.Streams, slow.Streams)
			}
			for _, tr := range fast.Traces {
				if len(tr.Events) > 0 {
					taken++
				}
			}
		})
	}
	if taken == 0 {
		t.Error("no snapshot had trace entries: the comparison tested nothing")
	}
}
