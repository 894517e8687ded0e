package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/gpumem/gpumem/internal/corpus"
)

// smallSnapshot returns a small real snapshot (skipping without the corpus).
func smallSnapshot(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpus.Dir(t), "cs336-silmont2000__mem_snapshot.pickle"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func le64(n uint64) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], n)
	return string(b[:])
}

// TestHostile feeds inputs that must fail cleanly: an error (one line), no
// panic, and bounded allocation.
func TestHostile(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	random := make([]byte, 4096)
	rnd.Read(random)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty input"},
		{"blank", "  \n", "empty input"},
		{"png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "unrecognized format"},
		{"random", string(random), ""},
		{"int", "\x80\x04K\x05.", "not a PyTorch memory snapshot: top-level value is int"},
		{"dict without segments", "\x80\x04}\x94(\x8c\x01a\x94K\x01u.", `not a PyTorch memory snapshot: top-level dict has no "segments" key (keys: "a")`},
		{"json int", "[1, 2]", "not a PyTorch memory snapshot"},
		{"json no segments", `{"device_traces": []}`, `no "segments" key`},
		{"json garbage", `{"segments": [`, "json at byte"},
		{"huge BINUNICODE8", "\x80\x04\x8d" + le64(1<<42) + "abc", "truncated BINUNICODE8"},
		{"huge FRAME", "\x80\x04\x95" + le64(1<<60) + "N.", ""}, // streaming: no size to check against
		{"memo out of range", "\x80\x04]h\xff.", "memo key 255 not found"},
		{"deep lists", "\x80\x04" + strings.Repeat("]", 1_000_000) + strings.Repeat("a", 999_999) + ".", "stack too deep"},
		{"deep json", strings.Repeat("[", 100_000), "nesting too deep"},
		{"segments not a list", "\x80\x04}(\x8c\x08segmentsK\x01u.", "segments is int"},
		{"segment not a dict", "\x80\x04](K\x01e.", "segments[0] is int"},
		// PyTorch pickles no class instances; kept as JSON they would not
		// survive WritePickle (see builder.Finish).
		{"object in extra key", "\x80\x04}(\x8c\x08segments]\x8c\x01xcm\nC\n)\x81K\x05bu.", "Python object at byte 28: an instance of m.C"},
		{"object via REDUCE", "\x80\x04}(\x8c\x08segments](cos\nsystem\n\x8c\x02ls\x85Reu.", "Python object at byte 33: an instance of os.system"},
		{"NEWOBJ_EX of a str", "\x80\x04}(\x8c\x08segments]\x8c\x01x\x8c\x01aK\x00\x8c\x01b\x92u.", "Python object at byte 27: an object built from str"},
		{"bad trace entry", "\x80\x04}(\x8c\x08segments]\x8c\rdevice_traces](](}(\x8c\x06action\x8c\x05alloc\x8c\x04addr\x8c\x01xueeeu.", "trace entry at byte 60: addr is str"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for _, mode := range []string{"bytes", "reader"} {
				var err error
				if mode == "bytes" {
					_, err = DecodeBytes([]byte(tc.in), "in", nil)
				} else {
					_, err = Decode(strings.NewReader(tc.in), "in", nil)
				}
				if err == nil {
					t.Fatalf("%s: no error", mode)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "in: ") {
					t.Errorf("%s: error %q is not one line naming the input", mode, msg)
				}
				if tc.want != "" && !strings.Contains(msg, tc.want) {
					t.Errorf("%s: error %q, want it to contain %q", mode, msg, tc.want)
				}
			}
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(64*len(tc.in))+256<<20 {
				t.Errorf("allocated %d bytes for %d bytes of input", alloc, len(tc.in))
			}
		})
	}
}

// TestTruncatedSnapshot decodes every prefix of a real snapshot.
func TestTruncatedSnapshot(t *testing.T) {
	b := smallSnapshot(t)
	// Every prefix of the first 4 KiB (all opcode kinds appear there),
	// then every 37th, to keep the test fast.
	for i := 0; i < len(b)-1; i++ {
		if i > 4096 {
			i = min(i+36, len(b)-2)
		}
		if _, err := DecodeBytes(b[:i], "prefix", nil); err == nil {
			t.Fatalf("prefix of %d bytes decoded without error", i)
		}
	}
}

