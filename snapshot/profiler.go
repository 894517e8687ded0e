package snapshot

import (
	"bufio"
	"bytes"
	"io"
	"sort"
	"strconv"
	"strings"
)

// The torch.profiler outputs gpumem reads, as Source.Generation. They are
// not snapshots: readers in kineto.go and memtimeline.go turn them into
// the same model, and Snapshot.Profiler says what they lack.
const (
	// GenKineto is a Kineto trace (*.pt.trace.json[.gz]) written by
	// torch.profiler with profile_memory=True: "[memory]" instant events.
	GenKineto Generation = "kineto"
	// GenTimelineRaw is prof.export_memory_timeline(path.raw.json.gz):
	// [time_ns, action, signed bytes, category] per tensor event.
	GenTimelineRaw Generation = "memory_timeline_raw"
	// GenTimeline is prof.export_memory_timeline(path.json): [times_us,
	// sizes per category] after every timestamp.
	GenTimeline Generation = "memory_timeline"
)

// Profiler describes a model read from a torch.profiler output: what its
// devices are called and what the format does not record. It is nil for a
// memory snapshot.
type Profiler struct {
	// DeviceNames names each trace index: "cuda:N", "cpu", or, for a
	// memory timeline export (which does not record its device),
	// "exported device".
	DeviceNames []string
	// CPUDevice is the trace index of host memory (-1: none).
	CPUDevice int
	// HasAddresses says the events carry addresses (Kineto's Addr, from
	// PyTorch 1.10 or so); without them allocations were paired with a
	// free of the same size (and category), the latest first.
	HasAddresses bool
	// HasTotals says the events carry Total Allocated and Total Reserved.
	HasTotals bool
	// BeforeBytes[d] is the memory allocated on device d before profiling
	// began and not freed while it ran (Total Allocated's start less the
	// pre-profiling blocks freed during it): the first allocation of the
	// trace, with the frame BeforeProfilingFrame. 0 when not known.
	BeforeBytes []uint64
	// PeakReservedBytes[d] is the largest Total Reserved of device d (0
	// when the file has none).
	PeakReservedBytes []uint64
	// Categories says the events carry torch.profiler's categories
	// (ProfilerCategory).
	Categories bool
	// Preexisting counts, per device, the tensors that the timeline export
	// dates -1 (alive before profiling began), which the model allocates
	// at its first time, as PyTorch's own JSON form and plot do.
	Preexisting []int
	// Transient counts tensors created and destroyed within one timestamp,
	// which no per-timestamp total (PyTorch's plot, gpumem's timeline)
	// shows, so the model leaves them out.
	Transient int
	// Notes are what the format lacks compared with a snapshot, one
	// sentence each, for info's warnings.
	Notes []string
}

// BeforeProfilingFrame names the allocation that stands for memory
// allocated before profiling began (known only as Total Allocated).
const BeforeProfilingFrame = "[allocated-before-profiling]"

// profilerCategoryKey is the Extras key holding an event's torch.profiler
// category.
const profilerCategoryKey = "profiler_category"

// timelineCategories are torch.profiler's categories in the order
// export_memory_timeline numbers them (_memory_profiler.py's
// _CATEGORY_TO_COLORS: PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY,
// ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, then None), in gpumem's spelling.
var timelineCategories = [...]string{"parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail", "unknown"}

// ProfilerCategory is the torch.profiler category of event i of trace t
// (of a memory timeline export), ok false when the event has none.
func (s *Snapshot) ProfilerCategory(t *Trace, i int) (string, bool) {
	x := s.EventMeta(t, i).Extra
	if s.Profiler == nil || !s.Profiler.Categories || x <= 0 || int(x) >= len(s.Extras) {
		return "", false
	}
	for _, kv := range s.Extras[x] {
		if kv.Key == profilerCategoryKey {
			v, err := strconv.Unquote(kv.JSON)
			return v, err == nil
		}
	}
	return "", false
}

// DeviceName is how the device with trace index d is called: "cuda:d" for
// a snapshot, the profiler's device names otherwise.
func (s *Snapshot) DeviceName(d int) string {
	if p := s.Profiler; p != nil && d >= 0 && d < len(p.DeviceNames) && p.DeviceNames[d] != "" {
		return p.DeviceNames[d]
	}
	return "cuda:" + strconv.Itoa(d)
}

