package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// simGolden compares got with testdata/sim/NAME (go test -update rewrites it).
func simGolden(t *testing.T, name, got string) {
	t.Helper()
	checkGolden(t, filepath.Join("testdata", "sim", name), got)
}

func TestSimScript(t *testing.T) {
	script := filepath.Join("testdata", "sim", "example.script")
	code, out, errs := runMain(t, nil, "sim", "--script", script)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	simGolden(t, "example.txt", out)

	code, out, errs = runMain(t, nil, "sim", "--script", script, "--json", "--config", "max_split_size_mb:64")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Config string `json:"config"`
		Steps  []struct {
			Line  int              `json:"line"`
			Op    string           `json:"op"`
			Stats map[string]int64 `json:"stats"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Config != "max_split_size_mb:64" || len(doc.Steps) == 0 {
		t.Fatalf("json: %+v", doc)
	}
	for _, k := range []string{"allocated_bytes.all.current", "reserved_bytes.all.current", "requested_bytes.all.current",
		"active_bytes.all.current", "inactive_split_bytes.all.current", "allocation.all.current", "active.small_pool.current",
		"active.large_pool.current", "segment.small_pool.current", "segment.large_pool.current",
		"inactive_split.small_pool.current", "inactive_split.large_pool.current", "allocated_bytes.all.peak",
		"reserved_bytes.all.peak", "requested_bytes.all.peak", "active_bytes.all.peak"} {
		if _, ok := doc.Steps[0].Stats[k]; !ok {
			t.Errorf("json stats lack %s", k)
		}
	}
	if got := doc.Steps[0].Stats["reserved_bytes.all.current"]; got != 20<<20 {
		t.Errorf("first step reserved %d, want 20 MiB", got)
	}
}

func TestSimErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.script")
	os.WriteFile(bad, []byte("alloc a 1MiB\nfree b\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"sim", "--script", bad}, 1, "bad.script: line 2: b is not allocated"},
		{[]string{"sim", "--script", bad, "--config", "max_split_size_mb:5"}, 2, "max_split_size_mb too small"},
		{[]string{"sim", "--script", bad, "--config", "nonsense:1"}, 2, `Unrecognized key "nonsense"`},
		{[]string{"sim", "--script", bad, "--fraction", "2", "--capacity", "1GiB"}, 2, "--fraction must be in [0, 1], got 2"},
		{[]string{"sim", "--script", bad, "--fraction", "0.5"}, 2, "--fraction needs --capacity"},
		{[]string{"sim", "--script", filepath.Join(dir, "none")}, 1, "no such file"},
		{[]string{"sim", "--script", dir}, 1, dir + ": is a directory, not a script"},
		{[]string{"sim", "--script", bad, "--capacity", "lots"}, 2, "--capacity"},
		{[]string{"sim", filepath.Join(dir, "none.pickle")}, 1, "no such file"},
		{[]string{"sim"}, 2, "need --script FILE or one snapshot FILE"},
		{[]string{"sim", "--curve", "10", filepath.Join(dir, "none.pickle")}, 2, "--curve needs --json"},
		{[]string{"sim", "--curve", "10", "--json", "--script", bad}, 2, "--curve draws a snapshot's replay"},
		{[]string{"sim", "--curve", "9999", "--json", filepath.Join(dir, "none.pickle")}, 2, "--curve 9999: want a number of buckets from 1 to 4096"},
	}
	for _, tt := range tests {
		code, _, errs := runMain(t, nil, tt.args...)
		if code != tt.code || !strings.Contains(errs, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errs, tt.code, tt.want)
		}
		if code == 1 && strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: error is not one line: %q", tt.args, errs)
		}
	}
}

func TestSimReplay(t *testing.T) {
	p := filepath.Join(corpus.Snapshots(t), "real", "cs336-silmont2000__mem_snapshot.pickle")
	code, out, errs := runMain(t, nil, "sim", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	simGolden(t, "replay.txt", out)

	code, out, _ = runMain(t, nil, "sim", p, "--json")
	var doc struct {
		Validation struct {
			Matched int  `json:"alloc_addresses_matched"`
			Total   int  `json:"alloc_addresses_total"`
			SegM    int  `json:"segment_events_matched"`
			SegT    int  `json:"segment_events_total"`
			Final   bool `json:"final_state_matches"`
		} `json:"validation"`
		Predicted struct {
			PeakReserved  uint64 `json:"peak_reserved_bytes"`
			PeakAllocated uint64 `json:"peak_allocated_bytes"`
		} `json:"predicted"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("json replay: %d %s", code, out)
	}
	v := doc.Validation
	if v.Total == 0 || v.Matched != v.Total || v.SegM != v.SegT || !v.Final || doc.Predicted.PeakReserved == 0 {
		t.Errorf("validation %+v predicted %+v", v, doc.Predicted)
	}

	code, out, errs = runMain(t, nil, "sim", p, "--config", "expandable_segments:True", "--capacity", "80GiB")
	if code != 0 || !strings.Contains(out, "what-if expandable_segments:True") || !strings.Contains(out, "no allocation fails at 80 GiB") {
		t.Errorf("what-if: %d %s %s", code, out, errs)
	}
	code, out, errs = runMain(t, nil, "sim", p, "--sweep")
	if code != 0 {
		t.Fatalf("sweep: %d %s", code, errs)
	}
	simGolden(t, "sweep.txt", out)
}

