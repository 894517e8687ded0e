package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// oomFixture is a snapshot of internal/analysis's OOM fixtures.
func oomFixture(name string) string {
	return filepath.Join("..", "analysis", "testdata", name+".json")
}

func TestAnswersGolden(t *testing.T) {
	for _, tt := range []struct {
		golden string
		args   []string
	}{
		{"peak-demo.txt", []string{"peak", "--demo"}},
		{"peak-demo-end.txt", []string{"peak", "--demo", "--at", "end", "--depth", "1", "--top", "5"}},
		{"oom-fragmentation.txt", []string{"oom", oomFixture("oom-fragmentation")}},
		{"oom-shortage.txt", []string{"oom", oomFixture("oom-shortage"), "--capacity", "100MiB"}},
		{"oom-outside.txt", []string{"oom", oomFixture("oom-outside"), "--capacity", "128MiB", "--no-replay"}},
		{"oom-none.txt", []string{"oom", "--demo", "--gpu", "T4", "--top", "3"}},
		{"oom-at-dump.txt", []string{"oom", oomFixture("no-oom"), "--at-dump", "--request", "100MiB", "--device-free", "10MiB", "--capacity", "128MiB"}},
		// A dump without a trace (an OOM observer's, history off): the
		// state is the OOM's moment, the request unknown; --request gives
		// it, CUDA free then taken as capacity − reserved.
		{"oom-no-trace.txt", []string{"oom", oomFixture("no-trace")}},
		// --categories: the first matching rule wins (rules[3] never
		// does), names of one's own are categories of their own, a
		// built-in name is the built-in category.
		{"peak-categories.txt", []string{"peak", "--demo", "--categories", filepath.Join("testdata", "rules", "demo.json"), "--top", "6"}},
		{"oom-no-trace-request.txt", []string{"oom", oomFixture("no-trace"), "--request", "12MiB", "--capacity", "80MiB"}},
		{"oom-no-trace-request-free.txt", []string{"oom", oomFixture("no-trace"), "--request", "12MiB", "--device-free", "0"}},
	} {
		t.Run(tt.golden, func(t *testing.T) {
			code, out, errs := runMain(t, nil, tt.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			out = strings.ReplaceAll(out, filepath.Join("..", "analysis", "testdata")+string(filepath.Separator), "")
			checkGolden(t, filepath.Join("testdata", "answers", tt.golden), out)
		})
	}
}

// keys returns the sorted keys of a JSON object.
func keys(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not an object: %s", raw)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string { sort.Strings(s); return s }

var categoryNames = sorted("parameter", "optimizer_state", "gradient", "activation", "temporary", "input", "autograd_detail", "unknown")

// TestPeakJSONShape checks the fields docs/peak-oom.md documents for peak --json.
func TestPeakJSONShape(t *testing.T) {
	code, out, errs := runMain(t, nil, "peak", "--demo", "--json", "--at", "e100")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	want := sorted("file", "device", "at", "peak_allocated_bytes", "peak_reserved_bytes", "live_bytes", "live_count",
		"categories", "sites", "sites_omitted", "size_classes", "fragmentation")
	if got := keys(t, []byte(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("keys %v, want %v", got, want)
	}
	if got := keys(t, doc["at"]); !reflect.DeepEqual(got, sorted("spec", "event", "time_us", "timestep")) {
		t.Errorf("at keys %v", got)
	}
	if got := keys(t, doc["categories"]); !reflect.DeepEqual(got, categoryNames) {
		t.Errorf("category keys %v", got)
	}
	var sites []json.RawMessage
	json.Unmarshal(doc["sites"], &sites)
	if len(sites) == 0 || !reflect.DeepEqual(keys(t, sites[0]), sorted("frames", "count", "bytes", "category", "category_reason", "share")) {
		t.Errorf("sites %s", doc["sites"])
	}
	if got := keys(t, doc["fragmentation"]); !reflect.DeepEqual(got, sorted("headline", "reserved_bytes", "allocated_bytes",
		"requested_bytes", "reserved_unallocated_bytes", "free_bytes", "inactive_split_bytes", "rounding_waste_bytes",
		"largest_free_block_bytes", "largest_free_share")) {
		t.Errorf("fragmentation keys %v", got)
	}
	var at struct{ Event int }
	json.Unmarshal(doc["at"], &at)
	if at.Event != 100 {
		t.Errorf("at.event %d", at.Event)
	}
}

// TestOOMJSONShape checks the fields README documents for oom --json.
func TestOOMJSONShape(t *testing.T) {
	code, out, errs := runMain(t, nil, "oom", oomFixture("oom-shortage"), "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	oomFields := []string{"verdict", "arithmetic", "at", "requested_bytes", "segment_bytes", "device_free_bytes", "reserved_bytes",
		"allocated_bytes", "reserved_unallocated_bytes", "largest_free_block_bytes", "stream", "pool", "capacity_bytes",
		"outside_allocator_bytes", "short_bytes", "categories", "sites", "fragmentation", "settings", "batch_whatif", "batch_whatif_reproduced", "suggestions"}
	want := sorted(append([]string{"file", "device", "ooms", "headroom"}, oomFields...)...)
	if got := keys(t, []byte(out)); !reflect.DeepEqual(got, want) {
		t.Errorf("keys %v\nwant %v", got, want)
	}
	var doc struct {
		Verdict       string  `json:"verdict"`
		CapacityBytes *uint64 `json:"capacity_bytes"`
		Requested     uint64  `json:"requested_bytes"`
		OOMs          []json.RawMessage
		Suggestions   []struct{ Kind, Text string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Verdict != "shortage" || doc.CapacityBytes != nil || doc.Requested != 50<<20 || len(doc.OOMs) != 1 {
		t.Errorf("verdict %s capacity %v requested %d ooms %d", doc.Verdict, doc.CapacityBytes, doc.Requested, len(doc.OOMs))
	}
	if got := keys(t, doc.OOMs[0]); !reflect.DeepEqual(got, sorted(oomFields...)) {
		t.Errorf("ooms[0] keys %v", got)
	}
}

func TestAnswersBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "x.png")
	os.WriteFile(bad, []byte("\x89PNG\r\n\x1a\nnot a snapshot"), 0o644)
	for _, tt := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"peak", bad}, 1, "not a PyTorch memory snapshot"},
		{[]string{"oom", bad}, 1, "not a PyTorch memory snapshot"},
		{[]string{"peak", "--demo", "--at", "e5000"}, 1, "gpumem peak: demo: --at e5000 is outside device 0's trace: valid events are e0..e1984, valid times 0us..349780us (349.78ms)"},
		{[]string{"peak", "--demo", "--at", "soon"}, 2, "want peak, reserved-peak, end, eN"},
		{[]string{"peak", "--demo", "--at", "0"}, 2, "want peak, reserved-peak, end, eN"},
		{[]string{"peak", "--demo", "--at", "e99999999999999999999"}, 1, "outside device 0's trace"},
		{[]string{"oom", "--demo", "--gpu", "Z80"}, 2, "unknown GPU \"Z80\""},
		{[]string{"peak", "--demo", "--device", "3"}, 1, "demo: no device 3 (devices: 0)"},
		{[]string{"oom", "--demo", "--gpu", "TPU"}, 2, "unknown GPU \"TPU\""},
		{[]string{"oom", "--demo", "--capacity", "lots"}, 2, "--capacity \"lots\""},
		{[]string{"peak"}, 2, "no snapshot given"},
		{[]string{"oom", "--demo", "--at-dump"}, 2, "--at-dump needs --request SIZE"},
		{[]string{"oom", "--demo", "--device-free", "1GiB"}, 2, "--device-free and --stream go with --request"},
		{[]string{"oom", "--demo", "--at-dump", "--request", "0", "--device-free", "1GiB"}, 2, "--request \"0\": want a size"},
		{[]string{"oom", "--demo", "--at-dump", "--request", "1GiB", "--device-free", "much"}, 2, "--device-free \"much\""},
		{[]string{"oom", oomFixture("oom-shortage"), "--at-dump", "--request", "1GiB", "--device-free", "0"}, 1, "the trace records 1 out-of-memory event(s)"},
		{[]string{"peak", "--demo", "--categories", rulesFile(t, `[{"match": "ok", "category": "a"}, {"match": "(", "category": "b"}]`)}, 1, `rules[1]: "match" "(" is not a regular expression`},
		{[]string{"oom", "--demo", "--categories", rulesFile(t, `{"rules": []}`)}, 1, "not a list of rules: want a JSON array"},
		{[]string{"peak", "--demo", "--categories", rulesFile(t, `[{"match": "a", "category": "b"}, {"match": "a", "cat": "x"}]`)}, 1, `rules[1]: unknown field "cat"`},
		{[]string{"peak", "--demo", "--categories", rulesFile(t, `[{"match": 3, "category": "x"}]`)}, 1, "rules[0]: want {\"match\": REGEX"},
		{[]string{"peak", "--demo", "--categories", rulesFile(t, `[{"match": "a"}]`)}, 1, `rules[0]: no "category"`},
		{[]string{"peak", "--demo", "--categories", rulesFile(t, `[{"match": "a", "category": ""}]`)}, 1, `rules[0]: "category" "": want a name`},
		{[]string{"peak", "--demo", "--categories", rulesFile(t, `[{"match": "a"`)}, 1, "not JSON"},
		{[]string{"peak", "--demo", "--categories", filepath.Join(t.TempDir(), "none.json")}, 1, "none.json: no such file"},
	} {
		code, _, errs := runMain(t, nil, tt.args...)
		first := strings.SplitN(errs, "\n", 2)[0]
		if code != tt.code || !strings.Contains(first, tt.msg) || code == 1 && strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errs, tt.code, tt.msg)
		}
	}
}