// Unavailable says why a view or answer that needs what (one of
// "segments", "addresses", "stacks") cannot be given for this file, or ""
// when it can. Memory snapshots have all three; the profiler's outputs
// lack some.
func (s *Snapshot) Unavailable(what string) string {
	p := s.Profiler
	if p == nil {
		return ""
	}
	src := ProfilerFormatName(s.Source.Generation)
	switch what {
	case "segments":
		return "a " + src + " records no allocator segments (cudaMalloc'd memory, reserved bytes, free blocks): take a memory snapshot (torch.cuda.memory._record_memory_history, _dump_snapshot) for this view"
	case "addresses":
		if !p.HasAddresses {
			return "a " + src + " records no addresses: take a memory snapshot for this view"
		}
	case "stacks":
		if s.Source.Generation != GenKineto {
			return "a " + src + " records no stacks: open the Kineto trace of the same run (profile_memory=True, with_stack=True), or take a memory snapshot"
		}
	}
	return ""
}

// ProfilerFormatName names a torch.profiler format in a sentence ("" for a
// snapshot generation).
func ProfilerFormatName(g Generation) string {
	switch g {
	case GenKineto:
		return "Kineto trace (torch.profiler with profile_memory=True)"
	case GenTimelineRaw:
		return "raw memory timeline (torch.profiler export_memory_timeline, .raw.json.gz)"
	case GenTimeline:
		return "memory timeline (torch.profiler export_memory_timeline, .json)"
	}
	return ""
}

// profBuild assembles a Snapshot from a profiler output's events: it
// interns frames, stacks and categories, pairs each allocation with its
// free (ledger) and writes the trace entries PyTorch's allocator would have
// written (alloc; free_requested and free_completed).
type profBuild struct {
	s      *Snapshot
	frames map[Frame]FrameID
	stacks map[string]StackID
	cats   map[string]ExtraID
	traces [][]Event
	// metas[d][i] is the MetaID of traces[d][i] (those past its end: 0).
	metas   [][]MetaID
	next    uint64 // next synthetic address
	key     []byte
	hasAddr bool
}

func newProfBuild(gen Generation, hasAddr bool) *profBuild {
	s := &Snapshot{Source: Source{Encoding: "json", Generation: gen}}
	s.Strings = []string{""}
	s.Extras = []KeyValues{nil}
	s.Streams = []int64{0}
	s.Stacks.Offsets = []int32{0, 0}
	s.Profiler = &Profiler{CPUDevice: -1, HasAddresses: hasAddr}
	return &profBuild{s: s, frames: map[Frame]FrameID{}, stacks: map[string]StackID{}, cats: map[string]ExtraID{},
		next: syntheticBase, hasAddr: hasAddr}
}

// syntheticBase is where made-up addresses start (for files without
// addresses, and for a Kineto address allocated twice): far above any
// real device address, 512-aligned like the allocator's.
const syntheticBase = 0x7f00_0000_0000_0000

func (b *profBuild) frame(f Frame) FrameID {
	if id, ok := b.frames[f]; ok {
		return id
	}
	id := FrameID(len(b.s.Frames))
	b.s.Frames = append(b.s.Frames, f)
	b.frames[f] = id
	return id
}

// stack interns a stack of frames, innermost first.
func (b *profBuild) stack(ids []FrameID) StackID {
	if len(ids) == 0 {
		return NoStack
	}
	b.key = b.key[:0]
	for _, id := range ids {
		b.key = strconv.AppendInt(b.key, int64(id), 36)
		b.key = append(b.key, ',')
	}
	if id, ok := b.stacks[string(b.key)]; ok {
		return id
	}
	t := &b.s.Stacks
	t.FrameIDs = append(t.FrameIDs, ids...)
	t.Offsets = append(t.Offsets, int32(len(t.FrameIDs)))
	id := StackID(len(t.Offsets) - 2)
	b.stacks[string(b.key)] = id
	return id
}

// category returns the Extras entry holding a profiler category.
func (b *profBuild) category(name string) ExtraID {
	if id, ok := b.cats[name]; ok {
		return id
	}
	id := ExtraID(len(b.s.Extras))
	b.s.Extras = append(b.s.Extras, KeyValues{{Key: profilerCategoryKey, JSON: strconv.Quote(name)}})
	b.cats[name] = id
	b.s.Profiler.Categories = true
	return id
}

func (b *profBuild) synthetic() uint64 {
	a := b.next
	b.next += 512
	return a
}

