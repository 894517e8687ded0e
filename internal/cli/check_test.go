package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/check"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/synth"
)

// checkRun is octree-nca__my_snapshot__255fc09a.pickle: 20 steps of
// inference whose last allocates 15 GiB; peak active 16285882240 B, peak
// reserved 24410849280 B, 16285696000 B of temporaries at the peak,
// fragmentation 0.7493725358851373 there (the figures `peak --json` prints).
const checkRun = "octree-nca__my_snapshot__255fc09a.pickle"

// TestCheckBudgetsReal pins, on a real file, each budget kind just within
// and just over its limit: exit status and lines.
func TestCheckBudgetsReal(t *testing.T) {
	f := corpus.File(t, checkRun)
	const where = checkRun + " cuda:0: "
	const site = "; top site: 7.58 GiB <module> (whole_slide_inference.py:163)"
	for _, tt := range []struct {
		args []string
		code int
		line string
	}{
		{[]string{"--max-peak", "16285882240"}, 0, "ok    " + where + "peak active 15.17 GiB, within the max_peak budget 15.17 GiB"},
		{[]string{"--max-peak", "16285882239"}, 1, "FAIL  " + where + "peak active 16285882240 B, over the max_peak budget 16285882239 B" + site},
		{[]string{"--max-peak", "15GiB"}, 1, "FAIL  " + where + "peak active 15.17 GiB, over the max_peak budget 15 GiB" + site},
		{[]string{"--max-reserved", "24410849280"}, 0, "ok    " + where + "peak reserved 22.73 GiB, within the max_reserved budget 22.73 GiB"},
		{[]string{"--max-reserved", "20GiB"}, 1, "FAIL  " + where + "peak reserved 22.73 GiB, over the max_reserved budget 20 GiB" + site},
		{[]string{"--max-category", "temporary=16285696000"}, 0, "ok    " + where + "temporary at the peak 15.17 GiB, within the max_category budget 15.17 GiB"},
		{[]string{"--max-category", "temporary=8GiB"}, 1, "FAIL  " + where + "temporary at the peak 15.17 GiB, over the max_category budget 8 GiB" + site},
		{[]string{"--max-category", "activation=0"}, 0, "ok    " + where + "activation at the peak 0 B, within the max_category budget 0 B"},
		{[]string{"--max-fragmentation", "0.75"}, 0, "ok    " + where + "fragmentation at the peak 0.749, within the max_fragmentation budget 0.750"},
		{[]string{"--max-fragmentation", "0.5"}, 1, "FAIL  " + where + "fragmentation at the peak 0.749, over the max_fragmentation budget 0.500" + site},
		{[]string{"--min-headroom", "1GiB", "--gpu", "H200"}, 0, "ok    " + where + "headroom (capacity 140.4 GiB - peak reserved) 117.67 GiB, at least the min_headroom budget 1 GiB"},
		{[]string{"--min-headroom", "1GiB", "--capacity", "24GiB"}, 0, "ok    " + where + "headroom (capacity 24 GiB - peak reserved) 1.27 GiB, at least the min_headroom budget 1 GiB"},
		{[]string{"--min-headroom", "2GiB", "--capacity", "24GiB"}, 1, "FAIL  " + where + "headroom (capacity 24 GiB - peak reserved) 1.27 GiB, under the min_headroom budget 2 GiB" + site},
		// Steady for 19 steps, then one step of 15 GiB: no leak.
		{[]string{"--max-growth-per-step", "0"}, 0, "ok    " + where + "growth of live memory per step 0, within the max_growth_per_step budget 0 B (no leak: live memory does not grow at every step (+405.52 MiB per step on average))"},
	} {
		args := append([]string{"check", f}, tt.args...)
		code, out, errs := runMain(t, nil, args...)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != tt.code || len(lines) != 2 || lines[0] != tt.line {
			t.Errorf("check %s: exit %d, output\n%s%s\nwant exit %d and\n%s", strings.Join(tt.args, " "), code, out, errs, tt.code, tt.line)
			continue
		}
		held := map[int]string{0: "1 budget: 1 held, 0 failed", 1: "1 budget: 0 held, 1 failed"}[tt.code]
		if lines[1] != held {
			t.Errorf("check %s: summary %q, want %q", strings.Join(tt.args, " "), lines[1], held)
		}
		if wantErr := map[int]string{0: "", 1: "gpumem check: 1 of 1 budgets failed\n"}[tt.code]; errs != wantErr {
			t.Errorf("check %s: stderr %q, want %q", strings.Join(tt.args, " "), errs, wantErr)
		}
	}
}

