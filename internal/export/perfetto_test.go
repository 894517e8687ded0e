package export

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/pickle"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// traceFile is the part of the Chrome trace format the tests read.
type traceFile struct {
	TraceEvents []struct {
		Ph   string `json:"ph"`
		Name string `json:"name"`
		Pid  int    `json:"pid"`
		Tid  int    `json:"tid"`
		Ts   int64  `json:"ts"`
		Dur  int64  `json:"dur"`
		Args struct {
			Bytes *uint64 `json:"bytes"`
		} `json:"args"`
	} `json:"traceEvents"`
}

func perfetto(t *testing.T, s *snapshot.Snapshot, o PerfettoOptions) *traceFile {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePerfetto(&buf, s, o); err != nil {
		t.Fatal(err)
	}
	var tf traceFile
	if err := json.Unmarshal(buf.Bytes(), &tf); err != nil {
		t.Fatalf("%s: perfetto JSON does not parse: %v", s.Source.Name, err)
	}
	return &tf
}

// counterMax returns, per device (pid) and counter name, the largest value.
func counterMax(t *testing.T, tf *traceFile) map[int]map[string]uint64 {
	out := map[int]map[string]uint64{}
	for _, e := range tf.TraceEvents {
		if e.Ph != "C" {
			continue
		}
		if e.Args.Bytes == nil {
			t.Fatalf("counter %q has no bytes", e.Name)
		}
		v := *e.Args.Bytes
		if out[e.Pid] == nil {
			out[e.Pid] = map[string]uint64{}
		}
		out[e.Pid][e.Name] = max(out[e.Pid][e.Name], v)
	}
	return out
}

// TestPerfettoPeaksCorpus: on every real snapshot the reserved counter's
// maximum is info's "peak reserved" and the requested counter's maximum
// is info's "peak active" (both memory_viz's), per device.
func TestPerfettoPeaksCorpus(t *testing.T) {
	for _, path := range corpus.Files(t) {
		s := load(t, path)
		tf := perfetto(t, s, PerfettoOptions{Device: -1})
		mx := counterMax(t, tf)
		for _, d := range s.Devices() {
			active, segs := replay.Peaks(s, d)
			got := mx[devicePID(d)]
			if got[CounterReserved] != segs {
				t.Errorf("%s device %d: reserved counter max %d, info peak reserved %d", filepath.Base(path), d, got[CounterReserved], segs)
			}
			if got[CounterRequested] != active && !hasPendingFree(s, d) {
				t.Errorf("%s device %d: requested counter max %d, info peak active %d", filepath.Base(path), d, got[CounterRequested], active)
			}
		}
	}
}

// hasPendingFree reports whether the dump has active_pending_free blocks
// on device d: memory_viz leaves them out of the Active Memory Timeline
// while the requested counter, like torch.cuda.memory_stats, counts them
// until their free completes.
func hasPendingFree(s *snapshot.Snapshot, d int) bool {
	for i := range s.Segments {
		if int(s.Segments[i].Device) != d {
			continue
		}
		for _, b := range s.SegmentBlocks(i) {
			if b.State == snapshot.BlockActivePendingFree {
				return true
			}
		}
	}
	return false
}

func TestPerfettoTracks(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	tf := perfetto(t, s, PerfettoOptions{Device: 0, MaxLanes: 1000})
	counters := map[string]int{}
	slices, instants := 0, 0
	small := uint64(0)
	lanes := map[int][][2]int64{}
	for _, e := range tf.TraceEvents {
		switch e.Ph {
		case "C":
			counters[e.Name]++
		case "X":
			slices++
			if b := e.Args.Bytes; b == nil || *b < 1<<20 {
				small++
			}
			lanes[e.Tid] = append(lanes[e.Tid], [2]int64{e.Ts, e.Ts + e.Dur})
		case "i":
			instants++
		}
	}
	for _, name := range []string{CounterAllocated, CounterReserved, CounterActive, CounterRequested, CounterUndrawn} {
		if counters[name] < 2 {
			t.Errorf("counter %q has %d samples", name, counters[name])
		}
	}
	allocs := 0
	for _, e := range s.Traces[0].Events {
		if e.Action == snapshot.ActionAlloc && e.Size >= 1<<20 {
			allocs++
		}
	}
	if slices != allocs || small != 0 {
		t.Errorf("%d slices (%d under 1 MiB), want one per alloc of >= 1 MiB: %d", slices, small, allocs)
	}
	// Slices on one lane never overlap (Chrome's JSON importer needs that).
	for tid, l := range lanes {
		for i := 1; i < len(l); i++ {
			if l[i][0] < l[i-1][1] {
				t.Fatalf("lane %d: slice at %d starts before the previous ends (%d)", tid, l[i][0], l[i-1][1])
			}
		}
	}
	// Category counters end at what is live at the dump, per category.
	dv := analysis.NewDevice(s, 0)
	m, err := dv.Resolve("end")
	if err != nil {
		t.Fatal(err)
	}
	want := dv.CategoriesAt(m)
	last := map[string]uint64{}
	for _, e := range tf.TraceEvents {
		if e.Ph == "C" && e.Args.Bytes != nil {
			last[e.Name] = *e.Args.Bytes
		}
	}
	for _, c := range analysis.Categories() {
		if last[CategoryCounter(c)] != want[c] {
			t.Errorf("counter %q ends at %d, %d live at the dump", CategoryCounter(c), last[CategoryCounter(c)], want[c])
		}
	}
	if want[analysis.Parameter] == 0 || want[analysis.OptimizerState] == 0 {
		t.Errorf("demo's categories at the dump: %v", want)
	}
	// The demo has 3 ProfilerStep annotations, START and END each.
	if instants < 6 {
		t.Errorf("%d instant events, want the demo's annotations", instants)
	}
}

