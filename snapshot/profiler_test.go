package snapshot

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"strings"
	"testing"
)

// liveBytes replays a device's trace the simple way: allocs add, a
// free_completed of a known address removes it, one of an unknown address
// was live from the start. It returns the bytes live at the start and
// the largest total.
func liveBytes(t *testing.T, tr []Event) (start, peak uint64) {
	t.Helper()
	live := map[uint64]uint64{}
	seen := map[uint64]bool{}
	for _, e := range tr {
		if e.Action == ActionFreeCompleted && !seen[e.Addr] {
			start += e.Size
		}
		if e.Action == ActionAlloc || e.Action == ActionFreeCompleted {
			seen[e.Addr] = true
		}
	}
	cur := start
	peak = cur
	for _, e := range tr {
		switch e.Action {
		case ActionAlloc:
			if _, ok := live[e.Addr]; ok {
				t.Fatalf("address %#x allocated twice", e.Addr)
			}
			live[e.Addr] = e.Size
			cur += e.Size
		case ActionFreeCompleted:
			sz, ok := live[e.Addr]
			if ok {
				if sz != e.Size {
					t.Fatalf("free of %#x: %d bytes, allocated %d", e.Addr, e.Size, sz)
				}
				delete(live, e.Addr)
			}
			cur -= e.Size
		}
		peak = max(peak, cur)
	}
	return start, peak
}

func frameNames(s *Snapshot, st StackID) []string {
	var out []string
	for _, f := range s.StackFrames(st) {
		fr := s.Frames[f]
		if fr.Filename != "" {
			out = append(out, fmt.Sprintf("%s:%d:%s", fr.Filename, fr.Line, fr.Name))
		} else {
			out = append(out, fr.Name)
		}
	}
	return out
}

func mustDecode(t *testing.T, text string) *Snapshot {
	t.Helper()
	s, err := DecodeBytes([]byte(text), "test.json", nil)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return s
}

func TestKinetoWithAddresses(t *testing.T) {
	// Thread 7 runs a ProfilerStep with a Python call enclosing an op; a
	// second thread allocates on the CPU. Total Allocated says 1000 bytes
	// were live before the first event; the trace frees 100 of them.
	trace := `{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [
	{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 7, "ts": 100, "dur": 100},
	{"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 1, "tid": 7, "ts": 105, "dur": 50},
	{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 7, "ts": 110, "dur": 5, "args": {"External id": 1}},
	{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 111,
	 "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 512, "Total Allocated": 1512, "Total Reserved": 2097152}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 160,
	 "args": {"Device Type": 1, "Device Id": 0, "Addr": 9999, "Bytes": -100, "Total Allocated": 1412, "Total Reserved": 2097152}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 150,
	 "args": {"Device Type": 1, "Device Id": 0, "Addr": 8192, "Bytes": 1024, "Total Allocated": 2536, "Total Reserved": 4194304}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 7, "ts": 170,
	 "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": -512, "Total Allocated": 900, "Total Reserved": 4194304}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": "8", "ts": 120,
	 "args": {"Device Type": 0, "Device Id": -1, "Addr": 77, "Bytes": 64, "Total Allocated": 64, "Total Reserved": 0}}
	]}`
	s := mustDecode(t, trace)
	if s.Source.Generation != GenKineto || s.Profiler == nil || !s.Profiler.HasAddresses || !s.Profiler.HasTotals {
		t.Fatalf("source %+v profiler %+v", s.Source, s.Profiler)
	}
	if got := s.DeviceName(0) + " " + s.DeviceName(1); got != "cuda:0 cpu" {
		t.Errorf("device names %q", got)
	}
	// Sorted by time: +512 (1512), +1024 (2536), -100 (2436), -512 (1924).
	// Before profiling: 1512-512 = 1000, of which the trace frees 100.
	if got := s.Profiler.BeforeBytes[0]; got != 900 {
		t.Errorf("before profiling %d, want 900", got)
	}
	if got := s.Profiler.PeakReservedBytes[0]; got != 4194304 {
		t.Errorf("peak reserved %d", got)
	}
	start, peak := liveBytes(t, s.Traces[0].Events)
	if start != 100 || peak != 2536 {
		t.Errorf("start %d peak %d, want 100 and 2536 (the largest Total Allocated)", start, peak)
	}
	tr := s.Traces[0].Events
	if tr[0].Action != ActionAlloc || frameNames(s, tr[0].Stack)[0] != BeforeProfilingFrame || tr[0].TimeUS >= 100 {
		t.Errorf("first event %+v %v: want the memory from before profiling, dated before the step", tr[0], frameNames(s, tr[0].Stack))
	}
	if got := strings.Join(frameNames(s, tr[1].Stack), " < "); got != "aten::empty < train.py:12:step" {
		t.Errorf("stack of the first allocation %q", got)
	}
	if _, peak := liveBytes(t, s.Traces[1].Events); peak != 64 {
		t.Errorf("cpu peak %d", peak)
	}
	spans := s.AnnotationSpans(0, "ProfilerStep#")
	if len(spans) != 1 || spans[0] != (AnnotationSpan{"ProfilerStep#3", 100, 200}) {
		t.Errorf("steps %+v", spans)
	}
}

