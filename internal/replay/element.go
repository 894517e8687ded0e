package replay

import (
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

func (t *Timeline) element(i int) ElementInfo {
	e := t.elementNoFrames(i)
	if !e.Envelope && e.Addr != "" {
		e.Frames = formatFrames(t.s, e.Stack)
	}
	return e
}

// elementNoFrames is element without formatting the frames.
func (t *Timeline) elementNoFrames(i int) ElementInfo {
	if t.ser != nil && i >= len(t.src) && i < len(t.ser) {
		key := t.poolKeys[i-len(t.src)]
		return ElementInfo{
			Index: i, Addr: "pool:" + key, Size: t.itemSize(int32(i)),
			AllocEvent: -1, FreeEvent: -1, Start: int(t.start[i]), End: int(t.end[i]),
			Envelope: true, PoolKey: key,
		}
	}
	if i < 0 || i >= len(t.src) {
		return ElementInfo{Index: i, AllocEvent: -1, FreeEvent: -1}
	}
	s := t.s
	src := &t.src[i]
	info := ElementInfo{
		Index:      i,
		Size:       src.size,
		AllocEvent: -1,
		FreeEvent:  int(src.freeEvent()),
		Start:      int(t.start[i]),
		End:        int(t.end[i]),
	}
	if t.totalAfter != nil {
		info.TotalAfter = t.totalAfter[i]
	} else {
		info.TotalAfter = t.off0[i] + src.size
	}
	segmentView := t.kind == KindSegments
	poolSeg := int32(-1)
	switch src.kind() {
	case srcAlloc, srcFree:
		e := &s.Traces[t.device].Events[src.ref]
		tr := &s.Traces[t.device]
		info.Address, info.Version, info.Stream, info.Stack = e.Addr, tr.Version(int(src.ref)), e.Stream, e.Stack
		info.TimeUS, info.HasTime = e.TimeUS, e.Flags&snapshot.FlagHasTime != 0
		em := s.EventMeta(tr, int(src.ref))
		info.CompileContext = s.Text(em.CompileContext)
		info.UserMetadata = s.Text(em.UserMetadata)
		if src.kind() == srcAlloc {
			info.AllocEvent = int(src.ref)
		} else {
			info.PreTraceFree = true
		}
		poolSeg = findSegment(s, t.segs, e.Addr)
	case srcGhostBlock:
		b := &s.Blocks[src.ref]
		info.Address, info.Version, info.Stack = b.Addr, b.Version, blockStack(s, b)
		info.Ghost = true
		poolSeg = findSegment(s, t.segs, b.Addr)
		if poolSeg >= 0 {
			info.Stream = s.Segments[poolSeg].Stream
		}
	case srcDumpSeg:
		seg := &s.Segments[src.ref]
		info.Address, info.Version, info.Stream = seg.Address, seg.Version, seg.Stream
		poolSeg = findSegment(s, t.segs, seg.Address)
	}
	if poolSeg >= 0 && s.Segments[poolSeg].HasPoolID {
		info.PoolID, info.PoolKnown = s.Segments[poolSeg].PoolID, true
	}
	info.Addr = formatAddr(segmentView, info.Address, info.Version)
	return info
}

// context is memory_viz's context_for_id text.
func (t *Timeline) context(i int) string {
	return t.contextWith(i, func(id snapshot.StackID) string { return framesText(t.s, id) })
}

// contextWith builds the context text with frames text from frames.
func (t *Timeline) contextWith(i int, frames func(snapshot.StackID) string) string {
	e := t.elementNoFrames(i)
	if e.Addr == "" {
		return ""
	}
	if e.Envelope {
		return "Private Pool (" + e.PoolKey + "): capacity " + units.Viz(e.Size)
	}
	var b strings.Builder
	b.WriteString("Addr: " + e.Addr)
	b.WriteString(", Size: " + units.Viz(e.Size) + " allocation")
	b.WriteString(", Total memory used after allocation: " + units.Viz(e.TotalAfter))
	ctx := e.CompileContext
	if ctx == "" {
		ctx = "None"
	}
	b.WriteString(", Compile context: " + ctx)
	b.WriteString(", stream " + itoa(int64(e.Stream)))
	if e.PoolKnown {
		b.WriteString(", pool_id (" + itoa(e.PoolID[0]) + ", " + itoa(e.PoolID[1]) + ")")
	} else {
		b.WriteString(", pool_id unknown")
	}
	b.WriteString(", timestamp " + jsDate(e.TimeUS, e.HasTime))
	if e.PreTraceFree {
		b.WriteString("\nalloc not recorded, stack trace for free:")
	}
	if e.Ghost {
		b.WriteString("\n[Ghost block] This block exists in the segment snapshot but has no alloc trace events. " +
			"It was allocated before _record_memory_history() was called, or its alloc event was evicted " +
			"from the trace ring buffer. The block is still active (not freed) at snapshot time.")
	}
	if md := userMetadataText(e.UserMetadata); md != "" {
		b.WriteString("\n" + md)
	}
	b.WriteString("\n")
	b.WriteString(frames(e.Stack))
	return b.String()
}

// jsDate renders new Date(time_us/1000) as JavaScript's Date.toString
// would in UTC; without a time, "not recorded".
func jsDate(us int64, ok bool) string {
	if !ok {
		// memory_viz prints JavaScript's "Invalid Date" here (a block
		// allocated before recording, a trace without time_us).
		return "not recorded"
	}
	return time.UnixMilli(us / 1000).UTC().Format("Mon Jan 02 2006 15:04:05 GMT+0000 (Coordinated Universal Time)")
}

// searchIndex is what Search keeps between calls: every distinct stack's
// frames text, lower-cased, and the last query's result.
type searchIndex struct {
	once   sync.Once
	frames map[snapshot.StackID]string
	stacks []snapshot.StackID // per element

	mu         sync.Mutex
	lastA      string
	lastF      string
	lastResult []int
	lastValid  bool
}

// buildSearchIndex formats each distinct stack once.
func (t *Timeline) buildSearchIndex() {
	x := &t.searchIdx
	x.stacks = make([]snapshot.StackID, len(t.src))
	x.frames = map[snapshot.StackID]string{}
	for i := range t.src {
		id := t.elementStack(i)
		x.stacks[i] = id
		if _, ok := x.frames[id]; !ok {
			x.frames[id] = strings.ToLower(framesText(t.s, id))
		}
	}
}

func (t *Timeline) search(addrQuery, frameQuery string) []int {
	a := strings.ToLower(strings.TrimSpace(addrQuery))
	f := strings.ToLower(strings.TrimSpace(frameQuery))
	if a == "" && f == "" {
		return nil
	}
	x := &t.searchIdx
	x.once.Do(t.buildSearchIndex)
	x.mu.Lock()
	if x.lastValid && x.lastA == a && x.lastF == f {
		out := slices.Clone(x.lastResult)
		x.mu.Unlock()
		return out
	}
	x.mu.Unlock()

	// Each query is tested once per distinct stack; the header (address,
	// sizes, stream, ...) is built only for elements whose frames do not
	// already match every query. The header and the frames are joined by
	// a newline, which a trimmed query without one cannot span.
	inFrames := func(q string) map[snapshot.StackID]bool {
		m := make(map[snapshot.StackID]bool, len(x.frames))
		for id, fr := range x.frames {
			m[id] = q == "" || (!strings.Contains(q, "\n") && strings.Contains(fr, q))
		}
		return m
	}
	aFr, fFr := inFrames(a), inFrames(f)
	workers := min(runtime.GOMAXPROCS(0), max(1, len(t.src)/4096))
	parts := make([][]int, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := len(t.src)*w/workers, len(t.src)*(w+1)/workers
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			hb := &headerBuilder{t: t}
			for i := lo; i < hi; i++ {
				id := x.stacks[i]
				ma, mf := aFr[id], fFr[id]
				if !ma || !mf {
					head := hb.header(i)
					fr := x.frames[id]
					ma = ma || matchesHead(head, fr, a)
					mf = mf || matchesHead(head, fr, f)
				}
				if ma && mf {
					parts[w] = append(parts[w], i)
				}
			}
		}(w, lo, hi)
	}
	wg.Wait()
	var out []int
	for _, p := range parts {
		out = append(out, p...)
	}
	x.mu.Lock()
	x.lastA, x.lastF, x.lastResult, x.lastValid = a, f, out, true
	x.mu.Unlock()
	return slices.Clone(out)
}