func TestPerfettoNoTime(t *testing.T) {
	// D2 (PyTorch 2.1): no time_us; the clock is the event index.
	s := load(t, realFile("select_n__snapshot__5a601013.pickle"))
	tf := perfetto(t, s, PerfettoOptions{Device: -1})
	last := int64(-1)
	for _, e := range tf.TraceEvents {
		if e.Ph == "C" {
			last = max(last, e.Ts)
		}
	}
	if want := int64(len(s.Traces[0].Events) - 1); last != want {
		t.Errorf("last counter at ts %d, want event index %d", last, want)
	}
}

func TestJSONQuote(t *testing.T) {
	for _, in := range []string{"", "plain", `q"b\`, "tab\tnl\n\x01", "héllo", "bad\xffutf8"} {
		got := pickle.AppendJSONString(nil, in)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q -> %s: %v", in, got, err)
		}
		want := strings.ToValidUTF8(in, "\ufffd")
		if back != want {
			t.Errorf("%q -> %s -> %q", in, got, back)
		}
	}
}

// TestPerfettoBounded: with caps on slices, lanes and counter samples the
// output stays small, peaks stay exact, and what is not drawn as a slice
// is in the "without a slice" counter.
func TestPerfettoBounded(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	full := perfetto(t, s, PerfettoOptions{Device: 0, MaxLanes: 1000})
	small := perfetto(t, s, PerfettoOptions{Device: 0, MaxSlices: 50, MaxLanes: 8, MaxCounterEvents: 200})
	count := func(tf *traceFile, ph string) (n int) {
		for _, e := range tf.TraceEvents {
			if e.Ph == ph {
				n++
			}
		}
		return n
	}
	if n := count(small, "X"); n == 0 || n > 50 {
		t.Errorf("%d slices with MaxSlices 50", n)
	}
	if a, b := count(full, "C"), count(small, "C"); b*4 > a {
		t.Errorf("reduced counters: %d samples, all: %d", b, a)
	}
	mf, ms := counterMax(t, full), counterMax(t, small)
	for _, name := range []string{CounterAllocated, CounterReserved, CounterActive, CounterRequested} {
		if mf[0][name] != ms[0][name] {
			t.Errorf("%s: peak %d reduced, %d in full", name, ms[0][name], mf[0][name])
		}
	}
	// Drawn slices live at the end plus the undrawn counter's last value
	// make up the requested bytes at the end.
	for _, tf := range []*traceFile{full, small} {
		last := map[string]uint64{}
		var drawn uint64
		for _, e := range tf.TraceEvents {
			if e.Ph == "C" {
				last[e.Name] = *e.Args.Bytes
			}
		}
		end := uint64(0)
		for _, e := range tf.TraceEvents {
			if e.Ph == "X" {
				end = max(end, uint64(e.Ts+e.Dur))
			}
		}
		for _, e := range tf.TraceEvents {
			if e.Ph == "X" && uint64(e.Ts+e.Dur) == end {
				drawn += *e.Args.Bytes
			}
		}
		if drawn+last[CounterUndrawn] != last[CounterRequested] {
			t.Errorf("at the end: %d in slices + %d without a slice != %d requested", drawn, last[CounterUndrawn], last[CounterRequested])
		}
	}
}
