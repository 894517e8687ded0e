package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// runMain runs cli.Main and turns a panic into a test failure.
func runMain(t *testing.T, stdin []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("gpumem %s panicked: %v", strings.Join(args, " "), r)
				code = -1
			}
		}()
		code = Main(args, bytes.NewReader(stdin), &out, &errOut)
	}()
	return code, out.String(), errOut.String()
}

// TestStatsCorpus checks "gpumem stats" against the output of PyTorch's
// own "python -m torch.cuda._memory_viz stats" for every real snapshot.
func TestStatsCorpus(t *testing.T) {
	dir := corpus.Snapshots(t)
	want, err := filepath.Glob(filepath.Join(dir, "expected", "stats", "*.txt"))
	if err != nil || len(want) == 0 {
		corpus.Missing(t, "no expected stats outputs in %s", dir)
	}
	for _, w := range want {
		name := strings.TrimSuffix(filepath.Base(w), ".txt")
		t.Run(name, func(t *testing.T) {
			expected, err := os.ReadFile(w)
			if err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runMain(t, nil, "stats", filepath.Join(dir, "real", name+".pickle"))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if out != string(expected) {
				t.Errorf("output differs from PyTorch's at line %s", firstDiff(out, string(expected)))
			}
		})
	}
}

// firstDiff describes the first differing line of got and want.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("%d:\n got: %q\nwant: %q", i+1, gl, wl)
		}
	}
	return "(none)"
}

// goldenSnapshots cover every format generation, multi-device files,
// empty traces, a bare list and a trace that starts mid-run.
var goldenSnapshots = []string{
	"MLSys-Experiments__model_memory_usage_profile_grad", // D4, small full trace
	"octree-nca__mem_snapshots_traditional_single_step",  // D5, annotations
	"octree-nca__my_snapshot__300688cd",                  // D5, snapshot action, segment frees
	"cs336-silmont2000__mem_snapshot",                    // D5
	"flexgen-Yiyi__oom_snapshot",                         // D1, legacy history blocks
	"LayoutEditing__dump_snapshot__7bced596",             // D3, two devices
	"LayoutEditing__memory_snapshot",                     // L, bare list
	"BlockZero__cuda_snapshot",                           // D6
	"HitsBE__my_snapshot",                                // empty
	"finetune_resnet50__dump_snapshot",                   // four empty devices
	"select_n__snapshot__5a601013",                       // D2
}

func TestTraceGolden(t *testing.T) {
	dir := corpus.Snapshots(t)
	for _, name := range goldenSnapshots {
		if name == "select_n__snapshot__5a601013" || name == "BlockZero__cuda_snapshot" {
			continue // long listings; info covers them
		}
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runMain(t, nil, "trace", filepath.Join(dir, "real", name+".pickle"))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			out = strings.ReplaceAll(out, filepath.Join(dir, "real")+string(filepath.Separator), "")
			checkGolden(t, filepath.Join("testdata", "trace", name+".txt"), out)
		})
	}
}

