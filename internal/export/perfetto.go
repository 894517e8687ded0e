// Package export writes snapshots and their analyses in the formats of
// other tools: pprof profiles, Chrome/Perfetto trace JSON, a normalised
// JSON model, flamegraph SVG and folded stacks.
package export

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/gpumem/gpumem/internal/analysis"
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
	// drawn as its own slice (default 1 MiB). Smaller ones are summed in
	// the "small allocations" counter track instead.
	MinSliceBytes uint64
	// MaxFrames caps the stack frames kept in a slice's args (default 8).
	MaxFrames int
}

// Counter track names, one set per device (Chrome tracing "C" events).
const (
	CounterAllocated = "allocated bytes"
	CounterReserved  = "reserved bytes"
	CounterActive    = "active bytes"
	CounterRequested = "requested bytes"
	CounterSmall     = "small allocations bytes"
)

// WritePerfetto writes s as Chrome trace-event JSON (the format
// chrome://tracing and ui.perfetto.dev load): per device a process
// "cuda:N" with counter tracks of allocated, reserved, active and
// requested bytes after every trace event (replay.Curves), one counter
// track per memory category (analysis's categories), allocations of
// at least MinSliceBytes as slices on per-stream lanes (a lane is a thread;
// concurrent allocations take separate lanes), the bytes of smaller live
// allocations as one counter, and instant events for OOMs, snapshot
// events and external annotations. Times are time_us (µs since the Unix
// epoch); a trace recorded without time_us (PyTorch 2.1 and older) uses
// the event index as its µs clock, and its annotations are left out.
func WritePerfetto(w io.Writer, s *snapshot.Snapshot, o PerfettoOptions) error {
	if o.MinSliceBytes == 0 {
		o.MinSliceBytes = 1 << 20
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
	p.buf = appendJSONString(p.buf[:0], v)
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

// laneTID numbers threads: stream k's lane j is tid (k+1)*1000 + j, so
// lanes of one stream sort together; tid 0 holds the instant events.
func laneTID(stream snapshot.StreamID, lane int) int { return (int(stream)+1)*1000 + lane }

func (p *perfettoWriter) device(d int) {
	s := p.s
	var events []snapshot.Event
	if d < len(s.Traces) {
		events = s.Traces[d].Events
	}
	hasTime := len(events) > 0 && events[0].Flags&snapshot.FlagHasTime != 0
	ts := func(i int) int64 {
		if hasTime {
			return events[i].TimeUS
		}
		return int64(i)
	}
	pid := d
	p.meta(pid, 0, "process_name", "cuda:"+strconv.Itoa(d))
	p.meta(pid, 0, "thread_name", "events")

	// Counters: the state before the trace, then after every event that
	// changes a value.
	c := replay.NewCurves(s, d)
	t0 := int64(0)
	if len(events) > 0 {
		t0 = ts(0)
	}
	prev := c.At(-1)
	small := p.smallBefore(d)
	p.counters(pid, t0, prev, small, nil, 0)
	for i := range events {
		cur := c.At(i)
		e := &events[i]
		psmall := small
		if e.Size < p.o.MinSliceBytes {
			switch e.Action {
			case snapshot.ActionAlloc:
				small += e.Size
			case snapshot.ActionFreeCompleted:
				small -= min(small, e.Size)
			}
		}
		p.counters(pid, ts(i), cur, small, &prev, psmall)
		prev = cur
	}

	p.categories(pid, d, ts, t0)
	p.slices(pid, d, events, ts)

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

// CategoryCounter is the name of a category's counter track.
func CategoryCounter(c analysis.Category) string { return "category " + c.String() + " bytes" }

// categories writes a counter track per memory category (gpumem peak's):
// the requested bytes of the Active Memory Timeline's live allocations of
// that category, after every alloc and free.
func (p *perfettoWriter) categories(pid, d int, ts func(int) int64, t0 int64) {
	dv := analysis.NewDevice(p.s, d)
	lt := dv.Active
	var live analysis.Totals
	born := make([][]int32, len(lt.Events))
	died := make([][]int32, len(lt.Events))
	for i := range lt.Items {
		it := &lt.Items[i]
		if it.Born < 0 {
			live[dv.Category(i)] += it.Size
		} else {
			born[it.Born] = append(born[it.Born], int32(i))
		}
		if int(it.Died) < len(lt.Events) {
			died[it.Died] = append(died[it.Died], int32(i))
		}
	}
	for _, c := range analysis.Categories() {
		p.counter(pid, t0, CategoryCounter(c), live[c])
	}
	for k, raw := range lt.Events {
		if raw < 0 {
			continue
		}
		changed := map[analysis.Category]bool{}
		for _, i := range born[k] {
			c := dv.Category(int(i))
			live[c] += lt.Items[i].Size
			changed[c] = true
		}
		for _, i := range died[k] {
			c := dv.Category(int(i))
			live[c] -= lt.Items[i].Size
			changed[c] = true
		}
		for _, c := range analysis.Categories() {
			if changed[c] {
				p.counter(pid, ts(int(raw)), CategoryCounter(c), live[c])
			}
		}
	}
}

// smallBefore is the requested bytes of small allocations live before the
// first event: the dump's small blocks with the trace undone.
func (p *perfettoWriter) smallBefore(d int) uint64 {
	s := p.s
	var live int64
	for i := range s.Segments {
		seg := &s.Segments[i]
		if int(seg.Device) != d {
			continue
		}
		for _, b := range s.SegmentBlocks(i) {
			if b.State != snapshot.BlockInactive && b.RequestedSize < p.o.MinSliceBytes {
				live += int64(b.RequestedSize)
			}
		}
	}
	if d < len(s.Traces) {
		for _, e := range s.Traces[d].Events {
			if e.Size >= p.o.MinSliceBytes {
				continue
			}
			switch e.Action {
			case snapshot.ActionAlloc:
				live -= int64(e.Size)
			case snapshot.ActionFreeCompleted:
				live += int64(e.Size)
			}
		}
	}
	return uint64(max(live, 0))
}

// counters writes the counters that differ from prev (all when prev is
// nil).
func (p *perfettoWriter) counters(pid int, ts int64, t replay.Totals, small uint64, prev *replay.Totals, prevSmall uint64) {
	if prev == nil || t.Allocated != prev.Allocated {
		p.counter(pid, ts, CounterAllocated, t.Allocated)
	}
	if prev == nil || t.Reserved != prev.Reserved {
		p.counter(pid, ts, CounterReserved, t.Reserved)
	}
	if prev == nil || t.Active != prev.Active {
		p.counter(pid, ts, CounterActive, t.Active)
	}
	if prev == nil || t.Requested != prev.Requested {
		p.counter(pid, ts, CounterRequested, t.Requested)
	}
	if prev == nil || small != prevSmall {
		p.counter(pid, ts, CounterSmall, small)
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
	alloc, free int // raw event indices; free = -1 when live at the end
}

// slices writes every allocation of at least MinSliceBytes from its alloc
// to its free_completed (or the end of the trace), on the first lane of
// its stream that is free at its start.
func (p *perfettoWriter) slices(pid, d int, events []snapshot.Event, ts func(int) int64) {
	open := map[uint64]int{} // addr -> index into list
	var list []slice
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			if e.Size >= p.o.MinSliceBytes {
				open[e.Addr] = len(list)
				list = append(list, slice{i, -1})
			}
		case snapshot.ActionFreeCompleted:
			if k, ok := open[e.Addr]; ok {
				list[k].free = i
				delete(open, e.Addr)
			}
		}
	}
	if len(list) == 0 {
		return
	}
	end := ts(len(events) - 1)
	// lanes[stream] holds each lane's end time.
	lanes := map[snapshot.StreamID][]int64{}
	named := map[int]bool{}
	for _, sl := range list {
		e := &events[sl.alloc]
		start := ts(sl.alloc)
		stop := end
		if sl.free >= 0 {
			stop = ts(sl.free)
		}
		ls := lanes[e.Stream]
		lane := len(ls)
		for j, busy := range ls {
			if busy <= start {
				lane = j
				break
			}
		}
		if lane == len(ls) {
			ls = append(ls, 0)
		}
		ls[lane] = max(stop, start+1)
		lanes[e.Stream] = ls
		tid := laneTID(e.Stream, lane)
		if !named[tid] {
			named[tid] = true
			p.meta(pid, tid, "thread_name", fmt.Sprintf("stream %d (0x%x) lane %d", e.Stream, p.s.RawStream(e.Stream), lane))
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
			p.str(f.Filename + ":" + strconv.FormatInt(f.Line, 10) + ":" + f.Name)
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
