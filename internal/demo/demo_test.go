package demo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

// TestRegenerateIdentical checks that `go generate ./internal/demo` would
// reproduce the committed demo.pickle byte for byte.
func TestRegenerateIdentical(t *testing.T) {
	s, res, err := synth.Generate(Workload, Options)
	if err != nil {
		t.Fatal(err)
	}
	if res.OOM != nil {
		t.Fatalf("demo workload hit OOM: %v", res.OOM)
	}
	var buf bytes.Buffer
	if err := synth.Write(&buf, s, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
		t.Fatalf("regenerated demo is %d bytes and differs from the embedded %d bytes; run go generate ./internal/demo", buf.Len(), len(data))
	}
	if len(data) > 400<<10 {
		t.Errorf("demo snapshot is %d bytes; keep it under 400 KiB", len(data))
	}
}

// TestCPythonIdentical checks that the embedded file is exactly what
// CPython's pickle.dumps(obj, protocol=4) writes for the object it holds.
func TestCPythonIdentical(t *testing.T) {
	py := corpus.Tool(t, "python3", "CPython byte-identity is checked with it; Debian: apt-get install python3")
	p := filepath.Join(t.TempDir(), "demo.pickle")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import pickle, sys
b = open(sys.argv[1], "rb").read()
a = pickle.dumps(pickle.loads(b), protocol=4)
if a != b:
    n = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    print("demo.pickle differs from CPython's re-dump at byte %d" % n)
`
	out, err := exec.Command(py, "-c", script, p).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("%v %s", err, out)
	}
}

func TestOpen(t *testing.T) {
	s, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	want, res, err := synth.Generate(Workload, Options)
	if err != nil {
		t.Fatal(err)
	}
	if s.Source.Name != Name || s.Source.Generation != snapshot.GenD7 || s.Source.Protocol != 4 {
		t.Errorf("source %+v", s.Source)
	}
	if len(s.Traces) != 1 || len(s.Traces[0].Events) != res.Events {
		t.Fatalf("decoded %d traces, want 1 with %d events", len(s.Traces), res.Events)
	}
	if len(s.Segments) != len(want.Segments) || len(s.Blocks) != len(want.Blocks) {
		t.Errorf("decoded %d segments / %d blocks, want %d / %d", len(s.Segments), len(s.Blocks), len(want.Segments), len(want.Blocks))
	}
	for i, e := range s.Traces[0].Events {
		w := want.Traces[0].Events[i]
		if e.Action != w.Action || e.Addr != w.Addr || e.Size != w.Size || e.TimeUS != w.TimeUS {
			t.Fatalf("event %d: decoded %v %#x %d at %d, generated %v %#x %d at %d", i, e.Action, e.Addr, e.Size, e.TimeUS, w.Action, w.Addr, w.Size, w.TimeUS)
		}
		if got, wantN := len(s.StackFrames(e.Stack)), len(want.StackFrames(w.Stack)); got != wantN {
			t.Fatalf("event %d: %d frames, want %d", i, got, wantN)
		}
	}
	if len(s.Annotations) != 6*Workload.Steps || s.AllocatorSettings == nil {
		t.Errorf("%d annotations, settings %v", len(s.Annotations), s.AllocatorSettings)
	}
	// Bytes is a copy: changing it must not change the embedded file.
	b := Bytes()
	b[0] = 0
	if data[0] != 0x80 {
		t.Error("Bytes returned the embedded slice itself")
	}
}
