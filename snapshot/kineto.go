package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// A Kineto trace is the Chrome trace JSON that torch.profiler writes
// (export_chrome_trace, tensorboard_trace_handler): {"schemaVersion",
// "deviceProperties", "traceEvents": [...]}. With profile_memory=True
// every allocation and free of the CPU and CUDA allocators is an instant
// event named "[memory]" whose args hold "Device Type" (c10's DeviceType:
// 0 CPU, 1 CUDA), "Device Id", a signed "Bytes" and, from about PyTorch
// 1.10, "Addr", "Total Allocated" and "Total Reserved". The operators
// ("cpu_op", "Operator" before 1.9), record_function ranges
// ("user_annotation") and, with with_stack=True, Python calls
// ("python_function") or an operator's "Call stack" arg enclose them on
// the same thread.

// kinetoKeys are top-level keys only a Kineto (Chrome) trace has.
var kinetoKeys = []string{`"traceEvents"`, `"schemaVersion"`, `"deviceProperties"`, `"displayTimeUnit"`, `"distributedInfo"`, `"traceName"`, `"baseTimeNanoseconds"`}

// kinetoEvent is the part of a trace event the reader uses.
type kinetoEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Args json.RawMessage `json:"args"`
}

// kinetoMemArgs are a "[memory]" (or "[OutOfMemory]") event's args.
type kinetoMemArgs struct {
	DeviceType     *int64       `json:"Device Type"`
	DeviceID       *int64       `json:"Device Id"`
	Addr           *json.Number `json:"Addr"`
	Bytes          *int64       `json:"Bytes"`
	TotalAllocated *int64       `json:"Total Allocated"`
	TotalReserved  *int64       `json:"Total Reserved"`
}

// kinetoMem is one memory event, kept until the events are sorted.
type kinetoMem struct {
	ts       float64
	thread   int32
	dev      int32 // CUDA ordinal, or -1 for the CPU
	oom      bool
	hasAddr  bool
	hasTotal bool
	addr     uint64
	bytes    int64
	total    int64
	reserved int64
}

// kinetoSpan is an operator, record_function or Python call.
type kinetoSpan struct {
	start, end float64
	thread     int32
	frame      FrameID
	pyStack    int32 // index+1 into kinetoReader.pyStacks (an op's "Call stack")
	step       bool  // ProfilerStep#N: an annotation, not a frame
}

type kinetoReader struct {
	b        *profBuild
	threads  map[string]int32
	mem      []kinetoMem
	spans    []kinetoSpan
	pyStacks [][]FrameID
	pyIndex  map[string]int32
	annots   []Annotation
	other    map[int64]int // memory events of other device types
	// start is the earliest operator or annotation: when profiling
	// began, as far as the trace tells.
	start    float64
	hasStart bool
}

// decodeKineto reads a Kineto trace with memory events.
func decodeKineto(r io.Reader) (*Snapshot, error) {
	cr := &countReader{r: r}
	dec := json.NewDecoder(cr)
	dec.UseNumber()
	k := &kinetoReader{b: newProfBuild(GenKineto, false), threads: map[string]int32{}, pyIndex: map[string]int32{}, other: map[int64]int{}}
	fail := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &jsonError{off: se.Offset, msg: "Kineto trace: " + se.Error()}
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return &jsonError{off: cr.n, msg: "Kineto trace: the input ends early"}
		}
		return &jsonError{off: dec.InputOffset(), msg: "Kineto trace: " + err.Error()}
	}
	if err := expectDelim(dec, '{'); err != nil {
		return nil, fail(err)
	}
	sawEvents := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fail(err)
		}
		key, _ := t.(string)
		if key != "traceEvents" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, fail(err)
			}
			continue
		}
		sawEvents = true
		if err := expectDelim(dec, '['); err != nil {
			return nil, fail(err)
		}
		for n := 0; dec.More(); n++ {
			var ev kinetoEvent
			if err := dec.Decode(&ev); err != nil {
				return nil, fail(fmt.Errorf("traceEvents[%d]: %w", n, err))
			}
			if err := k.event(&ev); err != nil {
				return nil, fail(fmt.Errorf("traceEvents[%d] (%q): %w", n, ev.Name, err))
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, fail(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, fail(err)
	}
	if err := drain(dec, cr); err != nil {
		return nil, fail(err)
	}
	if !sawEvents {
		return nil, errors.New("Kineto trace without traceEvents")
	}
	if len(k.mem) == 0 {
		return nil, errors.New("this Kineto trace has no [memory] events: record it with torch.profiler.profile(profile_memory=True)")
	}
	s := k.build()
	s.Source.Size = cr.n
	return s, nil
}

// countReader counts the bytes read, for the offset of an early end.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		return fmt.Errorf("expected %q, found %v", string(want), t)
	}
	return nil
}

