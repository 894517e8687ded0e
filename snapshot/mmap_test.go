package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// bigSnapshot writes a snapshot of several decoder windows to a temporary
// file: the largest real snapshot with its longest trace repeated.
func bigSnapshot(t *testing.T) string {
	t.Helper()
	var biggest string
	var size int64
	for _, f := range corpus.Files(t) {
		if st, err := os.Stat(f); err == nil && st.Size() > size {
			biggest, size = f, st.Size()
		}
	}
	s, err := Open(biggest, nil)
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for i := range s.Traces {
		if len(s.Traces[i].Events) > len(s.Traces[longest].Events) {
			longest = i
		}
	}
	evs := s.Traces[longest].Events
	for len(evs) < 200_000 {
		evs = append(evs, s.Traces[longest].Events...)
	}
	s.Traces[longest].Events = evs
	s.Annotate()
	var buf bytes.Buffer
	if err := WritePickle(&buf, s); err != nil {
		t.Fatal(err)
	}
	if buf.Len() < 3*mapWindow {
		t.Fatalf("test file is %d bytes, want several %d-byte windows", buf.Len(), mapWindow)
	}
	path := filepath.Join(t.TempDir(), "big.pickle")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// corpusWithBig lists the real snapshots and, unless -short, bigSnapshot's
// file (big enough for the decoder's windows and its versioner).
func corpusWithBig(t *testing.T) []string {
	files := corpus.Files(t)
	if !testing.Short() {
		files = append(files, bigSnapshot(t))
	}
	return files
}

// decodeFile reads f and decodes it in memory, failing the test on error.
func decodeFile(t *testing.T, f string) ([]byte, *Snapshot) {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DecodeBytes(data, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data, s
}

// TestMappedMatchesStream decodes real snapshots and a big one both with
// Open (which maps regular files on Linux and decodes them in windows) and
// as a stream, and expects the same model and progress reports that only
// grow and end at the file size.
func TestMappedMatchesStream(t *testing.T) {
	files := append(corpus.Files(t), bigSnapshot(t))
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			var done []int64
			mapped, err := Open(path, &Options{Progress: func(d, total int64) {
				if total != st.Size() {
					t.Errorf("progress total %d, file has %d bytes", total, st.Size())
				}
				done = append(done, d)
			}})
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			streamed, err := Decode(f, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(mapped, streamed) {
				t.Fatalf("Open and Decode disagree: sources %+v and %+v", mapped.Source, streamed.Source)
			}
			for i := range done {
				if i > 0 && done[i] < done[i-1] {
					t.Fatalf("progress went back: %v", done)
				}
			}
			if len(done) == 0 || done[len(done)-1] != st.Size() {
				t.Fatalf("progress %v does not end at the file size %d", done, st.Size())
			}
		})
	}
}

// TestEarly checks Options.Early on every way in: it is called once, with
// the merged frees (Viz) and block addresses done but no version yet, and
// the snapshot returned afterwards has the versions Annotate computes.
func TestEarly(t *testing.T) {
	for _, path := range corpus.Files(t) {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, way := range []string{"Open", "Decode", "DecodeBytes"} {
			calls := 0
			var early *Snapshot
			opt := &Options{Early: func(s *Snapshot) {
				calls++
				early = s
				for ti := range s.Traces {
					tr := &s.Traces[ti]
					if len(tr.Events) > 0 && len(tr.Viz) == 0 {
						t.Errorf("%s %s: trace %d has no Viz yet", way, filepath.Base(path), ti)
					}
					if tr.HasVersions() {
						t.Fatalf("%s %s: trace %d has its versions before Early returned", way, filepath.Base(path), ti)
					}
				}
			}}
			var s *Snapshot
			switch way {
			case "Open":
				s, err = Open(path, opt)
			case "Decode":
				s, err = Decode(bytes.NewReader(data), path, opt)
			default:
				s, err = DecodeBytes(data, path, opt)
			}
			if err != nil {
				t.Fatal(err)
			}
			if calls != 1 || early != s {
				t.Fatalf("%s %s: Early called %d times", way, filepath.Base(path), calls)
			}
			want, err := DecodeBytes(data, path, nil)
			if err != nil {
				t.Fatal(err)
			}
			want.Annotate()
			if !reflect.DeepEqual(s.Traces, want.Traces) || !reflect.DeepEqual(s.Blocks, want.Blocks) || !reflect.DeepEqual(s.Segments, want.Segments) {
				t.Fatalf("%s %s: the snapshot after Early differs from an annotated one", way, filepath.Base(path))
			}
		}
	}
}
