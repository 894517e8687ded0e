package replay

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/snapshot"
)

func formatAddr(segment bool, addr uint64, version int32) string {
	prefix := "b'"
	if segment {
		prefix = "s'"
	}
	return prefix + strconv.FormatUint(addr, 16) + "_" + strconv.Itoa(int(version))
}

var omitFunctions = []string{
	"unwind::unwind",
	"CapturedTraceback::gather",
	"gather_with_cpp",
	"_start",
	"__libc_start_main",
	"PyEval_",
	"PyObject_",
	"PyFunction_",
}

var omitFilenames = []string{
	"core/boxing",
	"/Register",
	"/Redispatch",
	"pythonrun.c",
	"Modules/main.c",
	"Objects/call.c",
	"Objects/methodobject.c",
	"pycore_ceval.h",
	"ceval.c",
	"cpython/abstract.h",
}

// keepFrame is memory_viz's frameFilter.
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

// noFramesText is what memory_viz prints for an element without frames.
const noFramesText = "This block has no frames. Potential causes:\n" +
	"1) This block was allocated before _record_memory_history was enabled.\n" +
	"2) The context or stacks passed to _record_memory_history does not include this block. Consider changing context to 'state', 'alloc', or 'all', or changing stacks to 'all'.\n" +
	"3) This event occurred during backward, which has no python frames, and memory history did not include C++ frames. Use stacks='all' to record both C++ and python frames.\n" +
	"4) This block was reconstructed from the allocator's segment snapshot (not from a trace event). The snapshot records which blocks exist at the moment _snapshot() is called, but does not carry stack frames. This typically happens for blocks that were allocated before tracing started and never freed, or for inactive blocks in private memory pools.\n" +
	"5) The original alloc event was evicted from the trace ring buffer (older entries are overwritten when the buffer is full). Increase the max_entries argument to _record_memory_history to retain more events."

func formatFrames(s *snapshot.Snapshot, stack snapshot.StackID) []string {
	ids := s.StackFrames(stack)
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(s.Frames) {
			continue
		}
		f := &s.Frames[id]
		if !keepFrame(f) {
			continue
		}
		out = append(out, frameString(s, f))
	}
	return elideRepeats(out)
}

// frameString formats one frame, with memory_viz's FX annotations when the
// frame carries fx_node_* keys.
func frameString(s *snapshot.Snapshot, f *snapshot.Frame) string {
	str := f.Filename + ":" + strconv.FormatInt(f.Line, 10) + ":" + f.Name
	if f.Extra <= 0 || int(f.Extra) >= len(s.Extras) {
		return str
	}
	var op, name, target, orig string
	for _, kv := range s.Extras[f.Extra] {
		v := jsonString(kv.JSON)
		switch kv.Key {
		case "fx_node_op":
			op = v
		case "fx_node_name":
			name = v
		case "fx_node_target":
			target = v
		case "fx_original_trace":
			orig = v
		}
	}
	if op != "" || name != "" || target != "" {
		var parts []string
		if name != "" {
			parts = append(parts, "node="+name)
		}
		if op != "" {
			parts = append(parts, "op="+op)
		}
		if target != "" {
			parts = append(parts, "target="+target)
		}
		str += "\n    >> FX: " + strings.Join(parts, ", ")
	}
	if orig != "" {
		str += "\n    >> Original Model Code:"
		for _, line := range strings.Split(strings.TrimSpace(orig), "\n") {
			str += "\n       " + line
		}
	}
	return str
}

// jsonString decodes a JSON string value; other JSON is returned as is.
func jsonString(j string) string {
	if len(j) >= 2 && j[0] == '"' {
		if v, err := strconv.Unquote(j); err == nil {
			return v
		}
		// JSON escapes that Go's Unquote rejects (\/) are rare; keep raw.
		return j[1 : len(j)-1]
	}
	if j == "null" {
		return ""
	}
	return j
}

// elideRepeats is memory_viz's elideRepeats.
func elideRepeats(frames []string) []string {
	out := frames[:0:0]
	for i := 0; i < len(frames); {
		j := i + 1
		for j < len(frames) && frames[j] == frames[i] {
			j++
		}
		switch j - i {
		case 1:
			out = append(out, frames[i])
		case 2:
			out = append(out, frames[i], frames[i])
		default:
			out = append(out, frames[i], fmt.Sprintf("<repeats %d times>", j-i-1))
		}
		i = j
	}
	return out
}

// framesText is format_frames: the joined frames or the no-frames text.
func framesText(s *snapshot.Snapshot, stack snapshot.StackID) string {
	if len(s.StackFrames(stack)) == 0 {
		return noFramesText
	}
	return strings.Join(formatFrames(s, stack), "\n")
}

// userMetadataText is format_user_metadata for a string value.
func userMetadataText(md string) string {
	if md == "" {
		return ""
	}
	return "User Metadata:\n  " + md
}

func formatInt(v int64) string { return strconv.FormatInt(v, 10) }