func (b *profBuild) device(d int) *[]Event {
	for len(b.traces) <= d {
		b.traces = append(b.traces, nil)
	}
	return &b.traces[d]
}

// emit writes an allocation (size > 0) or a free of one, at addr.
func (b *profBuild) emit(d int, alloc bool, addr, size uint64, timeUS int64, st StackID, extra ExtraID) {
	tr := b.device(d)
	e := Event{Addr: addr, Size: size, TimeUS: timeUS, Stack: st, Flags: FlagHasTime | FlagHasFrames}
	meta := b.s.AddMeta(EventMeta{Extra: extra})
	if alloc {
		e.Action = ActionAlloc
		*tr = append(*tr, e)
		b.setMeta(d, meta)
		return
	}
	// A synchronous free is written by the allocator as free_requested
	// then free_completed; memory_viz (and annotate) merge the pair.
	e.Action = ActionFreeRequested
	*tr = append(*tr, e)
	b.setMeta(d, meta)
	e.Action = ActionFreeCompleted
	*tr = append(*tr, e)
	b.setMeta(d, meta)
}

// setMeta gives the last event of device d's trace its MetaID.
func (b *profBuild) setMeta(d int, id MetaID) {
	if id == 0 {
		return
	}
	for len(b.metas) <= d {
		b.metas = append(b.metas, nil)
	}
	n := len(b.traces[d])
	for len(b.metas[d]) < n {
		b.metas[d] = append(b.metas[d], 0)
	}
	b.metas[d][n-1] = id
}

// prepend puts e first in device d's trace.
func (b *profBuild) prepend(d int, e Event) {
	tr := b.device(d)
	*tr = append([]Event{e}, *tr...)
	if d < len(b.metas) && len(b.metas[d]) > 0 {
		b.metas[d] = append([]MetaID{0}, b.metas[d]...)
	}
}

// live is one allocation not yet freed, in a ledger.
type live struct {
	addr  uint64
	size  uint64
	stack StackID
	extra ExtraID
}

// ledger pairs a device's frees with its allocations: by address when the
// file has them, else by size and category, the latest allocation first
// (a free names no allocation then; the latest is the likeliest, since
// temporaries die young, and the memory totals are the same whichever is
// taken).
type ledger struct {
	b      *profBuild
	d      int
	byAddr map[uint64][]live
	bySize map[[2]uint64][]live // (size, category extra)
	seen   map[uint64]bool      // addresses the trace has named
	// unmatched is the bytes of frees that match no allocation: blocks
	// allocated before profiling began.
	unmatched uint64
}

func (b *profBuild) ledger(d int) *ledger {
	return &ledger{b: b, d: d, byAddr: map[uint64][]live{}, bySize: map[[2]uint64][]live{}, seen: map[uint64]bool{}}
}

// alloc records an allocation of size bytes (at addr when the file has
// addresses) and writes it.
func (l *ledger) alloc(addr, size uint64, timeUS int64, st StackID, extra ExtraID) {
	if l.b.hasAddr {
		if len(l.byAddr[addr]) > 0 {
			// Allocated again while live (the file lost a free): keep both,
			// the second at an address of its own.
			a := l.b.synthetic()
			l.byAddr[addr] = append(l.byAddr[addr], live{a, size, st, extra})
			l.b.emit(l.d, true, a, size, timeUS, st, extra)
			return
		}
		l.byAddr[addr] = append(l.byAddr[addr], live{addr, size, st, extra})
		l.seen[addr] = true
		l.b.emit(l.d, true, addr, size, timeUS, st, extra)
		return
	}
	a := l.b.synthetic()
	k := [2]uint64{size, uint64(extra)}
	l.bySize[k] = append(l.bySize[k], live{a, size, st, extra})
	l.b.emit(l.d, true, a, size, timeUS, st, extra)
}

// take finds and removes the allocation a free of size bytes (at addr)
// frees, ok false when there is none.
func (l *ledger) take(addr, size uint64, extra ExtraID) (live, bool) {
	if l.b.hasAddr {
		ls := l.byAddr[addr]
		for i := len(ls) - 1; i >= 0; i-- {
			if ls[i].size == size {
				x := ls[i]
				ls = append(ls[:i], ls[i+1:]...)
				if len(ls) == 0 {
					delete(l.byAddr, addr)
				} else {
					l.byAddr[addr] = ls
				}
				return x, true
			}
		}
		return live{}, false
	}
	k := [2]uint64{size, uint64(extra)}
	ls := l.bySize[k]
	if len(ls) == 0 {
		return live{}, false
	}
	x := ls[len(ls)-1]
	if len(ls) == 1 {
		delete(l.bySize, k)
	} else {
		l.bySize[k] = ls[:len(ls)-1]
	}
	return x, true
}

