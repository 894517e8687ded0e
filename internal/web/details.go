package web

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

// formatSize is memory_viz's formatSize: "1.5KiB (1536 bytes)".
func formatSize(n float64, showBytes bool) string {
	orig := n
	for _, u := range []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"} {
		if math.Abs(n) < 1024 {
			if showBytes {
				return fmt.Sprintf("%.1f%sB (%.0f bytes)", n, u, orig)
			}
			return fmt.Sprintf("%.1f%sB", n, u)
		}
		n /= 1024
	}
	return fmt.Sprintf("%.1fYiB", n)
}

// formatAddr is memory_viz's formatAddr: b'7f4c00000_3 or s'abc_0.
func formatAddr(addr uint64, version int32, segment bool) string {
	p := "b'"
	if segment {
		p = "s'"
	}
	return fmt.Sprintf("%s%x_%d", p, addr, version)
}

var omitFunctions = []string{"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
	"__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"}
var omitFilenames = []string{"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
	"Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c", "cpython/abstract.h"}

func keepFrame(f *snapshot.Frame) bool {
	for _, o := range omitFunctions {
		if strings.Contains(f.Name, o) {
			return false
		}
	}
	for _, o := range omitFilenames {
		if strings.Contains(f.Filename, o) {
			return false
		}
	}
	return true
}

// elideRepeats collapses 3+ equal consecutive lines into "f, <repeats N times>".
func elideRepeats(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j] == lines[i] {
			j++
		}
		switch j - i {
		case 1:
			out = append(out, lines[i])
		case 2:
			out = append(out, lines[i], lines[i])
		default:
			out = append(out, lines[i], fmt.Sprintf("<repeats %d times>", j-i-1))
		}
		i = j
	}
	return out
}

const noFramesText = "This block has no frames. Potential causes:\n" +
	"1) This block was allocated before _record_memory_history was enabled.\n" +
	"2) The context or stacks passed to _record_memory_history does not include this block. Consider changing context to 'state', 'alloc', or 'all', or changing stacks to 'all'.\n" +
	"3) This event occurred during backward, which has no python frames, and memory history did not include C++ frames. Use stacks='all' to record both C++ and python frames.\n" +
	"4) This block was reconstructed from the allocator's segment snapshot (not from a trace event); such blocks carry no alloc-time stack.\n" +
	"5) The original alloc event was evicted from the trace ring buffer (older entries are overwritten when the buffer is full). Increase the max_entries argument to _record_memory_history to retain more events."

// stackText renders a stack as memory_viz does: filtered frames, innermost
// first, "filename:line:name", repeats elided.
func stackText(s *snapshot.Snapshot, id snapshot.StackID) string {
	ids := s.StackFrames(id)
	if len(ids) == 0 {
		return noFramesText
	}
	lines := make([]string, 0, len(ids))
	for _, fid := range ids {
		if int(fid) < 0 || int(fid) >= len(s.Frames) {
			continue
		}
		f := &s.Frames[fid]
		if !keepFrame(f) {
			continue
		}
		line := fmt.Sprintf("%s:%d:%s", f.Filename, f.Line, f.Name)
		if f.Extra > 0 && int(f.Extra) < len(s.Extras) {
			line += fxText(s.Extras[f.Extra])
		}
		lines = append(lines, line)
	}
	return strings.Join(elideRepeats(lines), "\n")
}

// fxText renders augment_with_fx_traces keys like memory_viz.
func fxText(kv snapshot.KeyValues) string {
	get := func(k string) string {
		for _, x := range kv {
			if x.Key == k {
				v := x.JSON
				if len(v) >= 2 && v[0] == '"' {
					var s string
					if _, err := fmt.Sscanf(v, "%q", &s); err == nil {
						return s
					}
					return strings.Trim(v, "\"")
				}
				return v
			}
		}
		return ""
	}
	var parts []string
	if v := get("fx_node_name"); v != "" {
		parts = append(parts, "node="+v)
	}
	if v := get("fx_node_op"); v != "" {
		parts = append(parts, "op="+v)
	}
	if v := get("fx_node_target"); v != "" {
		parts = append(parts, "target="+v)
	}
	out := ""
	if len(parts) > 0 {
		out += "\n    >> FX: " + strings.Join(parts, ", ")
	}
	if v := strings.TrimSpace(get("fx_original_trace")); v != "" {
		out += "\n    >> Original Model Code:"
		for _, l := range strings.Split(v, "\n") {
			out += "\n       " + l
		}
	}
	return out
}

func formatTime(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05.000000 UTC")
}

// elementHead is the first part of memory_viz's context_for_id text (without
// the stack), so that the stack text can be shared between elements.
func elementHead(s *snapshot.Snapshot, e *element) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Addr: %s, Size: %s allocation, Total memory used after allocation: %s",
		formatAddr(e.Addr, e.Version, e.Segment), formatSize(float64(e.Size), true), formatSize(e.MaxAfter, true))
	ctx := s.String(e.Ctx)
	if ctx == "" {
		ctx = "None"
	}
	fmt.Fprintf(&b, ", Compile context: %s, stream %d", ctx, e.Stream)
	if e.HasPool {
		fmt.Fprintf(&b, ", pool_id (%d, %d)", e.Pool[0], e.Pool[1])
	} else {
		b.WriteString(", pool_id unknown")
	}
	if e.HasTime {
		fmt.Fprintf(&b, ", timestamp %s", formatTime(e.TimeUS))
	}
	if e.Kind == kindFreeOnly {
		b.WriteString("\nalloc not recorded, stack trace for free:")
	}
	if e.Kind == kindGhost {
		b.WriteString("\n[Ghost block] This block exists in the segment snapshot but has no alloc trace events. " +
			"It was allocated before _record_memory_history() was called, or its alloc event was evicted " +
			"from the trace ring buffer. The block is still active (not freed) at snapshot time.")
	}
	if m := s.String(e.Meta); m != "" {
		fmt.Fprintf(&b, "\nUser Metadata:\n  %s", m)
	}
	return b.String()
}

// eventText is memory_viz's formatEvent for the state-history list.
func eventText(s *snapshot.Snapshot, e *snapshot.Event) string {
	a := e.VizAction()
	switch a {
	case snapshot.ActionOOM:
		return fmt.Sprintf("OOM (requested %s, Device has %s memory free)", formatSize(float64(e.Size), true), formatSize(float64(e.Addr), true))
	case snapshot.ActionSnapshot:
		return "snapshot"
	}
	return fmt.Sprintf("%-14s %-18s %s (stream %d)", a.String(), formatAddr(e.Addr, e.Version, a.IsSegmentAction()),
		formatSize(float64(e.Size), true), e.Stream)
}
