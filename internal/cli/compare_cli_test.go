package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestDiffSegmentsOutputOnlyFile: with -o, diff --segments writes only the
// file (as flame -o); a failed write prints only the one-line error.
func TestDiffSegmentsOutputOnlyFile(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "x.svg")
	code, out, stderr := runCLI("diff", "--segments", "--demo", "-o", svg)
	if b, err := os.ReadFile(svg); code != 0 || out != "" || err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("diff --segments -o: exit %d, stdout %q, stderr %q, file %v", code, out, stderr, err)
	}
	code, out, stderr = runCLI("diff", "--segments", "--demo", "-o", filepath.Join(dir, "missing", "x.svg"))
	if code != 1 || out != "" || strings.Count(stderr, "\n") != 1 {
		t.Errorf("diff --segments -o into a missing directory: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestDiffTextNoTrailingSpace: no line of diff's text ends in blanks
// (the table pads empty cells).
func TestDiffTextNoTrailingSpace(t *testing.T) {
	code, out, stderr := runCLI("diff", "--demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for i, line := range strings.Split(out, "\n") {
		if strings.TrimRight(line, " \t") != line {
			t.Errorf("line %d ends in blanks: %q", i+1, line)
		}
	}
	if !strings.Contains(out, "\n\n                   live at  peak (event") {
		t.Errorf("the live-at table lost its alignment:\n%s", out)
	}
}

// TestStdinOnlyOnce: commands taking several files refuse "-" twice
// (standard input can be read once) as a usage mistake.
func TestStdinOnlyOnce(t *testing.T) {
	for _, args := range [][]string{{"diff", "-", "-"}, {"ranks", "-", "x", "-"}, {"flame", "diff", "-", "-"}} {
		code, out, stderr := runCLI(args...)
		if first, _, _ := strings.Cut(stderr, "\n"); code != 2 || out != "" || first != "gpumem "+args[0]+": standard input (-) can be given only once" {
			t.Errorf("%v: exit %d, stderr starts %q", args, code, first)
		}
	}
}

// TestExportJSONIsNotASnapshot: gpumem's own JSON export given back to a
// command is named as such, in one line, exit 1 (it was misread as a
// broken PyTorch snapshot).
func TestExportJSONIsNotASnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.json")
	if code, _, stderr := runCLI("export", "json", "--demo", "-o", path); code != 0 {
		t.Fatalf("export json: exit %d: %s", code, stderr)
	}
	want := "gpumem info: " + path + ": this is a gpumem export (gpumem.snapshot/1), not a PyTorch snapshot: open the snapshot it was exported from\n"
	if code, out, stderr := runCLI("info", path); code != 1 || out != "" || stderr != want {
		t.Errorf("info on an export: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestSitesOneNotation: peak, diff and steps print a site the same way
// (analysis.SiteString): "function (file.py:LINE) < caller (file.py:LINE)".
func TestSitesOneNotation(t *testing.T) {
	const site = "train_step (train.py:159) < main (train.py:201)"
	for _, args := range [][]string{{"peak", "--demo"}, {"oom", "--demo", "--request", "1GiB"}, {"diff", "--demo", "--depth", "2"}} {
		code, out, stderr := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if !strings.Contains(out, site) || strings.Contains(out, "/workspace/") || strings.Contains(out, "<no stack>") {
			t.Errorf("%v: sites not in the one notation (want e.g. %q):\n%s", args, site, out)
		}
	}
}

// TestNoEventMinusOne: a peak that is the dump's state (a file without a
// trace) or the state before the trace is said so, never "event -1", and
// is null in JSON; every one-device command takes the default
// device (longest trace; on a tie the one with more memory reserved) — on
// LayoutEditing 7bced596, whose cuda:0 holds one snapshot entry and no
// memory, cuda:1 — and says which.
func TestNoEventMinusOne(t *testing.T) {
	bare := corpus.File(t, "LayoutEditing__memory_snapshot.pickle")
	two := corpus.File(t, "LayoutEditing__dump_snapshot__7bced596.pickle")
	code, out, stderr := runCLI("ranks", bare, two)
	if code != 0 {
		t.Fatalf("ranks: exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], " dump ") || !strings.Contains(lines[2], " before trace ") { // cuda:1 only frees
		t.Errorf("ranks: peak at is not dump / before trace:\n%s", out)
	}
	code, out, _ = runCLI("ranks", "--json", bare)
	if code != 0 || !strings.Contains(out, `"peak_event": null`) {
		t.Errorf("ranks --json of a file without trace: exit %d:\n%s", code, out)
	}
	code, out, _ = runCLI("diff", "--json", bare, bare)
	if code != 0 || !strings.Contains(out, `"event": null`) {
		t.Errorf("diff --json of a file without trace: exit %d:\n%s", code, out)
	}
	s, err := snapshot.Open(two, nil)
	if err != nil {
		t.Fatal(err)
	}
	dev := s.DefaultDevice()
	if dev != 1 {
		t.Errorf("the default device of %s is the empty cuda:%d, want cuda:1", filepath.Base(two), dev)
	}
	for _, args := range [][]string{
		{"ranks", "--json", two}, {"diff", "--json", two, two}, {"steps", "--json", two},
		{"flame", "peak", two}, {"ranks", two}, {"diff", two, two}, {"steps", two},
	} {
		code, out, stderr := runCLI(args...)
		if code != 0 || strings.Contains(out, "event -1") || strings.Contains(out, `"event": -1`) || strings.Contains(out, `"peak_event": -1`) {
			t.Errorf("%v: exit %d %s, output says event -1:\n%s", args, code, stderr, out)
		}
		if strings.Contains(args[1], "json") {
			var v struct {
				Device *int                    `json:"device"`
				A      struct{ Device *int }   `json:"a"`
				Ranks  []struct{ Device *int } `json:"ranks"`
			}
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatal(err)
			}
			got := v.Device
			if v.A.Device != nil {
				got = v.A.Device
			}
			if len(v.Ranks) > 0 {
				got = v.Ranks[0].Device
			}
			if got == nil || *got != dev {
				t.Errorf("%v: device %v, want the default device %d", args, got, dev)
			}
		}
	}
}

// docExample finds the output the manual (README.md and docs/, from
// corpus.Docs) shows under the line "$ CMD": the one page that shows it,
// and the text up to the next "$ " line or the end of the code block, as
// docs[page][start:end].
func docExample(t *testing.T, docs map[string]string, cmd string) (page string, start, end int) {
	t.Helper()
	for name, text := range docs {
		if strings.Contains(text, "\n$ "+cmd+"\n") {
			if page != "" {
				t.Fatalf("both %s and %s show $ %s", page, name, cmd)
			}
			page = name
		}
	}
	if page == "" {
		t.Fatalf("no page of the manual (README.md, docs/) shows $ %s", cmd)
	}
	text := docs[page]
	start = strings.Index(text, "\n$ "+cmd+"\n") + len(cmd) + 4
	end = len(text)
	for _, stop := range []string{"\n$ ", "\n```"} {
		if k := strings.Index(text[start-1:], stop); k >= 0 && start-1+k+1 < end {
			end = start - 1 + k + 1
		}
	}
	return page, start, end
}

// TestCompareReadmeExamples runs the examples of the manual's diff,
// steps, ranks and export sections (docs/compare.md, docs/export.md) and
// the README's, and checks the pages show their real output (go test
// -update rewrites the exact ones in place).
func TestCompareReadmeExamples(t *testing.T) {
	docs := corpus.Docs(t)
	changed := map[string]bool{}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(args...)
		if code != 0 {
			t.Fatalf("gpumem %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	// exact: the manual shows the whole output of cmd.
	exact := func(cmd, got string) {
		t.Helper()
		page, start, end := docExample(t, docs, cmd)
		if *update {
			docs[page] = docs[page][:start] + got + docs[page][end:]
			changed[page] = true
			return
		}
		if want := docs[page][start:end]; got != want {
			t.Errorf("%s's example of $ %s is not the real output (go test -update rewrites it); differs at line %s:\n%s", page, cmd, firstDiff(got, want), got)
		}
	}
	// shows: every line the manual shows under cmd is in got, a line
	// ending in "...]" (a list cut short) as a prefix of one of got's lines.
	shows := func(cmd, got string) {
		t.Helper()
		page, start, end := docExample(t, docs, cmd)
		for _, line := range strings.Split(strings.TrimSuffix(docs[page][start:end], "\n"), "\n") {
			want := "\n" + line
			if cut, ok := strings.CutSuffix(line, "...]"); ok {
				want = "\n" + cut
			}
			if !strings.Contains("\n"+got, want) {
				t.Errorf("%s's example of $ %s shows %q, not in the real output", page, cmd, line)
			}
		}
	}

	shows("gpumem peak --demo", run("peak", "--demo"))
	run("synth", "--leak", "64MiB", "--steps", "5", "-o", filepath.Join(dir, "leak.pickle"))
	exact("gpumem steps leak.pickle", run("steps", filepath.Join(dir, "leak.pickle")))
	perfetto := strings.SplitAfterN(run("export", "perfetto", "--demo"), "\n", 4)
	exact("gpumem export perfetto --demo | head -3", strings.Join(perfetto[:3], ""))
	model := run("export", "json", "--demo")
	seg := model[strings.Index(model, "\n"+`{"device":0,"address"`)+1:]
	seg = seg[:strings.Index(seg, `,"blocks":[`)] + "}\n"
	exact("jq -c '.segments[0] | del(.blocks)' demo.json", seg)
	shows("jq -c '.devices[0].events[0]' demo.json", model)

	real := func(name string) string { return corpus.File(t, name) }
	ctx := func(n string) string {
		return real("cs336-kkaitlyn111__memory_files_memory_ctx" + n + "_fullstep_.pickle")
	}
	corpusDir := filepath.Dir(ctx("128")) + string(filepath.Separator)
	exact("gpumem diff cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle --top 5",
		strings.ReplaceAll(run("diff", ctx("128"), ctx("512"), "--top", "5"), corpusDir, ""))
	exact("gpumem ranks cs336-kkaitlyn111__memory_files_memory_ctx*_fullstep_.pickle cs336-notHanmin__memory_snapshot.pickle",
		run("ranks", ctx("128"), ctx("256"), ctx("512"), real("cs336-notHanmin__memory_snapshot.pickle")))
	shows("gpumem diff --segments flexgen-Yiyi__1.3b_snapshot__66f06b43.pickle flexgen-Yiyi__log1_1.3b_snapshot.pickle",
		run("diff", "--segments", real("flexgen-Yiyi__1.3b_snapshot__66f06b43.pickle"), real("flexgen-Yiyi__log1_1.3b_snapshot.pickle")))
	for page := range changed {
		if err := os.WriteFile(filepath.Join(corpus.Root(), filepath.FromSlash(page)), []byte(docs[page]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompareBadFlagValues: a flag value diff or flame cannot use, or a
// flag they would ignore, is a usage mistake (exit 2, the usage printed),
// not a panic, a drawing or silence.
func TestCompareBadFlagValues(t *testing.T) {
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"diff", "--demo", "--top", "-1"}, "--depth must be at least 1 and --top at least 0"},
		{[]string{"diff", "--demo", "--depth", "0"}, "--depth must be at least 1 and --top at least 0"},
		{[]string{"flame", "peak", "--demo", "--width", "0"}, "--width must be at least 200 pixels"},
		{[]string{"flame", "memory", "--demo", "--width", "-3"}, "--width must be at least 200 pixels"},
		{[]string{"diff", "--demo", "--at", "bogus"}, `--at "bogus": want peak, reserved-peak, end, eN (a trace event) or a time from the trace start such as 12.5ms`},
		{[]string{"flame", "peak", "--demo", "--at", "E5"}, `--at "E5": want peak, reserved-peak, end, eN (a trace event) or a time from the trace start such as 12.5ms`},
		{[]string{"flame", "memory", "--demo", "x.pickle"}, "--demo stands for a missing snapshot, but 1 given: flame memory wants 1 snapshot(s)"},
		{[]string{"diff", "--demo", "a.pickle", "b.pickle"}, "--demo stands for a missing snapshot, but 2 given: want two snapshots A and B"},
		{[]string{"diff", "--demo", "-o", "x.svg"}, "-o and --collapsed go with --segments (a flamegraph of two runs: gpumem flame diff A B)"},
		{[]string{"diff", "--demo", "--collapsed"}, "-o and --collapsed go with --segments (a flamegraph of two runs: gpumem flame diff A B)"},
	} {
		code, out, stderr := runCLI(tt.args...)
		if first, _, _ := strings.Cut(stderr, "\n"); code != 2 || out != "" || first != "gpumem "+tt.args[0]+": "+tt.msg {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr starts %q", tt.args, code, len(out), first)
		}
	}
}

// TestRanksSameRankWarns: two files with the same rank number are still
// two rows, with a warning naming them on standard error.
func TestRanksSameRankWarns(t *testing.T) {
	f := filepath.Join(t.TempDir(), "snap_rank0.pickle")
	if code, _, stderr := runCLI("synth", "--steps", "1", "-o", f); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr)
	}
	code, out, stderr := runCLI("ranks", f, f)
	if code != 0 || strings.Count(out, "snap_rank0.pickle") != 2 || stderr != "gpumem ranks: warning: 2 files give rank 0: snap_rank0.pickle, snap_rank0.pickle\n" {
		t.Errorf("exit %d, stderr %q:\n%s", code, stderr, out)
	}
}

// TestPeakActiveName: diff and ranks call the Active Memory Timeline's
// peak (requested bytes) "peak active", as info does; "allocated" is the
// allocator's rounded blocks.
func TestPeakActiveName(t *testing.T) {
	for _, args := range [][]string{{"diff", "--demo"}, {"ranks", "--demo"}} {
		code, out, stderr := runCLI(args...)
		if code != 0 || !strings.Contains(out, "peak active") || strings.Contains(out, "peak allocated") {
			t.Errorf("%v: exit %d %s, want \"peak active\", not \"peak allocated\":\n%s", args, code, stderr, out)
		}
	}
}

// TestJSONListsNeverNull: on a snapshot with nothing in it (a pickled empty
// list: no segments, no trace) every key that holds a list in the demo's
// --json output holds [] too, never null, so a script needs no null check.
func TestJSONListsNeverNull(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.pickle")
	if err := os.WriteFile(empty, []byte("\x80\x04]\x94."), 0o644); err != nil {
		t.Fatal(err)
	}
	decode := func(args []string) any {
		t.Helper()
		code, out, stderr := runCLI(args...)
		var v any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("%v: exit %d %s:\n%.300s", args, code, stderr, out)
		}
		return v
	}
	for _, args := range [][]string{
		{"steps", "--json", "F"}, {"diff", "--json", "F", "F"}, {"peak", "--json", "F"},
		{"oom", "--json", "F"}, {"ranks", "--json", "F"}, {"info", "--json", "F"},
		{"export", "json", "-o", "-", "F"}, {"export", "perfetto", "-o", "-", "F"},
	} {
		withFile := func(f string) []string {
			a := slices.Clone(args)
			for i := range a {
				if a[i] == "F" {
					a[i] = f
				}
			}
			return a
		}
		lists := map[string]bool{}
		jsonPaths(decode(withFile("--demo")), "", func(path string, v any) {
			if _, ok := v.([]any); ok {
				lists[path] = true
			}
		})
		jsonPaths(decode(withFile(empty)), "", func(path string, v any) {
			if v == nil && lists[path] {
				t.Errorf("%v: %s is null, want []", args, path)
			}
		})
	}
}

// jsonPaths calls fn with every value of a decoded JSON document and its
// path (".key", "[]" for any element of a list).
func jsonPaths(v any, at string, fn func(string, any)) {
	fn(at, v)
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			jsonPaths(e, at+"."+k, fn)
		}
	case []any:
		for _, e := range x {
			jsonPaths(e, at+"[]", fn)
		}
	}
}