// TestCheckFiguresArePeaks: the figures check compares are the ones peak
// --json prints for the same file.
func TestCheckFiguresArePeaks(t *testing.T) {
	f := corpus.File(t, checkRun)
	_, out, _ := runMain(t, nil, "peak", "--json", f)
	var p struct {
		Active     float64            `json:"peak_allocated_bytes"`
		Reserved   float64            `json:"peak_reserved_bytes"`
		Categories map[string]float64 `json:"categories"`
		Frag       struct {
			Headline float64 `json:"headline"`
		} `json:"fragmentation"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	r := checkJSON(t, 1, f, "--max-peak", "1", "--max-reserved", "1", "--max-category", "temporary=1", "--max-fragmentation", "0")
	want := []float64{p.Active, p.Reserved, p.Categories["temporary"], p.Frag.Headline}
	for i, c := range r.Checks {
		if c.Value != want[i] || c.Status != check.Fail {
			t.Errorf("%s: value %v status %s, want %v (peak --json), fail", c.Budget, c.Value, c.Status, want[i])
		}
	}
}

// checkJSON runs check --json and decodes its result.
func checkJSON(t *testing.T, wantCode int, args ...string) *check.Result {
	t.Helper()
	code, out, errs := runMain(t, nil, append([]string{"check", "--json"}, args...)...)
	if code != wantCode {
		t.Fatalf("check %v: exit %d, want %d: %s", args, code, wantCode, errs)
	}
	var r check.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check %v: %v\n%s", args, err, out)
	}
	return &r
}

// TestCheckGrowthSynthLeak: a synthetic run that keeps 3 MiB more every
// step (known truth) fails a 3 MiB - 1 B budget, names the leaking site,
// and holds at 3 MiB; fewer than three steps cannot be checked.
func TestCheckGrowthSynthLeak(t *testing.T) {
	dir := t.TempDir()
	gen := func(name string, steps int) string {
		s, _, err := synth.Generate(synth.Workload{Model: "mlp", Layers: 2, Hidden: 512, Batch: 8, Steps: steps, Leak: 3 << 20}, synth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if _, err := synth.WriteFile(path, s, false); err != nil {
			t.Fatal(err)
		}
		return path
	}
	leak := gen("leak.pickle", 4)
	code, out, _ := runMain(t, nil, "check", leak, "--max-growth-per-step", "3MiB")
	if want := "ok    leak.pickle cuda:0: growth of live memory per step +3 MiB, within the max_growth_per_step budget 3 MiB\n"; code != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("3 MiB budget: exit %d\n%swant exit 0 and\n%s", code, out, want)
	}
	code, out, _ = runMain(t, nil, "check", leak, "--max-growth-per-step", "3145727")
	if want := "FAIL  leak.pickle cuda:0: growth of live memory per step +3145728 B, over the max_growth_per_step budget 3145727 B; grew most: +9 MiB log_metrics (train.py:141) < train_step (train.py:158)\n"; code != 1 || !strings.HasPrefix(out, want) {
		t.Errorf("3 MiB - 1 B budget: exit %d\n%swant exit 1 and\n%s", code, out, want)
	}
	short := gen("short.pickle", 2)
	code, out, _ = runMain(t, nil, "check", short, "--max-growth-per-step", "3MiB")
	if want := "ERROR short.pickle cuda:0: growth of live memory per step: cannot be checked: 2 step(s) found; the growth per step needs at least 3 (the first is warm-up)\n"; code != 1 || !strings.HasPrefix(out, want) {
		t.Errorf("2 steps: exit %d\n%swant exit 1 and\n%s", code, out, want)
	}
}

// TestCheckBaseline: the same training step at context 512 against 128
// (real runs): the peak grows by 62 MiB, within 5%; the activations at the
// peak grow by 58.59 MiB (3x), over 5% of the baseline's, and the line
// names the site that grew.
func TestCheckBaseline(t *testing.T) {
	old := corpus.File(t, "cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle")
	cur := corpus.File(t, "cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle")
	r := checkJSON(t, 1, cur, "--baseline", old, "--max-increase", "5%")
	byCat := map[string]check.Check{}
	for _, c := range r.Checks {
		if c.Budget != "max_increase" {
			t.Fatalf("unexpected budget %s", c.Budget)
		}
		byCat[c.Category] = c
	}
	// The peak's change is diff's.
	_, dj, _ := runMain(t, nil, "diff", "--json", old, cur)
	var d struct {
		A, B struct {
			Peak float64 `json:"peak_allocated_bytes"`
		}
		Delta map[string]float64 `json:"categories_delta"`
	}
	if err := json.Unmarshal([]byte(dj), &d); err != nil {
		t.Fatal(err)
	}
	pk := byCat[""]
	if pk.Status != check.Pass || pk.Value != d.B.Peak-d.A.Peak || pk.Value != 65384448 || pk.Baseline == nil || *pk.Baseline == 0 || pk.Limit != *pk.Baseline*5/100 {
		t.Errorf("peak: %+v", pk)
	}
	act := byCat["activation"]
	if act.Status != check.Fail || act.Value != 61440000 || act.Value != d.Delta["activation"] || len(act.Sites) == 0 ||
		act.Sites[0].Bytes != 61440000 || !strings.Contains(strings.Join(act.Sites[0].Frames, ";"), "transformer.py:22") {
		t.Errorf("activation: %+v", act)
	}
	want := "FAIL  cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle cuda:0: activation at the peak over the baseline +58.59 MiB, over the max_increase budget 1000 KiB (baseline cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle 19.53 MiB); grew most: +58.59 MiB forward (transformer.py:22) < forward (transformer.py:298) < run_memory_foward_fullstep (benchmark.py:231)"
	code, out, _ := runMain(t, nil, "check", cur, "--baseline", old, "--max-increase", "5%")
	if code != 1 || !strings.Contains(out, want+"\n") {
		t.Errorf("exit %d\n%swant a line\n%s", code, out, want)
	}
	// A size limit: 64 MiB holds for everything.
	if r := checkJSON(t, 0, cur, "--baseline", old, "--max-increase", "64MiB"); !r.OK {
		t.Errorf("64 MiB: %+v", r)
	}
	// The same run against itself: no change.
	if r := checkJSON(t, 0, old, "--baseline", old, "--max-increase", "0"); !r.OK || r.Checks[0].Value != 0 {
		t.Errorf("against itself: %+v", r.Checks[0])
	}
}

// TestCheckJUnit: --junit writes JUnit XML that reads back with the
// counts and messages of --json.
func TestCheckJUnit(t *testing.T) {
	f := corpus.File(t, checkRun)
	out := filepath.Join(t.TempDir(), "report.xml")
	args := []string{f, "--max-peak", "20GiB", "--max-reserved", "20GiB", "--max-fragmentation", "0.5", "--max-growth-per-step", "0"}
	r := checkJSON(t, 1, append(args, "--junit", out)...)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		XMLName  xml.Name `xml:"testsuites"`
		Tests    int      `xml:"tests,attr"`
		Failures int      `xml:"failures,attr"`
		Errors   int      `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Tests int    `xml:"tests,attr"`
			Cases []struct {
				Name      string `xml:"name,attr"`
				Classname string `xml:"classname,attr"`
				Failure   *struct {
					Message string `xml:"message,attr"`
					Text    string `xml:",chardata"`
				} `xml:"failure"`
				Error *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, data)
	}
	if doc.Tests != 4 || doc.Failures != 2 || doc.Errors != 0 || len(doc.Suites) != 1 || doc.Suites[0].Tests != 4 || len(doc.Suites[0].Cases) != 4 {
		t.Fatalf("tests %d failures %d errors %d suites %d\n%s", doc.Tests, doc.Failures, doc.Errors, len(doc.Suites), data)
	}
	if doc.Suites[0].Name != f+" cuda:0" {
		t.Errorf("suite %q", doc.Suites[0].Name)
	}
	for i, c := range doc.Suites[0].Cases {
		want := r.Checks[i]
		if c.Name != want.Budget || (c.Failure != nil) != (want.Status == check.Fail) {
			t.Errorf("case %d: %s failure %v; want %s %s", i, c.Name, c.Failure != nil, want.Budget, want.Status)
		}
		if c.Failure != nil && (c.Failure.Message != want.Message || c.Failure.Text != want.Message) {
			t.Errorf("case %d: message %q, want %q", i, c.Failure.Message, want.Message)
		}
	}
}