// TestPeakCorpus: peak --json reports info --json's
// active_timeline_peak_bytes for every device of every real snapshot.
func TestPeakCorpus(t *testing.T) {
	for _, f := range corpus.Files(t) {
		code, out, errs := runMain(t, nil, "info", "--json", f)
		if code != 0 {
			t.Fatalf("info %s: %s", f, errs)
		}
		var info struct {
			Devices []struct {
				Device int    `json:"device"`
				Peak   uint64 `json:"active_timeline_peak_bytes"`
			} `json:"devices"`
		}
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatal(err)
		}
		code, out, errs = runMain(t, nil, "peak", "--json", "--top", "1", f)
		if code != 0 {
			t.Fatalf("peak %s: %s", f, errs)
		}
		var peaks []struct {
			Device int    `json:"device"`
			Peak   uint64 `json:"peak_allocated_bytes"`
			Live   uint64 `json:"live_bytes"`
		}
		if strings.HasPrefix(out, "{") {
			out = "[" + out + "]"
		}
		if err := json.Unmarshal([]byte(out), &peaks); err != nil {
			t.Fatal(err)
		}
		if len(peaks) != len(info.Devices) {
			t.Errorf("%s: peak answers %d devices, info %d", filepath.Base(f), len(peaks), len(info.Devices))
			continue
		}
		for i, d := range info.Devices {
			p := peaks[i]
			if p.Device != d.Device || p.Peak != d.Peak || p.Live != d.Peak {
				t.Errorf("%s device %d: peak %d (live %d at it), info %d", filepath.Base(f), d.Device, p.Peak, p.Live, d.Peak)
			}
		}
	}
}