func TestInfoGolden(t *testing.T) {
	dir := corpus.Snapshots(t)
	for _, name := range goldenSnapshots {
		for _, mode := range []string{"txt", "json"} {
			t.Run(name+"."+mode, func(t *testing.T) {
				args := []string{"info", filepath.Join(dir, "real", name+".pickle")}
				if mode == "json" {
					args = append(args, "--json")
				}
				code, out, errOut := runMain(t, nil, args...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				// The path depends on where ../shared is; keep the name only.
				out = strings.ReplaceAll(out, filepath.Join(dir, "real")+string(filepath.Separator), "")
				checkGolden(t, filepath.Join("testdata", "info", name+"."+mode), out)
			})
		}
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs at line %s", path, firstDiff(got, string(want)))
	}
}

// TestInfoJSONFields checks the per-device JSON fields, with the peaks
// memory_viz itself computed (expected/timeline.jsonl); internal/replay's
// tests check the peaks of every file, this checks the wiring on one.
func TestInfoJSONFields(t *testing.T) {
	dir := corpus.Snapshots(t)
	code, out, errOut := runMain(t, nil, "info", "--json", filepath.Join(dir, "real", "DocuBox__dump_snapshot.pickle"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// memory_viz's own peaks for this file (expected/timeline.jsonl).
	for _, want := range []string{`"active_timeline_peak_bytes": 90861056`, `"segment_timeline_peak_bytes": 109051904`, `"segments": 12`, `"trace_entries": 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("info --json lacks %s:\n%s", want, out)
		}
	}
}

func TestHostileInputs(t *testing.T) {
	tmp := t.TempDir()
	files := map[string][]byte{
		"empty.pickle":      {},
		"random.pickle":     []byte("\x13\x9a\xfe\x00\x42 this is not a pickle \xff\xfe\x01\x02\x03"),
		"png.pickle":        []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"),
		"dict.pickle":       []byte("\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x05hello\x94]\x94(K\x01G@\x04\x00\x00\x00\x00\x00\x00\x8c\x01x\x94es."),
		"int.pickle":        []byte("\x80\x04K*."),
		"intlist.pickle":    []byte("\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00]\x94(K\x01K\x02K\x03e."),
		"badsegs.pickle":    []byte("\x80\x04\x95\x11\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94K\x05s."),
		"badsegaddr.pickle": []byte("\x80\x04\x95#\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94}\x94\x8c\x07address\x94\x8c\x01x\x94sas."),
		"truncated.pickle":  []byte("\x80\x04\x95#\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94}\x94\x8c\x07add"),
	}
	if b, err := os.ReadFile(filepath.Join(corpus.Path("snapshots"), "real", "MLSys-Experiments__model_memory_usage_profile_grad.pickle")); err == nil {
		files["real-truncated.pickle"] = b[:len(b)/2]
	}
	var paths []string
	for name, b := range files {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	paths = append(paths, filepath.Join(tmp, "missing.pickle"), tmp)
	for _, cmd := range []string{"info", "stats", "trace"} {
		for _, p := range paths {
			t.Run(cmd+"/"+filepath.Base(p), func(t *testing.T) {
				code, _, errOut := runMain(t, nil, cmd, p)
				if code != 1 {
					t.Errorf("exit status %d, want 1 (stderr %q)", code, errOut)
				}
				if strings.Count(errOut, "\n") != 1 || !strings.HasSuffix(errOut, "\n") {
					t.Errorf("stderr is not one line: %q", errOut)
				}
				if !strings.HasPrefix(errOut, "gpumem "+cmd+": ") || !strings.Contains(errOut, filepath.Base(p)) {
					t.Errorf("stderr does not name the command and file: %q", errOut)
				}
			})
		}
		t.Run(cmd+"/stdin", func(t *testing.T) {
			code, _, errOut := runMain(t, files["png.pickle"], cmd, "-")
			if code != 1 || strings.Count(errOut, "\n") != 1 {
				t.Errorf("exit %d, stderr %q", code, errOut)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"stats"}, 2},
		{[]string{"trace"}, 2},
		{[]string{"info"}, 2},
		{[]string{"stats", "a", "b"}, 2},
		{[]string{"trace", "--device", "x", "a"}, 2},
		{[]string{"trace", "--device=-1", "a"}, 2},
		{[]string{"info", "--nope", "a"}, 2},
	}
	for _, tt := range tests {
		code, _, errOut := runMain(t, nil, tt.args...)
		if code != tt.code {
			t.Errorf("%q: exit %d, want %d", tt.args, code, tt.code)
		}
		if !strings.HasSuffix(errOut, "\nrun 'gpumem "+tt.args[0]+" --help' for usage\n") || strings.Count(errOut, "\n") != 2 {
			t.Errorf("%q: stderr %q, want what is wrong and where the help is", tt.args, errOut)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args []string
		pos  string
		json bool
	}{
		{[]string{"a", "--json", "b"}, "a b", true},
		{[]string{"--json", "a"}, "a", true},
		{[]string{"a", "--", "--json"}, "a --json", false},
		{[]string{}, "", false},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		j := fs.Bool("json", false, "")
		pos, err := parseInterspersed(fs, tt.args)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(pos, " ") != tt.pos || *j != tt.json {
			t.Errorf("%q: got %q json=%v, want %q json=%v", tt.args, pos, *j, tt.pos, tt.json)
		}
	}
}