// TestCheckGitHubAnnotations: under GitHub Actions each failed budget is
// also an ::error:: workflow command (on stderr with --json).
func TestCheckGitHubAnnotations(t *testing.T) {
	f := corpus.File(t, checkRun)
	t.Setenv("GITHUB_ACTIONS", "true")
	_, out, _ := runMain(t, nil, "check", f, "--max-peak", "1GiB", "--max-reserved", "30GiB")
	ann := regexp.MustCompile(`(?m)^::error.*$`).FindAllString(out, -1)
	want := "::error title=gpumem check%3A max_peak::" + checkRun + " cuda:0: peak active 15.17 GiB, over the max_peak budget 1 GiB; top site: 7.58 GiB <module> (whole_slide_inference.py:163)"
	if len(ann) != 1 || ann[0] != want {
		t.Errorf("annotations %q, want [%q]", ann, want)
	}
	_, out, errs := runMain(t, nil, "check", "--json", f, "--max-peak", "1GiB")
	if strings.Contains(out, "::error") || !strings.Contains(errs, "::error title=") {
		t.Errorf("--json: annotations must go to stderr; stdout %q stderr %q", out, errs)
	}
	t.Setenv("GITHUB_ACTIONS", "")
	if _, out, _ := runMain(t, nil, "check", f, "--max-peak", "1GiB"); strings.Contains(out, "::error") {
		t.Errorf("annotations outside GitHub Actions:\n%s", out)
	}
}

