// Package export writes snapshots and their analyses in the formats of
// other tools: pprof profiles, Chrome/Perfetto trace JSON, a normalised
// JSON model, flamegraph SVG and folded stacks.
package export

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/pickle"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// PerfettoOptions tunes WritePerfetto; the zero value means the defaults.
type PerfettoOptions struct {
	// Device limits the trace to one device; -1 (or any negative) means
	// every device.
	Device int
	// MinSliceBytes is the least requested size an allocation needs to be
	// drawn as its own slice (default 1 MiB).
	MinSliceBytes uint64
	// MaxSlices caps the slices per device: the largest allocations are
	// drawn (default 20000).
	MaxSlices int
	// MaxLanes caps the lanes per stream (default 128); an allocation that
	// finds every lane busy is not drawn.
	MaxLanes int
	// MaxCounterEvents is the trace length above which each counter is
	// reduced to its largest and its last value per bucket of events
	// (default 200000 events, 100000 buckets).
	MaxCounterEvents int
	// MaxFrames caps the stack frames kept in a slice's args (default 8).
	MaxFrames int
}

// Counter track names, one set per device (Chrome tracing "C" events).
// Each counter's one argument is "bytes", and Perfetto names a JSON
// counter track "NAME ARG": "allocated bytes", "category parameter bytes".
const (
	CounterAllocated = "allocated"
	CounterReserved  = "reserved"
	CounterActive    = "active"
	CounterRequested = "requested"
	// CounterUndrawn is the requested bytes of live allocations that have
	// no slice (smaller than MinSliceBytes, beyond MaxSlices or MaxLanes,
	// or allocated before the trace).
	CounterUndrawn = "allocations without a slice"
)

// WritePerfetto writes s as Chrome trace-event JSON (the format
// chrome://tracing and ui.perfetto.dev load): per device a process
// "cuda:N" with counter tracks of allocated, reserved, active and
// requested bytes after every trace event (replay.Curves), one counter
// track per memory category (analysis's categories), allocations of
// at least MinSliceBytes as slices on per-stream lanes (a lane is a thread;
// concurrent allocations take separate lanes; the largest MaxSlices on at
// most MaxLanes lanes per stream), the live bytes of allocations without a
// slice as one counter, and instant events for OOMs, snapshot
// events and external annotations. Times are time_us (µs since the Unix
// epoch); a trace recorded without time_us (PyTorch 2.1 and older) uses
// the event index as its µs clock, and its annotations are left out.
func WritePerfetto(w io.Writer, s *snapshot.Snapshot, o PerfettoOptions) error {
	if o.MinSliceBytes == 0 {
		o.MinSliceBytes = 1 << 20
	}
	if o.MaxSlices <= 0 {
		o.MaxSlices = 20000
	}
	if o.MaxLanes <= 0 {
		o.MaxLanes = 128
	}
	if o.MaxCounterEvents <= 0 {
		o.MaxCounterEvents = 200000
	}
	if o.MaxFrames <= 0 {
		o.MaxFrames = 8
	}
	pw := &perfettoWriter{w: bufio.NewWriterSize(w, 1<<16), s: s, o: o, frames: map[snapshot.StackID][]*snapshot.Frame{}}
	pw.w.WriteString(`{"displayTimeUnit":"ms","otherData":{"generator":"gpumem","source":`)
	pw.str(s.Source.Name)
	pw.w.WriteString(`},"traceEvents":[`)
	for _, d := range s.Devices() {
		if o.Device >= 0 && d != o.Device {
			continue
		}
		pw.device(d)
	}
	pw.w.WriteString("\n]}\n")
	return pw.w.Flush()
}

type perfettoWriter struct {
	w     *bufio.Writer
	s     *snapshot.Snapshot
	o     PerfettoOptions
	first bool // an event has been written (comma needed)
	buf   []byte
	// frames caches userFrames per stack: allocations share few stacks.
	frames map[snapshot.StackID][]*snapshot.Frame
}

// event starts a new trace event object: `{"ph":"X","pid":N,"ts":T`.
func (p *perfettoWriter) event(ph string, pid int, ts int64) {
	if p.first {
		p.w.WriteString(",\n")
	} else {
		p.w.WriteString("\n")
		p.first = true
	}
	p.w.WriteString(`{"ph":"` + ph + `","pid":` + strconv.Itoa(pid) + `,"ts":` + strconv.FormatInt(ts, 10))
}