// free records a free of size bytes (at addr) and writes it: of the
// allocation it pairs with, else of a block allocated before profiling
// (at an address of its own when the file has none, or when its address
// is live with another size), which the replay counts as live from the
// start, as it does a snapshot's frees of blocks older than its trace.
func (l *ledger) free(addr, size uint64, timeUS int64, st StackID, extra ExtraID) {
	if x, ok := l.take(addr, size, extra); ok {
		l.b.emit(l.d, false, x.addr, x.size, timeUS, x.stack, x.extra)
		return
	}
	l.unmatched += size
	a := addr
	// A block allocated before profiling gets an address of its own when
	// the trace has named its address already, or the replay would take
	// it for one of the trace's.
	if !l.b.hasAddr || l.seen[addr] {
		a = l.b.synthetic()
	}
	l.seen[a] = true
	l.b.emit(l.d, false, a, size, timeUS, st, extra)
}

// finish sets the traces, names the devices and describes what the format
// lacks.
func (b *profBuild) finish(names []string) *Snapshot {
	s := b.s
	s.Traces = make([]Trace, len(b.traces))
	for d, ev := range b.traces {
		s.Traces[d].Events = ev
		if d < len(b.metas) {
			s.Traces[d].SetMetas(b.metas[d])
		}
	}
	p := s.Profiler
	p.DeviceNames = names
	for len(p.BeforeBytes) < len(s.Traces) {
		p.BeforeBytes = append(p.BeforeBytes, 0)
	}
	for len(p.PeakReservedBytes) < len(s.Traces) {
		p.PeakReservedBytes = append(p.PeakReservedBytes, 0)
	}
	for len(p.Preexisting) < len(s.Traces) {
		p.Preexisting = append(p.Preexisting, 0)
	}
	return s
}

// sortAnnotations orders annotations by time, STARTs before ENDs at one
// time (AnnotationSpans pairs them in order).
func sortAnnotations(a []Annotation) {
	sort.SliceStable(a, func(i, j int) bool {
		if a[i].TimeUS != a[j].TimeUS {
			return a[i].TimeUS < a[j].TimeUS
		}
		return a[i].Stage == "END" && a[j].Stage == "START"
	})
}

// parseFrame reads a Python frame as the profiler writes it,
// "file.py(LINE): name"; anything else is a frame with a name only.
func parseFrame(s string) Frame {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "): "); i > 0 {
		if j := strings.LastIndexByte(s[:i], '('); j > 0 {
			if line, err := strconv.ParseInt(s[j+1:i], 10, 64); err == nil {
				return Frame{Filename: s[:j], Line: line, Name: s[i+3:]}
			}
		}
	}
	return Frame{Name: s}
}

// profilerDecoder returns the reader for JSON input that is a
// torch.profiler output (nil for a snapshot): it looks at up to 64 KB of
// its start, since a Kineto trace may list many devices' properties
// before its traceEvents.
func profilerDecoder(r *bufio.Reader) func(io.Reader) (*Snapshot, error) {
	head, _ := r.Peek(min(r.Size(), 64<<10))
	switch {
	case isTimelineHead(head):
		return decodeTimeline
	case bytes.HasPrefix(bytes.TrimLeft(head, " \t\r\n"), []byte("{")) && isKinetoHead(head):
		return decodeKineto
	}
	return nil
}

// htmlExport explains an HTML input: export_memory_timeline's .html form
// is a picture of the plot, with no data to read.
func htmlExport(head []byte) string {
	h := bytes.ToLower(bytes.TrimLeft(head, " \t\r\n\ufeff"))
	if !bytes.HasPrefix(h, []byte("<html")) && !bytes.HasPrefix(h, []byte("<!doctype html")) {
		return ""
	}
	if bytes.Contains(h, []byte("memory timeline")) {
		return "this is torch.profiler's export_memory_timeline HTML: a PNG of the plot, without its data; export with a .raw.json.gz path (prof.export_memory_timeline(\"memory.raw.json.gz\", device=\"cuda:0\")) and open that"
	}
	return "an HTML page, not a snapshot or a torch.profiler output"
}