// TestCheckBudgetsFile: a budgets file's budgets per device and per rank,
// overridden by flags; its mistakes are one line with the line number.
func TestCheckBudgetsFile(t *testing.T) {
	f := corpus.File(t, checkRun)
	dir := t.TempDir()
	// Two "ranks" of one job: the same run under two names.
	for _, n := range []string{"snap_rank0.pickle", "snap_rank1.pickle"} {
		if err := os.Symlink(f, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	write := func(body string) string {
		p := filepath.Join(dir, "budgets.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b := write(`{
  "max_peak": "20GiB",
  "max_category": {"temporary": "16GiB"},
  "devices": {"0": {"max_reserved": "30GiB"}},
  "ranks": {"1": {"max_peak": "10GiB", "baseline": "snap_rank0.pickle", "max_increase": "1%"}}
}`)
	r0, r1 := filepath.Join(dir, "snap_rank0.pickle"), filepath.Join(dir, "snap_rank1.pickle")
	r := checkJSON(t, 1, "--budgets", b, r0, r1)
	var got []string
	for _, c := range r.Checks {
		got = append(got, filepath.Base(c.File)+" "+c.Budget+" "+c.Category+" "+string(c.Status))
	}
	want := []string{
		"snap_rank0.pickle max_peak  pass", "snap_rank0.pickle max_reserved  pass", "snap_rank0.pickle max_category temporary pass",
		"snap_rank1.pickle max_peak  fail", "snap_rank1.pickle max_reserved  pass", "snap_rank1.pickle max_category temporary pass",
		"snap_rank1.pickle max_increase  pass", "snap_rank1.pickle max_increase parameter pass", "snap_rank1.pickle max_increase temporary pass",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("checks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.Checks[3].Rank != 1 || r.Checks[3].Limit != 10<<30 {
		t.Errorf("rank 1's peak budget: %+v", r.Checks[3])
	}
	// A flag overrides the file.
	if r := checkJSON(t, 0, "--budgets", b, r0, "--max-category", "temporary=20GiB"); r.Checks[2].Limit != 20<<30 {
		t.Errorf("flag override: %+v", r.Checks[2])
	}
	for _, tt := range []struct{ body, want string }{
		{`{"max_peek": "1GiB"}`, `budgets.json: json: unknown field "max_peek"`},
		{"{\n  \"max_peak\": }", `budgets.json: line 2: invalid character '}'`},
		{`{"max_fragmentation": "high"}`, `budgets.json: line 1: json: cannot unmarshal string`},
		{"{\n  \"max_peak\": \"1 parsec\"\n}", `budgets.json: bad size "1 parsec"`},
		{`{"max_category": {"weights": "1GiB"}}`, `budgets.json: unknown category "weights"`},
		{`{"ranks": {"x": {"max_peak": 1}}}`, `budgets.json: ranks: key "x" is not a number`},
		{`{"devices": {"0": {"min_headroom": "1GiB"}}}`, `budgets.json: devices.0: min_headroom needs the device's capacity`},
	} {
		code, _, errs := runMain(t, nil, "check", "--budgets", write(tt.body), r0)
		if code != 1 || !strings.HasPrefix(errs, "gpumem check: ") || !strings.Contains(errs, tt.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want one line with %q", tt.body, code, errs, tt.want)
		}
	}
}

// TestCheckUsage: mistakes on the command line exit 2 with one line first.
func TestCheckUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"x.pickle"}, "no budget given"},
		{[]string{"--max-peak", "1GiB"}, "no snapshot given"},
		{[]string{"x.pickle", "--max-peak", "lots"}, `bad size "lots"`},
		{[]string{"x.pickle", "--min-headroom", "1GiB"}, "--min-headroom needs --gpu NAME or --capacity SIZE"},
		{[]string{"x.pickle", "--min-headroom", "1GiB", "--gpu", "H100", "--capacity", "80GiB"}, "give --gpu or --capacity, not both"},
		{[]string{"x.pickle", "--baseline", "y.pickle"}, "--baseline needs --max-increase"},
		{[]string{"x.pickle", "--max-increase", "5%"}, "--max-increase needs --baseline"},
		{[]string{"x.pickle", "--baseline", "y", "--max-increase", "five"}, `bad increase "five"`},
		{[]string{"x.pickle", "--max-category", "weights=1GiB"}, `unknown category "weights"`},
		{[]string{"x.pickle", "--max-category", "activation"}, "want NAME=SIZE"},
		{[]string{"x.pickle", "--max-fragmentation", "1.5"}, "--max-fragmentation 1.5: want a fraction from 0 to 1"},
		{[]string{"x.pickle", "--min-headroom", "1GiB", "--gpu", "Z80"}, "Z80"},
		{[]string{"x.pickle", "--budgets", "b.json", "--max-category", "weights=1GiB"}, `unknown category "weights"`},
	} {
		code, _, errs := runMain(t, nil, append([]string{"check"}, tt.args...)...)
		first, _, _ := strings.Cut(errs, "\n")
		if code != 2 || !strings.Contains(first, tt.want) {
			t.Errorf("check %v: exit %d, first line %q; want exit 2 and %q", tt.args, code, first, tt.want)
		}
	}
	code, _, errs := runMain(t, nil, "check", "missing.pickle", "--max-peak", "1GiB")
	if code != 1 || errs != "gpumem check: missing.pickle: no such file\n" {
		t.Errorf("missing file: exit %d %q", code, errs)
	}
}

// TestCheckJSONDocumented: every key of check --json is in docs/check.md.
func TestCheckJSONDocumented(t *testing.T) {
	f := corpus.File(t, checkRun)
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "check.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, out, _ := runMain(t, nil, "check", "--json", f, "--max-peak", "1GiB", "--baseline", f, "--max-increase", "1%", "--max-growth-per-step", "0")
	var keys func(v any)
	seen := map[string]bool{}
	keys = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				seen[k] = true
				keys(y)
			}
		case []any:
			for _, y := range x {
				keys(y)
			}
		}
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	keys(v)
	for k := range seen {
		if !strings.Contains(string(doc), "`"+k+"`") {
			t.Errorf("docs/check.md does not document the JSON key %q", k)
		}
	}
}