func TestKinetoWithoutAddresses(t *testing.T) {
	// PyTorch 1.8-1.9: no Addr, no totals, ops in "Operator" with a
	// "Call stack" (innermost first). Frees pair with the latest live
	// allocation of their size; a free no allocation explains was live
	// from the start.
	trace := `{"schemaVersion": 1, "traceEvents": [
	{"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 5, "tid": "5", "ts": 10, "dur": 100,
	 "args": {"Call stack": "model.py(40): forward;train.py(9): <module>"}},
	{"ph": "X", "cat": "Operator", "name": "aten::empty", "pid": 5, "tid": "5", "ts": 20, "dur": 2},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 5, "ts": 21, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 256}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 5, "ts": 30, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 256}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 5, "ts": 40, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -256}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 5, "ts": 50, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -128}},
	{"ph": "i", "s": "t", "name": "[memory]", "pid": 5, "tid": 5, "ts": 60, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1024}}
	]}`
	s := mustDecode(t, trace)
	p := s.Profiler
	if p.HasAddresses || p.HasTotals || p.CPUDevice != -1 {
		t.Fatalf("profiler %+v", p)
	}
	tr := s.Traces[0].Events
	start, peak := liveBytes(t, tr)
	// 128 live from the start; then 128+256+256 = 640, down to 384, then
	// 256, then 1280.
	if start != 128 || peak != 1280 {
		t.Errorf("start %d peak %d, want 128 and 1280", start, peak)
	}
	// The free at 40 ends the allocation of 30 (the latest).
	var second, freed uint64
	for _, e := range tr {
		if e.Action == ActionAlloc && e.TimeUS == 30 {
			second = e.Addr
		}
		if e.Action == ActionFreeCompleted && e.TimeUS == 40 {
			freed = e.Addr
		}
	}
	if second == 0 || second != freed {
		t.Errorf("the free at 40 ended %#x, want the allocation at 30 (%#x)", freed, second)
	}
	if got := strings.Join(frameNames(s, tr[0].Stack), " < "); got != "aten::empty < aten::conv2d < model.py:40:forward < train.py:9:<module>" {
		t.Errorf("stack %q", got)
	}
	if len(p.Notes) == 0 || !strings.Contains(strings.Join(p.Notes, " "), "no addresses") {
		t.Errorf("notes %q", p.Notes)
	}
}