func (p *perfettoWriter) str(v string) {
	p.buf = pickle.AppendJSONString(p.buf[:0], v)
	p.w.Write(p.buf)
}

func (p *perfettoWriter) meta(pid, tid int, kind, name string) {
	p.event("M", pid, 0)
	p.w.WriteString(`,"tid":` + strconv.Itoa(tid) + `,"name":"` + kind + `","args":{"name":`)
	p.str(name)
	p.w.WriteString("}}")
}

func (p *perfettoWriter) counter(pid int, ts int64, name string, v uint64) {
	p.event("C", pid, ts)
	p.w.WriteString(`,"name":"` + name + `","args":{"bytes":` + strconv.FormatUint(v, 10) + "}}")
}

// track writes one counter: every change, or, when buckets > 0, the
// largest value of each bucket of events (at the bucket's first event) and
// its last value (at its last event), so that peaks stay exact.
type track struct {
	p       *perfettoWriter
	pid     int
	name    string
	n       int // events
	buckets int
	started bool
	last    uint64
	// the bucket being gathered
	b               int
	firstTS, lastTS int64
	hi, end         uint64
	pending, dirty  bool
}

func (t *track) add(i int, ts int64, v uint64) {
	if t.buckets == 0 {
		if !t.started || v != t.last {
			t.p.counter(t.pid, ts, t.name, v)
			t.started, t.last = true, v
		}
		return
	}
	b := int(int64(i) * int64(t.buckets) / int64(max(t.n, 1)))
	if t.pending && b != t.b {
		t.flush()
	}
	if !t.pending {
		t.pending, t.b, t.firstTS, t.hi = true, b, ts, v
	}
	if v > t.hi {
		t.hi = v
	}
	t.end, t.lastTS = v, ts
}

func (t *track) flush() {
	if !t.pending {
		return
	}
	if !t.started || t.hi != t.last {
		t.p.counter(t.pid, t.firstTS, t.name, t.hi)
	}
	if t.end != t.hi {
		t.p.counter(t.pid, t.lastTS, t.name, t.end)
	}
	t.started, t.last, t.pending = true, t.end, false
}

// laneTID numbers threads: stream k's lane j is tid (k+1)*1000 + j, so
// lanes of one stream sort together; tid 0 holds the instant events.
func laneTID(stream snapshot.StreamID, lane int) int { return (int(stream)+1)*1000 + lane }

// CategoryCounter is the name of a category's counter track.
func CategoryCounter(c analysis.Category) string { return "category " + c.String() }

// devicePID is device d's process id in the trace: Perfetto treats pid 0
// as special (the swapper), so device 0 is pid 1.
func devicePID(d int) int { return d + 1 }

// freeCompletions maps each free_requested event to the free_completed
// of the same block (-1 while none follows).
func freeCompletions(events []snapshot.Event) []int32 {
	out := make([]int32, len(events))
	pending := map[uint64]int{}
	for i := range events {
		out[i] = -1
		switch e := &events[i]; e.Action {
		case snapshot.ActionFreeRequested:
			pending[e.Addr] = i
		case snapshot.ActionFreeCompleted:
			if r, ok := pending[e.Addr]; ok {
				out[r] = int32(i)
				delete(pending, e.Addr)
			}
		}
	}
	return out
}