// TestCategoryReasonEverySite: every site of peak --json and oom --json
// says which rule set its category and why.
func TestCategoryReasonEverySite(t *testing.T) {
	runs := [][]string{
		{"peak", "--demo", "--json", "--top", "0"},
		{"oom", oomFixture("oom-shortage"), "--json", "--top", "0", "--no-replay"},
		{"oom", oomFixture("no-trace"), "--json", "--top", "0"},
	}
	for _, f := range []string{"cs336-notHanmin__memory_snapshot.pickle", "select_n__snapshot__5a601013.pickle", "flexgen-Yiyi__oom_snapshot.pickle"} {
		runs = append(runs, []string{"peak", corpus.File(t, f), "--json", "--top", "0"})
	}
	for _, args := range runs {
		code, out, errs := runMain(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var doc struct {
			Sites []struct {
				Category string `json:"category"`
				Reason   string `json:"category_reason"`
			} `json:"sites"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if len(doc.Sites) == 0 {
			t.Errorf("%v: no sites", args)
		}
		for _, s := range doc.Sites {
			if s.Reason == "" || !strings.Contains(s.Reason, ": ") {
				t.Errorf("%v: site of %s without a reason: %q", args, s.Category, s.Reason)
			}
		}
	}
}

// rulesFile writes a --categories file.
func rulesFile(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "rules.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCategoriesJSON: a user rule's sites say so in category_reason, with
// the rule's index; the categories map has the user's names.
func TestCategoriesJSON(t *testing.T) {
	code, out, errs := runMain(t, nil, "peak", "--demo", "--json", "--top", "0", "--categories", filepath.Join("testdata", "rules", "demo.json"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Categories map[string]uint64 `json:"categories"`
		Sites      []struct {
			Frames   []string `json:"frames"`
			Category string   `json:"category"`
			Reason   string   `json:"category_reason"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Categories["attention"] == 0 || doc.Categories["loss"] == 0 {
		t.Errorf("categories %v", doc.Categories)
	}
	if _, ok := doc.Categories["never_reached"]; !ok {
		t.Errorf("a category the rules name is listed even at 0: %v", doc.Categories)
	}
	seen := map[string]bool{}
	for _, s := range doc.Sites {
		if strings.HasPrefix(s.Reason, "user-rule-") {
			seen[s.Category] = true
			if !strings.Contains(s.Reason, "rules[") || !strings.Contains(s.Reason, "demo.json") {
				t.Errorf("reason %q", s.Reason)
			}
		}
		if s.Category == "never_reached" {
			t.Errorf("rules[3] matched, but rules[0] comes first: %v", s.Frames)
		}
	}
	if !seen["attention"] || !seen["loss"] || !seen["parameter"] {
		t.Errorf("user categories seen %v", seen)
	}
}

// TestOOMUnwindAnswer: an OOM mid-forward whose exception then frees the
// forward's tensors (synth --oom-unwind): what the forward held at the
// OOM is activation, not temporary; batch_whatif says which scales avoid
// the OOM, and the suggestion names the largest.
func TestOOMUnwindAnswer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oom.pickle")
	if code, _, errs := runMain(t, nil, "synth", "--model", "mlp", "--oom-unwind", "--layers", "8", "--hidden", "1024", "--batch", "1024", "--capacity", "60MiB", "-o", path); code != 0 {
		t.Fatalf("synth: %s", errs)
	}
	code, out, errs := runMain(t, nil, "oom", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var a struct {
		Categories map[string]uint64 `json:"categories"`
		Batch      []struct {
			Scale  float64 `json:"scale"`
			Avoids bool    `json:"avoids_oom"`
		} `json:"batch_whatif"`
		Reproduced  bool `json:"batch_whatif_reproduced"`
		Suggestions []struct{ Kind, Text string }
		Sites       []struct {
			Category string `json:"category"`
			Reason   string `json:"category_reason"`
		} `json:"sites"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatal(err)
	}
	if a.Categories["temporary"] != 0 || a.Categories["activation"] == 0 {
		t.Errorf("categories at the OOM %v: the forward's tensors are activations", a.Categories)
	}
	oomRule := false
	for _, s := range a.Sites {
		oomRule = oomRule || s.Category == "activation" && strings.HasPrefix(s.Reason, "forward-oom: ")
	}
	if !oomRule {
		t.Errorf("no site says forward-oom")
	}
	var avoids []float64
	for _, b := range a.Batch {
		if b.Avoids {
			avoids = append(avoids, b.Scale)
		}
	}
	if !a.Reproduced || len(a.Batch) != 3 || !reflect.DeepEqual(avoids, []float64{0.5, 0.25}) {
		t.Errorf("batch what-if %+v (reproduced %v)", a.Batch, a.Reproduced)
	}
	if len(a.Suggestions) == 0 || a.Suggestions[0].Kind != "smaller_batch" || !strings.Contains(a.Suggestions[0].Text, "a batch 0.5× the recorded one gets past this OOM") {
		t.Errorf("suggestions %+v", a.Suggestions)
	}
}

// TestDiffCategories: diff --categories applies the rules to both sides.
func TestDiffCategories(t *testing.T) {
	rules := filepath.Join("testdata", "rules", "demo.json")
	code, out, errs := runMain(t, nil, "diff", "--demo", "--json", "--categories", rules)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var d struct {
		A struct {
			Categories map[string]uint64 `json:"categories"`
		} `json:"a"`
		Delta map[string]int64 `json:"categories_delta"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.A.Categories["attention"] == 0 || d.A.Categories["loss"] == 0 {
		t.Errorf("diff --categories: A's categories %v", d.A.Categories)
	}
	if _, ok := d.Delta["attention"]; !ok {
		t.Errorf("categories_delta lacks attention: %v", d.Delta)
	}
}