func TestTimelineRaw(t *testing.T) {
	// Actions: 1 preexisting, 2 create, 3 increment_version, 4 destroy.
	// Categories: 0 parameter, 1 optimizer_state, 2 input, 3 temporary,
	// 4 activation, 5 gradient, 6 autograd_detail, 7 unknown.
	raw := `[[-1, 1, 1000, 0],
	[5000, 2, 300, 4],
	[5000, 2, 64, 3], [5000, 4, -64, 3],
	[6000, 3, -1000, 0], [6000, 3, 1000, 0],
	[7000, 3, -300, 4], [7000, 3, 300, 5],
	[8000, 4, -300, 5], [8000, 2, 200, 1]]`
	s := mustDecode(t, raw)
	if s.Source.Generation != GenTimelineRaw || s.DeviceName(0) != "exported device" {
		t.Fatalf("generation %q, device %q", s.Source.Generation, s.DeviceName(0))
	}
	p := s.Profiler
	if p.Transient != 1 || p.Preexisting[0] != 1 {
		t.Errorf("transient %d preexisting %v", p.Transient, p.Preexisting)
	}
	tr := s.Traces[0].Events
	// Per timestamp: 1000 (-1, at 5 µs), 1300 (5000 ns), 1300, 1300,
	// 1200 (8000 ns: the free before the allocation).
	_, peak := liveBytes(t, tr)
	if peak != 1300 {
		t.Errorf("peak %d, want 1300", peak)
	}
	var got []string
	for i := range tr {
		e := &tr[i]
		if e.Action == ActionFreeRequested {
			continue
		}
		cat, _ := s.ProfilerCategory(&s.Traces[0], i)
		got = append(got, fmt.Sprintf("%d %s %d %s", e.TimeUS, e.Action, e.Size, cat))
	}
	want := []string{
		"5 alloc 1000 parameter", // preexisting, at the first time
		"5 alloc 300 activation",
		// 6000: a version bump within one category changes nothing.
		"7 free_completed 300 activation", "7 alloc 300 gradient",
		"8 free_completed 300 gradient", "8 alloc 200 optimizer_state",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := strings.Join(frameNames(s, tr[0].Stack), ""); got != "[parameter]" {
		t.Errorf("frame %q", got)
	}
}

func TestTimelineJSON(t *testing.T) {
	// [times_us, sizes]: sizes[k][0] is unused, then one per category.
	js := `[[5, 6, 8], [[0, 1000, 0, 0, 0, 300, 0, 0, 0], [0, 1000, 0, 0, 0, 100, 250, 0, 0], [0, 900, 0, 0, 0, 0, 250, 0, 0]]]`
	s := mustDecode(t, js)
	if s.Source.Generation != GenTimeline {
		t.Fatalf("generation %q", s.Source.Generation)
	}
	tr := s.Traces[0].Events
	_, peak := liveBytes(t, tr)
	if peak != 1350 {
		t.Errorf("peak %d, want 1350", peak)
	}
	// Totals after each timestamp are the file's.
	cur := int64(0)
	totals := map[int64]int64{}
	for _, e := range tr {
		switch e.Action {
		case ActionAlloc:
			cur += int64(e.Size)
		case ActionFreeCompleted:
			cur -= int64(e.Size)
		}
		totals[e.TimeUS] = cur
	}
	if totals[5] != 1300 || totals[6] != 1350 || totals[8] != 1150 {
		t.Errorf("totals %v", totals)
	}
}

func TestProfilerInputErrors(t *testing.T) {
	gz := func(s string) string {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.String()
	}
	full := gz(`{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 8}}]}`)
	for _, c := range []struct{ name, in, want string }{
		{"no memory events", `{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]}`, "profile_memory=True"},
		{"no traceEvents", `{"schemaVersion": 1, "deviceProperties": []}`, "without traceEvents"},
		{"truncated", `{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 1, "Dev`, "Kineto trace"},
		{"truncated gzip", full[:len(full)-12], "truncated"},
		{"bad bytes", `{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 1, "Device Id": 0, "Bytes": "x"}}]}`, "traceEvents[0]"},
		{"bad device", `{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 1, "Device Id": -4, "Bytes": 8}}]}`, "Device Id"},
		{"bad ts", `{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": "soon", "args": {"Device Type": 1, "Device Id": 0, "Bytes": 8}}]}`, `traceEvents[0]: json: invalid number literal`},
		{"bad op ts", `{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\nb", "ts": "1e999"}]}`, `("a\nb"): ts "1e999" is not a number`},
		{"raw action", `[[1, 9, 5, 0]]`, "action 9"},
		{"raw category", `[[1, 2, 5, 8]]`, "category 8"},
		{"raw short", `[[1, 2, 5]]`, "3 values"},
		{"raw float", `[[1, 2, 5.5, 0]]`, "not an integer"},
		{"raw truncated", `[[1, 2, 5, 0], [2, 4, -`, "memory timeline"},
		{"json rows", `[[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]`, "2 times but 1 rows"},
		{"json width", `[[1], [[0, 1, 2]]]`, "3 values"},
		{"json negative", `[[1], [[0, -1, 2, 3, 4, 5, 6, 7, 8]]]`, "bytes of parameter"},
		{"json time order", `[[2, 1], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 5, 6, 7, 8]]]`, "before the one before"},
		{"empty json form", `[[], []]`, "empty memory timeline"},
		{"html", "<html>\n<head><meta charset=\"utf-8\" /><title>GPU Memory Timeline HTML</title></head>", "export_memory_timeline HTML"},
	} {
		_, err := DecodeBytes([]byte(c.in), "in", nil)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line with %q", c.name, err, c.want)
		}
	}
}

