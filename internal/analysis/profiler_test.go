package analysis

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// profilerExports lists ../shared/snapshots/profiler_exports: real
// torch.profiler files. Absent, the test skips (fails under CI).
func profilerExports(t *testing.T) []string {
	t.Helper()
	dir := corpus.Path("snapshots", "profiler_exports")
	files, _ := filepath.Glob(filepath.Join(dir, "*.gz"))
	if len(files) == 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no torch.profiler exports in %s", dir)
		}
		t.Skipf("no torch.profiler exports in %s (../shared beside the repository)", dir)
	}
	sort.Strings(files)
	return files
}

func readGz(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kinetoPeaks is the independent computation for a Kineto trace: per
// device ("cuda:N", "cpu"), the [memory] events in time order (stable:
// threads interleave in the file), the largest running sum of Bytes (from
// 0 before the first event), and where the events carry Total Allocated,
// its largest value and the value before the first event.
type kinetoPeak struct {
	maxSum, minSum   int64
	hasTotal         bool
	maxTotal, before int64
}

func kinetoPeaks(t *testing.T, b []byte) map[string]*kinetoPeak {
	var doc struct {
		TraceEvents []struct {
			Name string          `json:"name"`
			Ts   float64         `json:"ts"`
			Args json.RawMessage `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	type mem struct {
		ts           float64
		dev          string
		bytes, total int64
		hasTotal     bool
	}
	var ms []mem
	for _, e := range doc.TraceEvents {
		if e.Name != "[memory]" {
			continue
		}
		var args map[string]json.Number
		if err := json.Unmarshal(e.Args, &args); err != nil {
			t.Fatal(err)
		}
		typ, _ := args["Device Type"].Int64()
		id, _ := args["Device Id"].Int64()
		m := mem{ts: e.Ts, dev: "cpu"}
		if typ == 1 {
			m.dev = fmt.Sprintf("cuda:%d", id)
		}
		m.bytes, _ = args["Bytes"].Int64()
		if v, ok := args["Total Allocated"]; ok {
			m.total, _ = v.Int64()
			m.hasTotal = true
		}
		ms = append(ms, m)
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].ts < ms[j].ts })
	out := map[string]*kinetoPeak{}
	sums := map[string]int64{}
	for _, m := range ms {
		p := out[m.dev]
		if p == nil {
			p = &kinetoPeak{hasTotal: m.hasTotal, before: m.total - m.bytes}
			p.maxTotal = p.before
			out[m.dev] = p
		}
		sums[m.dev] += m.bytes
		p.maxSum = max(p.maxSum, sums[m.dev])
		p.minSum = min(p.minSum, sums[m.dev])
		if m.hasTotal {
			p.maxTotal = max(p.maxTotal, m.total)
		}
	}
	return out
}

// timelineCategoryOrder is export_memory_timeline's category numbering
// (torch/profiler/_memory_profiler.py, _CATEGORY_TO_COLORS), written here
// apart from the reader's copy.
var timelineCategoryOrder = []string{"parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"}

// rawPeak is the independent computation for a raw timeline: the running
// sum after each timestamp's events (what PyTorch's own plot shows), its
// largest value, and the bytes per category then (at the first timestamp
// reaching it).
func rawPeak(t *testing.T, b []byte) (peak int64, cats map[string]int64) {
	var ev [][4]int64
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	var per [8]int64
	sum := int64(0)
	cats = map[string]int64{}
	for i := 0; i < len(ev); {
		j := i
		for j < len(ev) && ev[j][0] == ev[i][0] {
			sum += ev[j][2]
			per[ev[j][3]] += ev[j][2]
			j++
		}
		if sum > peak {
			peak = sum
			for c, n := range per {
				cats[timelineCategoryOrder[c]] = n
			}
		}
		i = j
	}
	return peak, cats
}

// TestProfilerExportPeaks opens every real torch.profiler file and checks
// each device's Active Memory Timeline peak (what info, peak and the
// viewer show) against the independent computation, and on raw timelines
// the category split at the peak against the profiler's own.
func TestProfilerExportPeaks(t *testing.T) {
	for _, path := range profilerExports(t) {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			s, err := snapshot.Open(path, nil)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if s.Profiler == nil {
				t.Fatalf("read as %q, not as a torch.profiler output", s.Source.Generation)
			}
			b := readGz(t, path)
			switch s.Source.Generation {
			case snapshot.GenKineto:
				want := kinetoPeaks(t, b)
				if len(s.Devices()) != len(want) {
					t.Errorf("devices %v, want %d", s.Devices(), len(want))
				}
				for _, d := range s.Devices() {
					name := s.DeviceName(d)
					w := want[name]
					if w == nil {
						t.Errorf("device %d (%s) is not in the file", d, name)
						continue
					}
					got := NewDevice(s, d).Active.PeakBytes
					// Memory from before profiling: Total Allocated before
					// the first event; without it, what the running sum
					// needs to stay >= 0.
					start := -w.minSum
					if w.hasTotal {
						start = w.before
						if uint64(w.maxTotal) != got {
							t.Errorf("%s: peak %d, largest Total Allocated %d", name, got, w.maxTotal)
						}
					}
					if uint64(start+w.maxSum) != got {
						t.Errorf("%s: peak %d, want %d + running sum of Bytes' largest %d = %d", name, got, start, w.maxSum, start+w.maxSum)
					}
					t.Logf("%s: peak %d (running sum %d, from %d before)", name, got, w.maxSum, start)
				}
			case snapshot.GenTimelineRaw:
				peak, cats := rawPeak(t, b)
				d := NewDevice(s, 0)
				if got := d.Active.PeakBytes; got != uint64(peak) {
					t.Errorf("peak %d, per-timestamp running sum's largest %d", got, peak)
				}
				m, err := d.Resolve("peak")
				if err != nil {
					t.Fatal(err)
				}
				live := d.LiveAnswer(m, LiveOptions{})
				if live.CategoryReason != ProfilerReason {
					t.Errorf("category_reason %q", live.CategoryReason)
				}
				for _, c := range timelineCategoryOrder {
					if live.Categories[c] != uint64(cats[c]) {
						t.Errorf("%s at the peak: %d, the profiler's %d", c, live.Categories[c], cats[c])
					}
				}
				t.Logf("peak %d: %v", peak, cats)
			default:
				t.Fatalf("generation %q", s.Source.Generation)
			}
		})
	}
}

// TestProfilerTimelineJSONForm writes the JSON form PyTorch's
// export_memory_timeline(path.json) would write for each real raw file
// (_coalesce_timeline: µs times, -1 as the earliest, totals per category
// after each timestamp) and checks that gpumem reads the same peak.
func TestProfilerTimelineJSONForm(t *testing.T) {
	n := 0
	for _, path := range profilerExports(t) {
		if !strings.Contains(filepath.Base(path), "raw") {
			continue
		}
		n++
		var ev [][4]int64
		if err := json.Unmarshal(readGz(t, path), &ev); err != nil {
			t.Fatal(err)
		}
		tMin := int64(-1)
		for _, e := range ev {
			if e[0] >= 0 && (tMin < 0 || e[0] < tMin) {
				tMin = e[0]
			}
		}
		var times []int64
		var sizes [][9]int64
		var cur [9]int64
		peak := int64(0)
		for i, e := range ev {
			us := e[0] / 1000
			if e[0] < 0 {
				us = tMin / 1000
			}
			if i == 0 || e[0] != ev[i-1][0] {
				times = append(times, us)
				sizes = append(sizes, cur)
			}
			cur[e[3]+1] += e[2]
			sizes[len(sizes)-1] = cur
			sum := int64(0)
			for _, v := range cur {
				sum += v
			}
			if i == len(ev)-1 || ev[i+1][0] != e[0] {
				peak = max(peak, sum)
			}
		}
		js, _ := json.Marshal([]any{times, sizes})
		s, err := snapshot.DecodeBytes(js, "form.json", nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if s.Source.Generation != snapshot.GenTimeline {
			t.Fatalf("%s: read as %q", path, s.Source.Generation)
		}
		if got := NewDevice(s, 0).Active.PeakBytes; got != uint64(peak) {
			t.Errorf("%s: JSON form's peak %d, want %d", filepath.Base(path), got, peak)
		}
	}
	if n == 0 {
		t.Fatal("no raw timelines among the exports")
	}
}
