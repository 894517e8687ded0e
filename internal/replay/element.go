package replay

import (
	"runtime"
	"strings"
	"sync"
	"time"

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
		FreeEvent:  int(src.free),
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
	switch src.kind {
	case srcAlloc, srcFree:
		e := &s.Traces[t.device].Events[src.ref]
		info.Address, info.Version, info.Stream, info.Stack = e.Addr, e.Version, e.Stream, e.Stack
		info.TimeUS, info.HasTime = e.TimeUS, e.Flags&snapshot.FlagHasTime != 0
		info.CompileContext = s.String(e.CompileContext)
		info.UserMetadata = s.String(e.UserMetadata)
		if src.kind == srcAlloc {
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
		return "Private Pool (" + e.PoolKey + "): capacity " + FormatSize(e.Size)
	}
	var b strings.Builder
	b.WriteString("Addr: " + e.Addr)
	b.WriteString(", Size: " + FormatSize(e.Size) + " allocation")
	b.WriteString(", Total memory used after allocation: " + FormatSize(e.TotalAfter))
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
// would in UTC ("Invalid Date" without a time, as memory_viz shows).
func jsDate(us int64, ok bool) string {
	if !ok {
		return "Invalid Date"
	}
	return time.UnixMilli(us / 1000).UTC().Format("Mon Jan 02 2006 15:04:05 GMT+0000 (Coordinated Universal Time)")
}

func (t *Timeline) search(addrQuery, frameQuery string) []int {
	a := strings.ToLower(strings.TrimSpace(addrQuery))
	f := strings.ToLower(strings.TrimSpace(frameQuery))
	if a == "" && f == "" {
		return nil
	}
	// Stacks are shared by many elements: format and lower-case each once
	// per worker. The header and the frames are joined by a newline, which
	// a trimmed query without one cannot span.
	workers := min(runtime.GOMAXPROCS(0), max(1, len(t.src)/4096))
	parts := make([][]int, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := len(t.src)*w/workers, len(t.src)*(w+1)/workers
		wg.Add(1)
		go func(w, lo, hi int) {
			defer wg.Done()
			cache := map[snapshot.StackID]string{}
			noFrames := func(snapshot.StackID) string { return "" }
			for i := lo; i < hi; i++ {
				head := strings.ToLower(t.contextWith(i, noFrames))
				id := t.elementStack(i)
				fr, ok := cache[id]
				if !ok {
					fr = strings.ToLower(framesText(t.s, id))
					cache[id] = fr
				}
				if matches(head, fr, a) && matches(head, fr, f) {
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
	return out
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
	switch src.kind {
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