func (p *perfettoWriter) device(d int) {
	s := p.s
	var events []snapshot.Event
	if d < len(s.Traces) {
		events = s.Traces[d].Events
	}
	hasTime := len(events) > 0 && events[0].Flags&snapshot.FlagHasTime != 0
	ts := func(i int) int64 {
		if i < 0 {
			i = 0
		}
		if hasTime {
			return events[i].TimeUS
		}
		return int64(i)
	}
	pid := devicePID(d)
	p.meta(pid, 0, "process_name", s.DeviceName(d))
	p.meta(pid, 0, "thread_name", "events")
	list := p.pickSlices(events, ts)
	drawn := make([]bool, len(events)) // alloc and free_completed events of slices
	for _, sl := range list {
		drawn[sl.alloc] = true
		if sl.free >= 0 {
			drawn[sl.free] = true
		}
	}

	buckets := 0
	if len(events) > p.o.MaxCounterEvents {
		buckets = p.o.MaxCounterEvents / 2
	}
	newTrack := func(name string) *track {
		return &track{p: p, pid: pid, name: name, n: len(events), buckets: buckets}
	}
	alloc, res, act, req, und := newTrack(CounterAllocated), newTrack(CounterReserved), newTrack(CounterActive), newTrack(CounterRequested), newTrack(CounterUndrawn)
	cats := analysis.Categories()
	catTracks := make([]*track, len(cats))
	for k, c := range cats {
		catTracks[k] = newTrack(CategoryCounter(c))
	}

	// Category totals change where the requested counter does: an
	// allocation counts from its alloc to its free_completed. (The Active
	// Memory Timeline drops a block at free_requested: following it, the
	// categories fell short of requested by up to 100 MiB, for a few µs,
	// at 781 of 13,739 moments of a real trace.)
	dv := analysis.NewDevice(s, d)
	lt := dv.Active
	sweep := dv.NewCategorySweep() // for the totals before the first event
	live := &sweep.Live
	born, died := make([]int32, len(events)), make([]int32, len(events)) // item+1 at raw event
	completion := freeCompletions(events)
	raw := func(k int32) int32 { // action k's raw event, -1 for none
		if k < 0 || int(k) >= len(lt.Events) {
			return -1
		}
		return lt.Events[k]
	}
	for i := range lt.Len() {
		it := lt.Item(i)
		if b := raw(it.Born); it.Alloc >= 0 {
			born[it.Alloc] = int32(i + 1)
		} else if b >= 0 {
			born[b] = int32(i + 1)
		} else if it.Born >= 0 {
			// Pushed by an action of no raw event (a dump block the
			// trace does not mention): live from the start.
			live[dv.Category(i)] += it.Size
		}
		f := it.Free
		if f < 0 {
			f = raw(it.Died)
		}
		if f >= 0 && events[f].Action == snapshot.ActionFreeRequested {
			f = completion[f]
		}
		if f >= 0 {
			died[f] = int32(i + 1)
		}
	}
	c := replay.NewCurves(s, d)
	var drawnLive uint64
	emit := func(i int, t replay.Totals) {
		at := ts(i)
		alloc.add(i, at, t.Allocated)
		res.add(i, at, t.Reserved)
		act.add(i, at, t.Active)
		req.add(i, at, t.Requested)
		und.add(i, at, t.Requested-min(t.Requested, drawnLive))
		for k, c := range cats {
			catTracks[k].add(i, at, live[c])
		}
	}
	emit(-1, c.At(-1))
	for i := range events {
		e := &events[i]
		if drawn[i] {
			switch e.Action {
			case snapshot.ActionAlloc:
				drawnLive += e.Size
			case snapshot.ActionFreeCompleted:
				drawnLive -= min(drawnLive, e.Size)
			}
		}
		if x := born[i]; x > 0 {
			live[dv.Category(int(x-1))] += lt.Size(int(x - 1))
		}
		if x := died[i]; x > 0 {
			live[dv.Category(int(x-1))] -= lt.Size(int(x - 1))
		}
		emit(i, c.At(i))
	}
	for _, t := range append([]*track{alloc, res, act, req, und}, catTracks...) {
		t.flush()
	}

	p.writeSlices(pid, events, list, ts)
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionOOM:
			p.instant(pid, ts(i), "OOM", fmt.Sprintf(`{"requested_bytes":%d,"device_free_bytes":%d}`, e.Size, e.Addr))
		case snapshot.ActionSnapshot:
			p.instant(pid, ts(i), "snapshot", "{}")
		}
	}
	if hasTime {
		for _, a := range s.Annotations {
			if int(a.Device) != d {
				continue
			}
			name := a.Name
			if a.Stage != "" {
				name += " " + a.Stage
			}
			p.instant(pid, a.TimeUS, name, `{"annotation":true}`)
		}
	}
}

func (p *perfettoWriter) instant(pid int, ts int64, name, args string) {
	p.event("i", pid, ts)
	p.w.WriteString(`,"tid":0,"s":"p","name":`)
	p.str(name)
	p.w.WriteString(`,"args":` + args + "}")
}

// slice is one allocation drawn as a complete ("X") event.
type slice struct {
	alloc, free int32 // raw event indices; free = -1 when live at the end
	lane        int32
}