// TestSimFromEmpty: cs336-notHanmin's trace starts with 999 segments
// (22.2 GiB) reserved. The sweep says so and replays from empty, where the
// settings give different peaks; under the recorded layout they cannot.
func TestSimFromEmpty(t *testing.T) {
	p := filepath.Join(corpus.Snapshots(t), "real", "cs336-notHanmin__memory_snapshot.pickle")
	code, out, errs := runMain(t, nil, "sim", p, "--sweep")
	if code != 0 {
		t.Fatalf("sweep: %d %s", code, errs)
	}
	for _, want := range []string{"trace starts with 22.21 GiB reserved in 999 segments made before recording; under the recorded layout no setting can change them",
		"replayed from an empty allocator under 11 settings"} {
		if !strings.Contains(out, want) {
			t.Errorf("sweep output lacks %q:\n%s", want, out)
		}
	}
	peaks := func(args ...string) map[uint64]bool {
		t.Helper()
		code, out, errs := runMain(t, nil, append([]string{"sim", p, "--sweep", "--json"}, args...)...)
		var doc struct {
			FromEmpty bool `json:"from_empty"`
			Sweep     []struct {
				Peak uint64 `json:"peak_reserved_bytes"`
			} `json:"sweep"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || len(doc.Sweep) != 11 {
			t.Fatalf("sweep --json %v: %d %s %s", args, code, errs, out)
		}
		if doc.FromEmpty != (len(args) == 0) {
			t.Errorf("sweep --json %v: from_empty %v", args, doc.FromEmpty)
		}
		m := map[uint64]bool{}
		for _, r := range doc.Sweep {
			m[r.Peak] = true
		}
		return m
	}
	if n := len(peaks()); n < 3 {
		t.Errorf("from empty, the 11 settings give only %d different peaks", n)
	}
	if n := len(peaks("--from-empty=false")); n > 2 {
		t.Errorf("under the recorded layout the settings give %d different peaks; expected them frozen", n)
	}
}

// TestSimCapacityOOM: a synth run that stopped at an OOM on a 3 GiB device;
// --capacity oom recovers 3 GiB and the recorded settings OOM again at the
// recorded event.
func TestSimCapacityOOM(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "oom.pickle")
	if code, _, errs := runMain(t, nil, "synth", "--model", "mlp", "--layers", "8", "--hidden", "8192", "--capacity", "3GiB", "-o", snap); code != 0 {
		t.Fatalf("synth: %s", errs)
	}
	code, out, errs := runMain(t, nil, "sim", snap, "--capacity", "oom", "--json")
	if code != 0 {
		t.Fatalf("sim --capacity oom: %d %s", code, errs)
	}
	var doc struct {
		Events   int `json:"events"`
		Capacity struct {
			Event    int    `json:"event"`
			Capacity uint64 `json:"capacity_bytes"`
		} `json:"capacity_from_oom"`
		WhatIf []struct {
			Config   string `json:"config"`
			StillOOM bool   `json:"still_oom"`
			First    int    `json:"first_oom_event"`
		} `json:"oom_what_if"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Capacity.Capacity != 3<<30 || doc.Capacity.Event != doc.Events-1 {
		t.Errorf("capacity from the OOM: %+v, want 3 GiB at the last event %d", doc.Capacity, doc.Events-1)
	}
	if len(doc.WhatIf) != 12 || doc.WhatIf[0].Config != "recorded" || !doc.WhatIf[0].StillOOM || doc.WhatIf[0].First != doc.Capacity.Event {
		t.Errorf("what-if rows: %+v", doc.WhatIf)
	}
	// The sweep at that capacity counts the recorded OOM in its OOMs column.
	code, out, errs = runMain(t, nil, "sim", snap, "--capacity", "oom", "--sweep", "--json")
	var sw struct {
		Sweep []struct {
			Config string `json:"config"`
			OOMs   int    `json:"ooms"`
		} `json:"sweep"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sw) != nil {
		t.Fatalf("sweep at --capacity oom: %d %s", code, errs)
	}
	for _, row := range sw.Sweep {
		if row.Config == "default" && row.OOMs != 1 {
			t.Errorf("sweep at the implied capacity: default row has %d OOMs, want the recorded one", row.OOMs)
		}
	}
	code, out, _ = runMain(t, nil, "sim", snap, "--capacity", "oom")
	if code != 0 || !strings.Contains(out, "capacity it implies: 2.83 GiB reserved + 170 MiB free = 3 GiB") ||
		!strings.Contains(out, "recorded (default)") {
		t.Errorf("text: %s", out)
	}
	p := filepath.Join(corpus.Snapshots(t), "real", "cs336-silmont2000__mem_snapshot.pickle")
	if code, _, errs := runMain(t, nil, "sim", p, "--capacity", "oom"); code != 1 || !strings.Contains(errs, "records no out-of-memory") {
		t.Errorf("no OOM in the trace: exit %d, %q", code, errs)
	}
}

// TestSimBatchScale: sim --batch-scale replays a synthetic OOM mid-forward
// at a smaller batch under the recorded settings and the capacity the OOM
// implies; its scale-1 control reproduces the OOM, and the answer agrees
// with analysis' batch what-if (checked there against the program run at
// the smaller batch).
func TestSimBatchScale(t *testing.T) {
	path := filepath.Join(t.TempDir(), "oom.pickle")
	if code, _, errs := runMain(t, nil, "synth", "--model", "mlp", "--oom-unwind", "--layers", "8", "--hidden", "1024", "--batch", "1024", "--capacity", "60MiB", "-o", path); code != 0 {
		t.Fatalf("synth: %s", errs)
	}
	for _, tt := range []struct {
		scale  string
		avoids bool
	}{{"0.75", false}, {"0.5", true}} {
		code, out, errs := runMain(t, nil, "sim", path, "--batch-scale", tt.scale, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var j struct {
			Capacity *uint64 `json:"capacity_bytes"`
			Source   string  `json:"capacity_source"`
			Recorded bool    `json:"recorded_oom"`
			Control  struct {
				Avoids bool `json:"avoids_oom"`
				Fails  bool `json:"recorded_oom_fails"`
			} `json:"control"`
			Scaled struct {
				Avoids bool   `json:"avoids_oom"`
				Peak   uint64 `json:"peak_reserved_bytes"`
			} `json:"scaled"`
			Scaled2 int `json:"scaled_allocations"`
		}
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatal(err)
		}
		if j.Capacity == nil || *j.Capacity != 60<<20 || j.Source != "recorded_oom" || !j.Recorded || j.Control.Avoids || !j.Control.Fails || j.Scaled2 == 0 {
			t.Errorf("scale %s: %s", tt.scale, out)
		}
		if j.Scaled.Avoids != tt.avoids {
			t.Errorf("scale %s: avoids %v, want %v", tt.scale, j.Scaled.Avoids, tt.avoids)
		}
		code, text, _ := runMain(t, nil, "sim", path, "--batch-scale", tt.scale)
		want := "the recorded OOM still happens"
		if tt.avoids {
			want = "gets past the recorded OOM"
		}
		if code != 0 || !strings.Contains(text, want) {
			t.Errorf("scale %s text lacks %q:\n%s", tt.scale, want, text)
		}
	}
	for _, tt := range []struct {
		args []string
		msg  string
	}{
		{[]string{"sim", path, "--batch-scale", "-1"}, "--batch-scale -1: want a number above 0"},
		{[]string{"sim", path, "--batch-scale", "0.5", "--sweep"}, "does not combine with --sweep"},
		{[]string{"sim", path, "--batch-scale", "0.5", "--config", "expandable_segments:True"}, "does not combine with --sweep, --config"},
	} {
		code, _, errs := runMain(t, nil, tt.args...)
		if code != 2 || !strings.Contains(errs, tt.msg) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, errs, tt.msg)
		}
	}
}
