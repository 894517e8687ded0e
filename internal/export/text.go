package export

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// appendJSONString appends v as a JSON string literal (invalid UTF-8
// becomes U+FFFD, as encoding/json does).
func appendJSONString(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, v[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

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
