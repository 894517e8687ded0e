package synth

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestWriteMatchesPython checks the writers against CPython: loading our
// pickle and dumping it again with protocol 4 must give the same bytes (so
// memo sharing, opcodes and framing are Python's), and the JSON must equal
// json.dumps of the same object.
func TestWriteMatchesPython(t *testing.T) {
	py := corpus.Tool(t, "python3", "the writers are compared with CPython's; Debian: apt-get install python3")
	dir := t.TempDir()
	for i, w := range smallWorkloads()[:3] {
		w.Seed = int64(i)
		conf := ""
		if i == 1 {
			conf = "expandable_segments:True,roundup_power2_divisions:[256:2,>:4]"
		}
		s, _, err := Generate(w, Options{Config: conf})
		if err != nil {
			t.Fatal(err)
		}
		pk, js := filepath.Join(dir, "s.pickle"), filepath.Join(dir, "s.json")
		if _, err := WriteFile(pk, s, false); err != nil {
			t.Fatal(err)
		}
		if _, err := WriteFile(js, s, true); err != nil {
			t.Fatal(err)
		}
		script := `
import json, pickle, sys
b = open(sys.argv[1], "rb").read()
s = pickle.loads(b)
assert pickle.dumps(s, protocol=4) == b, "pickle.dumps(pickle.loads(file)) differs from the file"
def lists(o):
    if isinstance(o, (list, tuple)): return [lists(x) for x in o]
    if isinstance(o, dict): return {k: lists(v) for k, v in o.items()}
    return o
j = open(sys.argv[2]).read()
assert json.dumps(lists(s)) == j, "JSON differs from json.dumps of the pickle's object"
assert list(s) == ["segments", "device_traces", "allocator_settings", "external_annotations"], list(s)
e = s["device_traces"][0][-1]
assert list(e) == ["action", "addr", "size", "stream", "time_us", "compile_context", "user_metadata", "frames"], list(e)
`
		out, err := exec.Command(py, "-c", script, pk, js).CombinedOutput()
		if err != nil {
			t.Fatalf("workload %d: %v\n%s", i, err, out)
		}
	}
}

func TestWriteDeterministicAndAtomic(t *testing.T) {
	dir := t.TempDir()
	s, _, err := Generate(smallWorkloads()[2], Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "out.pickle")
	n, err := WriteFile(p, s, false)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(p)
	if int64(len(a)) != n {
		t.Errorf("WriteFile returned %d, file has %d bytes", n, len(a))
	}
	var buf bytes.Buffer
	if err := Write(&buf, s, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, buf.Bytes()) {
		t.Error("WriteFile and Write differ")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	if _, err := WriteFile(filepath.Join(dir, "missing", "x.pickle"), s, false); err == nil {
		t.Error("writing into a missing folder succeeded")
	}
}

func TestGenerateSize(t *testing.T) {
	w := Workload{Model: "transformer", Layers: 2, DModel: 128, Heads: 4, Seq: 64, Batch: 2, Vocab: 500}
	for _, target := range []int64{300_000, 2_000_000} {
		s, res, err := GenerateSize(w, Options{}, target, false)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := encodedSize(s, false)
		if d := float64(n-target) / float64(target); d > 0.05 || d < -0.05 {
			t.Errorf("target %d: got %d bytes (%d steps), off by %.1f%%", target, n, res.StepsDone, 100*d)
		}
	}
}

// TestMemoryVizReads runs PyTorch's own viewer pipeline (MemoryViz.js
// unpickler, annotate_snapshot and process_alloc_data, through
// ../shared/tools/memoryviz_bench.mjs) on a generated snapshot. PyTorch's
// files, unmodified and with their licence, are in
// ../shared/reference/pytorch-viz.
func TestMemoryVizReads(t *testing.T) {
	node := corpus.Tool(t, "node", "Debian: apt-get install nodejs")
	tool := corpus.Need(t, corpus.Path("tools", "memoryviz_bench.mjs"))
	viz := corpus.Path("reference", "pytorch-viz")
	for _, f := range []string{"MemoryViz.js", "process_alloc_data.js"} {
		corpus.Need(t, filepath.Join(viz, f))
	}
	w := smallWorkloads()[0]
	s, _, err := Generate(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	allocs := 0
	for _, e := range s.Traces[0].Events {
		if e.Action == snapshot.ActionAlloc {
			allocs++
		}
	}
	for _, asJSON := range []bool{false, true} {
		p := filepath.Join(t.TempDir(), "s.pickle")
		if _, err := WriteFile(p, s, asJSON); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(node, tool, viz, p).CombinedOutput()
		if err != nil {
			t.Fatalf("memory_viz pipeline failed (json=%v): %v\n%s", asJSON, err, out)
		}
		var res struct {
			Elements int   `json:"elements"`
			Peak     int64 `json:"peak_bytes"`
		}
		lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
		if err := json.Unmarshal(lines[len(lines)-1], &res); err != nil {
			t.Fatalf("memory_viz output %q: %v", out, err)
		}
		if res.Elements != allocs || res.Peak <= 0 {
			t.Errorf("memory_viz saw %d elements (want %d allocations), peak %d", res.Elements, allocs, res.Peak)
		}
	}
}

func TestJSONString(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            `"plain"`,
		`q"\`:              `"q\"\\"`,
		"a>b<c&":           `"a>b<c&"`,
		"tab\tnl\n":        `"tab\tnl\n"`,
		"bell\a":           `"bell\u0007"`,
		"ctl\x01":          `"ctl\u0001"`,
		"caf\u00e9 \u2603": `"caf\u00e9 \u2603"`,
	} {
		if got := jsonString(in); got != want {
			t.Errorf("jsonString(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestFlagsGenerate: --target-mb sizes the file (in the format asked
// for); without it the flags' steps are run.
func TestFlagsGenerate(t *testing.T) {
	for _, tc := range []struct {
		targetMB float64
		asJSON   bool
		steps    int
	}{
		{0, false, 2},
		{2, false, -1},
		{2, true, -1},
	} {
		f := Flags{Workload: Workload{Model: "transformer", Layers: 2, DModel: 128, Heads: 4, Seq: 64, Batch: 2, Vocab: 500, Steps: 2}, DType: "fp32", TargetMB: tc.targetMB, Device: -1}
		opt, err := f.Check()
		if err != nil {
			t.Fatal(err)
		}
		s, res, err := f.Generate(opt, tc.asJSON)
		if err != nil {
			t.Fatal(err)
		}
		if tc.steps >= 0 && res.StepsDone != tc.steps {
			t.Errorf("%+v: %d steps, want %d", tc, res.StepsDone, tc.steps)
		}
		if tc.targetMB > 0 {
			n, _ := encodedSize(s, tc.asJSON)
			// The file is sized in the format asked for: a JSON file sized
			// as a pickle would be about 15 times as large.
			if d := float64(n)/(tc.targetMB*1e6) - 1; d > 0.1 || d < -0.1 {
				t.Errorf("%+v: %d bytes, off by %.1f%%", tc, n, 100*d)
			}
		}
	}
}