// matchesHead is matches for a query known not to occur in frames alone.
func matchesHead(head, frames, q string) bool {
	if strings.Contains(q, "\n") {
		return strings.Contains(head+frames, q)
	}
	return strings.Contains(head, q)
}

// matches reports whether q occurs in head + frames.
func matches(head, frames, q string) bool {
	if q == "" {
		return true
	}
	if strings.Contains(q, "\n") {
		return strings.Contains(head+frames, q)
	}
	return strings.Contains(head, q) || strings.Contains(frames, q)
}

// elementStack is the stack shown for element i.
func (t *Timeline) elementStack(i int) snapshot.StackID {
	src := &t.src[i]
	switch src.kind() {
	case srcAlloc, srcFree:
		return t.s.Traces[t.device].Events[src.ref].Stack
	case srcGhostBlock:
		return blockStack(t.s, &t.s.Blocks[src.ref])
	}
	return snapshot.NoStack
}

func itoa(v int64) string {
	return formatInt(v)
}

// headerBuilder writes the lower-cased header of context_for_id (the text
// before the frames) into a reused buffer, with the size texts of recent
// values cached: Search builds one per element.
type headerBuilder struct {
	t       *Timeline
	buf     []byte
	dateSec int64
	date    string
}

// header returns the lower-cased contextWith(i) without frames; the
// string aliases the buffer until the next call.
func (hb *headerBuilder) header(i int) string {
	e := hb.t.elementNoFrames(i)
	if e.Addr == "" {
		return ""
	}
	b := hb.buf[:0]
	if e.Envelope {
		b = appendLower(b, "private pool (")
		b = appendLower(b, e.PoolKey)
		b = appendLower(b, "): capacity ")
		b = units.AppendVizLower(b, e.Size)
		hb.buf = b
		return unsafeString(b)
	}
	b = append(b, "addr: "...)
	b = appendLower(b, e.Addr)
	b = append(b, ", size: "...)
	b = units.AppendVizLower(b, e.Size)
	b = append(b, " allocation, total memory used after allocation: "...)
	b = units.AppendVizLower(b, e.TotalAfter)
	b = append(b, ", compile context: "...)
	if e.CompileContext == "" {
		b = append(b, "none"...)
	} else {
		b = appendLower(b, e.CompileContext)
	}
	b = append(b, ", stream "...)
	b = strconv.AppendInt(b, int64(e.Stream), 10)
	if e.PoolKnown {
		b = append(b, ", pool_id ("...)
		b = strconv.AppendInt(b, e.PoolID[0], 10)
		b = append(b, ", "...)
		b = strconv.AppendInt(b, e.PoolID[1], 10)
		b = append(b, ')')
	} else {
		b = append(b, ", pool_id unknown"...)
	}
	b = append(b, ", timestamp "...)
	b = appendLower(b, hb.jsDate(e.TimeUS, e.HasTime))
	if e.PreTraceFree {
		b = append(b, "\nalloc not recorded, stack trace for free:"...)
	}
	if e.Ghost {
		b = appendLower(b, "\n[Ghost block] This block exists in the segment snapshot but has no alloc trace events. "+
			"It was allocated before _record_memory_history() was called, or its alloc event was evicted "+
			"from the trace ring buffer. The block is still active (not freed) at snapshot time.")
	}
	if md := userMetadataText(e.UserMetadata); md != "" {
		b = append(b, '\n')
		b = appendLower(b, md)
	}
	b = append(b, '\n')
	hb.buf = b
	return unsafeString(b)
}

// jsDate caches the last second formatted (the text has no milliseconds).
func (hb *headerBuilder) jsDate(us int64, ok bool) string {
	if !ok {
		return jsDate(0, false)
	}
	if us < 0 {
		return jsDate(us, true)
	}
	if sec := us / 1_000_000; hb.date == "" || sec != hb.dateSec {
		hb.dateSec, hb.date = sec, jsDate(us, true)
	}
	return hb.date
}

// appendLower appends strings.ToLower(s), byte by byte for ASCII.
func appendLower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return append(b, strings.ToLower(s[i:])...)
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// unsafeString views b as a string without copying; the caller must not
// keep it past the next write to b.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