// idText is a pid or tid, which Kineto writes as a number or a string.
func idText(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func (k *kinetoReader) thread(pid, tid json.RawMessage) int32 {
	key := idText(pid) + "/" + idText(tid)
	if id, ok := k.threads[key]; ok {
		return id
	}
	id := int32(len(k.threads))
	k.threads[key] = id
	return id
}

func number(n json.Number) (float64, bool) {
	if n == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func (k *kinetoReader) event(ev *kinetoEvent) error {
	switch {
	case ev.Ph == "i" && (ev.Name == "[memory]" || ev.Name == "[OutOfMemory]"):
		return k.memory(ev)
	case ev.Ph != "X":
		return nil
	}
	switch ev.Cat {
	case "cpu_op", "Operator", "user_annotation", "python_function":
	default:
		return nil
	}
	ts, ok := number(ev.Ts)
	if !ok {
		return fmt.Errorf("ts %q is not a number", string(ev.Ts))
	}
	dur, _ := number(ev.Dur)
	if dur < 0 {
		dur = 0
	}
	sp := kinetoSpan{start: ts, end: ts + dur, thread: k.thread(ev.Pid, ev.Tid)}
	if !k.hasStart || ts < k.start {
		k.start, k.hasStart = ts, true
	}
	if strings.HasPrefix(ev.Name, "ProfilerStep#") || ev.Cat == "user_annotation" {
		k.annots = append(k.annots,
			Annotation{TimeUS: int64(math.Floor(ts)), Name: ev.Name, Stage: "START"},
			Annotation{TimeUS: int64(math.Floor(ts + dur)), Name: ev.Name, Stage: "END"})
		sp.step = strings.HasPrefix(ev.Name, "ProfilerStep#")
	}
	if ev.Cat == "python_function" {
		sp.frame = k.b.frame(parseFrame(ev.Name))
	} else {
		sp.frame = k.b.frame(Frame{Name: ev.Name})
	}
	if ev.Cat == "Operator" || ev.Cat == "cpu_op" {
		var a struct {
			CallStack json.RawMessage `json:"Call stack"`
		}
		// Other args (shapes, types) are not needed; a malformed one is
		// not this reader's concern.
		if json.Unmarshal(ev.Args, &a) == nil && len(a.CallStack) > 0 {
			var cs string
			if json.Unmarshal(a.CallStack, &cs) == nil && cs != "" {
				sp.pyStack = k.pyStack(cs)
			}
		}
	}
	k.spans = append(k.spans, sp)
	return nil
}

// pyStack interns an operator's "Call stack" ("file(line): name;...",
// innermost first).
func (k *kinetoReader) pyStack(cs string) int32 {
	if id, ok := k.pyIndex[cs]; ok {
		return id
	}
	var ids []FrameID
	for _, f := range strings.Split(cs, ";") {
		if strings.TrimSpace(f) != "" {
			ids = append(ids, k.b.frame(parseFrame(f)))
		}
	}
	k.pyStacks = append(k.pyStacks, ids)
	id := int32(len(k.pyStacks))
	k.pyIndex[cs] = id
	return id
}

func (k *kinetoReader) memory(ev *kinetoEvent) error {
	var a kinetoMemArgs
	if err := json.Unmarshal(ev.Args, &a); err != nil {
		return fmt.Errorf("args: %v", err)
	}
	ts, ok := number(ev.Ts)
	if !ok {
		return fmt.Errorf("ts %q is not a number", string(ev.Ts))
	}
	if a.DeviceType == nil || a.Bytes == nil {
		return errors.New(`a memory event without "Device Type" or "Bytes"`)
	}
	m := kinetoMem{ts: ts, thread: k.thread(ev.Pid, ev.Tid), bytes: *a.Bytes, oom: ev.Name == "[OutOfMemory]"}
	switch *a.DeviceType {
	case 0:
		m.dev = -1
	case 1:
		if a.DeviceID == nil || *a.DeviceID < 0 || *a.DeviceID > 1<<16 {
			return errors.New(`a CUDA memory event without a valid "Device Id"`)
		}
		m.dev = int32(*a.DeviceID)
	default:
		k.other[*a.DeviceType]++
		return nil
	}
	if a.Addr != nil {
		u, err := strconv.ParseUint(string(*a.Addr), 10, 64)
		if err != nil {
			i, err2 := strconv.ParseInt(string(*a.Addr), 10, 64)
			if err2 != nil {
				return fmt.Errorf("Addr %q is not an address", string(*a.Addr))
			}
			u = uint64(i)
		}
		m.addr, m.hasAddr = u, true
	}
	if a.TotalAllocated != nil {
		m.total, m.hasTotal = *a.TotalAllocated, true
		if a.TotalReserved != nil {
			m.reserved = *a.TotalReserved
		}
	}
	k.mem = append(k.mem, m)
	return nil
}

// build sorts the memory events by time (threads interleave in the file),
// finds each one's enclosing operators and pairs allocations with frees.
func (k *kinetoReader) build() *Snapshot {
	b := k.b
	hasAddr, hasTotal := true, true
	maxCUDA := int32(-1)
	hasCPU := false
	for i := range k.mem {
		m := &k.mem[i]
		hasAddr = hasAddr && (m.hasAddr || m.oom)
		hasTotal = hasTotal && m.hasTotal
		if m.dev < 0 {
			hasCPU = true
		} else {
			maxCUDA = max(maxCUDA, m.dev)
		}
	}
	b.hasAddr = hasAddr
	p := b.s.Profiler
	p.HasAddresses, p.HasTotals = hasAddr, hasTotal
	cpu := -1
	if hasCPU {
		cpu = int(maxCUDA) + 1
	}
	p.CPUDevice = cpu
	names := make([]string, int(maxCUDA)+1)
	for d := range names {
		names[d] = "cuda:" + strconv.Itoa(d)
	}
	if cpu >= 0 {
		names = append(names, "cpu")
	}
	index := func(m *kinetoMem) int {
		if m.dev < 0 {
			return cpu
		}
		return int(m.dev)
	}

	sort.SliceStable(k.mem, func(i, j int) bool { return k.mem[i].ts < k.mem[j].ts })
	stacks := k.stacks()

	ledgers := make([]*ledger, len(names))
	first := make([]int, len(names))
	for d := range first {
		first[d] = -1
	}
	p.BeforeBytes = make([]uint64, len(names))
	p.PeakReservedBytes = make([]uint64, len(names))
	base := make([]int64, len(names))
	for i := range k.mem {
		m := &k.mem[i]
		d := index(m)
		if ledgers[d] == nil {
			ledgers[d] = b.ledger(d)
		}
		t := int64(math.Floor(m.ts))
		if m.oom {
			tr := b.device(d)
			*tr = append(*tr, Event{Action: ActionOOM, Size: uint64(max(m.bytes, 0)), TimeUS: t, Stack: stacks[i], Flags: FlagHasTime | FlagHasFrames})
			continue
		}
		if first[d] < 0 {
			first[d] = i
			base[d] = m.total - m.bytes
		}
		if m.hasTotal && m.reserved > 0 {
			p.PeakReservedBytes[d] = max(p.PeakReservedBytes[d], uint64(m.reserved))
		}
		switch {
		case m.bytes > 0:
			ledgers[d].alloc(m.addr, uint64(m.bytes), t, stacks[i], 0)
		case m.bytes < 0:
			ledgers[d].free(m.addr, uint64(-m.bytes), t, stacks[i], 0)
		}
	}
	// Memory allocated before profiling began and not freed while it ran:
	// known from Total Allocated just before the first event, less what
	// the trace frees of it (those blocks are in the trace already).
	before := b.frame(Frame{Name: BeforeProfilingFrame})
	inconsistent := 0
	for d, l := range ledgers {
		if l == nil || !hasTotal || first[d] < 0 {
			continue
		}
		rest := base[d] - int64(l.unmatched)
		if rest < 0 {
			inconsistent++
			continue
		}
		if rest == 0 {
			continue
		}
		p.BeforeBytes[d] = uint64(rest)
		// Dated a microsecond before anything the trace recorded (the
		// first step's START included), so that it is live at the start
		// of every step.
		at := k.mem[first[d]].ts
		if k.hasStart && k.start < at {
			at = k.start
		}
		e := Event{Action: ActionAlloc, Addr: b.synthetic(), Size: uint64(rest), TimeUS: int64(math.Floor(at)) - 1,
			Stack: b.stack([]FrameID{before}), Flags: FlagHasTime | FlagHasFrames}
		b.prepend(d, e)
	}
	for len(b.traces) < len(names) {
		b.device(len(b.traces))
	}

	sortAnnotations(k.annots)
	for d := range names {
		if d < len(b.traces) && len(b.traces[d]) > 0 {
			for _, a := range k.annots {
				a.Device = int32(d)
				b.s.Annotations = append(b.s.Annotations, a)
			}
		}
	}
	b.s.HasAnnotationsKey = len(b.s.Annotations) > 0

	s := b.finish(names)
	p.Notes = append(p.Notes, "no allocator segments: a Kineto trace records tensors, not the cudaMalloc'd segments that hold them; the segment, state and pool views need a memory snapshot")
	if !hasAddr {
		p.Notes = append(p.Notes, "no addresses (PyTorch before 1.10): each free was paired with the latest live allocation of its size; memory totals are exact, which allocation a free ended is a guess")
	}
	if !hasTotal {
		p.Notes = append(p.Notes, "no Total Allocated/Total Reserved (PyTorch before 1.10): memory allocated before profiling began and never freed during it is not known, and the timeline starts from the blocks the trace saw")
	} else {
		p.Notes = append(p.Notes, "reserved memory is known only as Total Reserved (in info), not as segments")
	}
	if inconsistent > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d device(s): Total Allocated at the start is less than the trace frees of blocks allocated before it; the memory allocated before profiling is not shown", inconsistent))
	}
	for t, n := range k.other {
		p.Notes = append(p.Notes, fmt.Sprintf("%d memory events of device type %d (not CPU or CUDA) left out", n, t))
	}
	sort.Strings(p.Notes[len(p.Notes)-len(k.other):])
	return s
}

// stacks gives each memory event (in sorted order) the stack of the
// spans enclosing it on its thread, innermost first: operators and Python
// calls, then, from the innermost operator with a "Call stack", those
// Python frames; ProfilerStep#N is an annotation, not a frame.
func (k *kinetoReader) stacks() []StackID {
	out := make([]StackID, len(k.mem))
	byThread := map[int32][]int{}
	for i := range k.mem {
		byThread[k.mem[i].thread] = append(byThread[k.mem[i].thread], i)
	}
	spansBy := map[int32][]int32{}
	for i := range k.spans {
		spansBy[k.spans[i].thread] = append(spansBy[k.spans[i].thread], int32(i))
	}
	// Threads in order, so that stacks are numbered the same every run.
	threads := make([]int32, 0, len(byThread))
	for th := range byThread {
		threads = append(threads, th)
	}
	sort.Slice(threads, func(i, j int) bool { return threads[i] < threads[j] })
	var frames []FrameID
	for _, th := range threads {
		mems := byThread[th]
		sp := spansBy[th]
		// Outer spans first at one start: the longer encloses the shorter.
		sort.SliceStable(sp, func(a, b int) bool {
			x, y := &k.spans[sp[a]], &k.spans[sp[b]]
			if x.start != y.start {
				return x.start < y.start
			}
			return x.end > y.end
		})
		var open []int32
		next := 0
		for _, mi := range mems {
			t := k.mem[mi].ts
			for next < len(sp) && k.spans[sp[next]].start <= t {
				s := &k.spans[sp[next]]
				for len(open) > 0 && k.spans[open[len(open)-1]].end < s.start {
					open = open[:len(open)-1]
				}
				open = append(open, sp[next])
				next++
			}
			for len(open) > 0 && k.spans[open[len(open)-1]].end < t {
				open = open[:len(open)-1]
			}
			frames = frames[:0]
			for j := len(open) - 1; j >= 0; j-- {
				s := &k.spans[open[j]]
				if s.end < t {
					continue // not nested in its parent: ended already
				}
				if s.step {
					continue
				}
				frames = append(frames, s.frame)
				if s.pyStack > 0 {
					frames = append(frames, k.pyStacks[s.pyStack-1]...)
					break
				}
			}
			out[mi] = k.b.stack(frames)
		}
	}
	return out
}

// isKinetoHead says whether the start of a JSON object is a Kineto trace's:
// one of the keys only a Chrome trace has comes before any key a snapshot
// has.
func isKinetoHead(head []byte) bool {
	first := -1
	for _, k := range kinetoKeys {
		if i := bytes.Index(head, []byte(k)); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		return false
	}
	for _, k := range []string{`"segments"`, `"device_traces"`} {
		if i := bytes.Index(head, []byte(k)); i >= 0 && i < first {
			return false
		}
	}
	return true
}

// drain reads what follows the decoded value: only white space may, and
// reading to the end surfaces a compressed input's truncation, which the
// JSON decoder, done at the closing bracket, never reached.
func drain(dec *json.Decoder, r io.Reader) error {
	rest, err := io.ReadAll(io.MultiReader(dec.Buffered(), r))
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return errors.New("data after the end of the JSON value")
	}
	return nil
}
