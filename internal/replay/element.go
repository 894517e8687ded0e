package replay

import (
	"strings"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

func (t *Timeline) element(i int) ElementInfo {
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
	info.Frames = formatFrames(s, info.Stack)
	return info
}

// context is memory_viz's context_for_id text.
func (t *Timeline) context(i int) string {
	e := t.element(i)
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
	b.WriteString("\n" + framesText(t.s, e.Stack))
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
	var out []int
	for i := range t.src {
		text := strings.ToLower(t.context(i))
		if (a == "" || strings.Contains(text, a)) && (f == "" || strings.Contains(text, f)) {
			out = append(out, i)
		}
	}
	return out
}

func itoa(v int64) string {
	return formatInt(v)
}
