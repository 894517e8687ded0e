package export

import (
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// frameLabel is "func (file.py:LINE)".
func frameLabel(f *snapshot.Frame) string {
	return f.Name + " (" + baseName(f.Filename) + ":" + strconv.FormatInt(f.Line, 10) + ")"
}

// baseName is the file name without its directory (_memory_viz.py's
// fname.split('/')[-1]).
func baseName(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// userFrames returns a stack's frames, innermost first, as memory_viz
// filters them; when the stack has Python frames, only those (C++ frames
// of the allocator and dispatcher say little about who allocated).
func userFrames(s *snapshot.Snapshot, stack snapshot.StackID) []*snapshot.Frame {
	ids := s.StackFrames(stack)
	out := make([]*snapshot.Frame, 0, len(ids))
	py := false
	for _, id := range ids {
		if id < 0 || int(id) >= len(s.Frames) {
			continue
		}
		f := &s.Frames[id]
		if replay.KeepFrame(f) {
			out = append(out, f)
			py = py || strings.HasSuffix(f.Filename, ".py")
		}
	}
	if py {
		n := 0
		for _, f := range out {
			if strings.HasSuffix(f.Filename, ".py") {
				out[n] = f
				n++
			}
		}
		out = out[:n]
	}
	return out
}