// profilerSeeds are small inputs of every profiler form for the fuzzers.
var profilerSeeds = []string{
	`{"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 1, "dur": 5, "args": {"Call stack": "a.py(1): f"}},
	{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Device Type": 1, "Device Id": 0, "Addr": 512, "Bytes": 8, "Total Allocated": 8, "Total Reserved": 64}},
	{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3, "args": {"Device Type": 0, "Device Id": -1, "Bytes": 8}},
	{"ph": "i", "name": "[OutOfMemory]", "pid": 1, "tid": 1, "ts": 4, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 1024, "Total Allocated": 8, "Total Reserved": 64}},
	{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5, "args": {"Device Type": 1, "Device Id": 0, "Addr": 512, "Bytes": -8, "Total Allocated": 0, "Total Reserved": 64}}]}`,
	`[[-1, 1, 8, 0], [10, 2, 4, 4], [10, 3, -8, 0], [10, 3, 8, 5], [20, 4, -4, 4]]`,
	`[[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8], [0, 0, 2, 3, 4, 5, 6, 7, 9]]]`,
}

// fuzzProfiler checks that any input decodes or fails with one line, and
// that a decoded model's traces are consistent.
func fuzzProfiler(t *testing.T, b []byte) {
	s, err := DecodeBytes(b, "fuzz", &Options{MaxBytes: 1 << 20})
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
		return
	}
	if s.Profiler == nil {
		return
	}
	for d := range s.Traces {
		s.DeviceName(d)
		live := map[uint64]uint64{}
		for _, e := range s.Traces[d].Events {
			switch e.Action {
			case ActionAlloc:
				if _, ok := live[e.Addr]; ok {
					t.Fatalf("device %d: %#x allocated twice", d, e.Addr)
				}
				live[e.Addr] = e.Size
			case ActionFreeCompleted:
				if sz, ok := live[e.Addr]; ok && sz != e.Size {
					t.Fatalf("device %d: free of %#x with %d bytes, allocated %d", d, e.Addr, e.Size, sz)
				}
				delete(live, e.Addr)
			}
			if e.Stack < 0 || int(e.Stack) >= s.Stacks.Len() {
				t.Fatalf("stack %d of %d", e.Stack, s.Stacks.Len())
			}
		}
	}
}

func FuzzKineto(f *testing.F) {
	f.Add([]byte(profilerSeeds[0]))
	f.Add([]byte(`{"traceEvents": [{"ph": "i", "name": "[memory]", "ts": 1.5, "args": {"Device Type": 1, "Device Id": 3, "Bytes": -8}}]}`))
	f.Fuzz(fuzzProfiler)
}

func FuzzTimeline(f *testing.F) {
	f.Add([]byte(profilerSeeds[1]))
	f.Add([]byte(profilerSeeds[2]))
	f.Fuzz(fuzzProfiler)
}

func TestKinetoDefaultDeviceIsTheGPU(t *testing.T) {
	// Host memory has more events, but a one-device view shows the GPU.
	s := mustDecode(t, `{"traceEvents": [
	{"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 0, "Device Id": -1, "Bytes": 8}},
	{"ph": "i", "name": "[memory]", "ts": 2, "args": {"Device Type": 0, "Device Id": -1, "Bytes": 8}},
	{"ph": "i", "name": "[memory]", "ts": 3, "args": {"Device Type": 0, "Device Id": -1, "Bytes": -8}},
	{"ph": "i", "name": "[memory]", "ts": 4, "args": {"Device Type": 1, "Device Id": 2, "Bytes": 512}}]}`)
	if d := s.DefaultDevice(); s.DeviceName(d) != "cuda:2" || s.DeviceName(s.Profiler.CPUDevice) != "cpu" {
		t.Errorf("default device %d (%s), cpu is %d", d, s.DeviceName(d), s.Profiler.CPUDevice)
	}
}