// TestCompressed checks gzip and zstd detection by magic bytes, MaxBytes
// and Progress.
func TestCompressed(t *testing.T) {
	raw := smallSnapshot(t)
	want, err := DecodeBytes(raw, "raw", nil)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	var zs bytes.Buffer
	enc, _ := zstd.NewWriter(&zs)
	enc.Write(raw)
	enc.Close()
	for _, tc := range []struct {
		name, compression string
		data              []byte
	}{{"gzip", "gzip", gz.Bytes()}, {"zstd", "zstd", zs.Bytes()}, {"plain", "", raw}} {
		t.Run(tc.name, func(t *testing.T) {
			var last, calls int64
			s, err := DecodeBytes(tc.data, "x", &Options{Progress: func(done, total int64) { last = done; calls++ }})
			if err != nil {
				t.Fatal(err)
			}
			if s.Source.Compression != tc.compression || s.Source.Encoding != "pickle" {
				t.Errorf("source %+v", s.Source)
			}
			if s.Source.Size != int64(len(raw)) || s.Source.FileSize != int64(len(tc.data)) {
				t.Errorf("size %d/%d, want %d/%d", s.Source.Size, s.Source.FileSize, len(raw), len(tc.data))
			}
			if calls == 0 || last != int64(len(tc.data)) {
				t.Errorf("progress ended at %d after %d calls, want %d", last, calls, len(tc.data))
			}
			if len(s.Traces[0].Events) != len(want.Traces[0].Events) {
				t.Errorf("%d events, want %d", len(s.Traces[0].Events), len(want.Traces[0].Events))
			}
			if _, err := DecodeBytes(tc.data, "x", &Options{MaxBytes: int64(len(raw) / 2)}); err == nil || !strings.Contains(err.Error(), "limit") {
				t.Errorf("MaxBytes: got %v, want a limit error", err)
			}
		})
	}
}

// TestAnnotate checks memory_viz's annotation on a hand-made trace.
func TestAnnotate(t *testing.T) {
	s := &Snapshot{
		Traces: []Trace{{Events: []Event{
			{Action: ActionSegmentAlloc, Addr: 100},
			{Action: ActionAlloc, Addr: 100},
			{Action: ActionFreeRequested, Addr: 100},
			{Action: ActionFreeCompleted, Addr: 100},
			{Action: ActionAlloc, Addr: 100},
			{Action: ActionFreeRequested, Addr: 100},
			{Action: ActionAlloc, Addr: 200},
			{Action: ActionFreeCompleted, Addr: 100},
			{Action: ActionSegmentFree, Addr: 100},
			{Action: ActionSegmentAlloc, Addr: 100},
		}}},
		Segments: []Segment{{Address: 100, NumBlocks: 2}},
		Blocks:   []Block{{Size: 100}, {Size: 50}},
	}
	s.Annotate()
	ev := s.Traces[0].Events
	wantVer := []int32{0, 0, 0, 0, 1, 1, 0, 1, 0, 1}
	for i, w := range wantVer {
		if v := s.Traces[0].Version(i); v != w {
			t.Errorf("event %d (%s): version %d, want %d", i, ev[i].Action, v, w)
		}
	}
	if ev[2].VizAction() != ActionFree || ev[5].VizAction() != ActionFreeRequested {
		t.Errorf("merge: %s %s", ev[2].VizAction(), ev[5].VizAction())
	}
	wantViz := []int32{0, 1, 2, 4, 5, 6, 7, 8, 9}
	if !equalInt32(s.Traces[0].Viz, wantViz) {
		t.Errorf("Viz %v, want %v", s.Traces[0].Viz, wantViz)
	}
	if s.Segments[0].Version != 1 || s.Blocks[0].Addr != 100 || s.Blocks[1].Addr != 200 || s.Blocks[0].Version != 2 || s.Blocks[1].Version != 0 {
		t.Errorf("segment version %d, blocks %+v", s.Segments[0].Version, s.Blocks)
	}
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func FuzzSnapshot(f *testing.F) {
	dir := corpus.Path("snapshots", "real")
	// Small seeds only: the fuzzer minimizes every new input, which takes
	// minutes for a 70 KB one.
	for _, name := range []string{"text-to-SQL__dump_snapshot__27df9f5b.pickle", "HitsBE__my_snapshot.pickle", "DocuBox__dump_snapshot.pickle", "voxelflex__dump_snapshot__e8335e9c.pickle"} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil && len(b) < 8<<10 {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 2, "stream": 0}]]}`))
	f.Add([]byte("\x80\x04}(\x8c\x08segments]u."))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeBytes(b, "fuzz", nil)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		// Whatever decodes must write and decode again.
		var buf bytes.Buffer
		if err := WritePickle(&buf, s); err != nil {
			t.Fatalf("WritePickle: %v", err)
		}
		if _, err := DecodeBytes(buf.Bytes(), "again", nil); err != nil {
			t.Fatalf("re-decoding WritePickle output: %v", err)
		}
	})
}