// pickSlices chooses the allocations drawn as slices: of those of at
// least MinSliceBytes, the MaxSlices largest, each on the first lane of
// its stream free when it starts (an allocation finding MaxLanes busy
// lanes is left out). Returned in start order.
func (p *perfettoWriter) pickSlices(events []snapshot.Event, ts func(int) int64) []slice {
	open := map[uint64]int{} // addr -> index into list
	var list []slice
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			if e.Size >= p.o.MinSliceBytes {
				open[e.Addr] = len(list)
				list = append(list, slice{int32(i), -1, 0})
			}
		case snapshot.ActionFreeCompleted:
			if k, ok := open[e.Addr]; ok {
				list[k].free = int32(i)
				delete(open, e.Addr)
			}
		}
	}
	if len(list) > p.o.MaxSlices {
		slices.SortStableFunc(list, func(a, b slice) int { return cmp.Compare(events[b.alloc].Size, events[a.alloc].Size) })
		list = list[:p.o.MaxSlices]
		slices.SortFunc(list, func(a, b slice) int { return cmp.Compare(a.alloc, b.alloc) })
	}
	end := int64(0)
	if len(events) > 0 {
		end = ts(len(events) - 1)
	}
	lanes := map[snapshot.StreamID][]int64{} // per stream, each lane's end
	out := list[:0]
	for _, sl := range list {
		e := &events[sl.alloc]
		start, stop := ts(int(sl.alloc)), end
		if sl.free >= 0 {
			stop = ts(int(sl.free))
		}
		ls := lanes[e.Stream]
		lane := -1
		for j, busy := range ls {
			if busy <= start {
				lane = j
				break
			}
		}
		if lane < 0 {
			if len(ls) == p.o.MaxLanes {
				continue
			}
			lane = len(ls)
			ls = append(ls, 0)
		}
		ls[lane] = max(stop, start+1)
		lanes[e.Stream] = ls
		sl.lane = int32(lane)
		out = append(out, sl)
	}
	return out
}

// writeSlices writes the chosen allocations as slices from their alloc to
// their free_completed (or the end of the trace).
func (p *perfettoWriter) writeSlices(pid int, events []snapshot.Event, list []slice, ts func(int) int64) {
	if len(list) == 0 {
		return
	}
	end := ts(len(events) - 1)
	named := map[int]bool{}
	for _, sl := range list {
		e := &events[sl.alloc]
		start, stop := ts(int(sl.alloc)), end
		if sl.free >= 0 {
			stop = ts(int(sl.free))
		}
		tid := laneTID(e.Stream, int(sl.lane))
		if !named[tid] {
			named[tid] = true
			p.meta(pid, tid, "thread_name", fmt.Sprintf("stream %d (0x%x) lane %d", e.Stream, p.s.RawStream(e.Stream), sl.lane))
		}
		frames, ok := p.frames[e.Stack]
		if !ok {
			frames = userFrames(p.s, e.Stack)
			p.frames[e.Stack] = frames
		}
		p.event("X", pid, start)
		p.w.WriteString(`,"tid":` + strconv.Itoa(tid) + `,"dur":` + strconv.FormatInt(max(stop-start, 1), 10) + `,"name":`)
		p.str(sliceName(frames, e.Size))
		p.w.WriteString(`,"args":{"bytes":` + strconv.FormatUint(e.Size, 10) + `,"address":"0x` + strconv.FormatUint(e.Addr, 16) + `"`)
		if sl.free < 0 {
			p.w.WriteString(`,"live_at_end":true`)
		}
		p.w.WriteString(`,"stack":[`)
		for k, f := range frames[:min(len(frames), p.o.MaxFrames)] {
			if k > 0 {
				p.w.WriteString(",")
			}
			p.str(baseName(f.Filename) + ":" + strconv.FormatInt(f.Line, 10) + ":" + f.Name)
		}
		p.w.WriteString("]}}")
	}
}

// sliceName is the innermost frame's function and the size, or the size
// alone for an allocation recorded without a stack.
func sliceName(frames []*snapshot.Frame, size uint64) string {
	sz := units.VizShort(size)
	if len(frames) == 0 {
		return sz
	}
	return frameLabel(frames[0]) + " " + sz
}
