package analysis

import (
	"path"
	"strings"
)

// NoStack is how a site without frames is printed: memory allocated before
// the recording began, or by a path that records no stack.
const NoStack = "(no stack recorded)"

// SiteString prints an allocation site — frames as FrameString spells
// them, innermost first — the one way every command shows a site:
// "log_metrics (train.py:141) < train_step (train.py:158)", "<" reading
// "called from". A Python frame is "function (file.py:LINE)" with the
// file's base name (the frames in --json keep the full path); a C++ frame
// is its qualified function name without return type or arguments, and
// its file only when one was recorded.
func SiteString(frames []string) string {
	if len(frames) == 0 {
		return NoStack
	}
	parts := make([]string, len(frames))
	for i, f := range frames {
		parts[i] = shortFrame(f)
	}
	return strings.Join(parts, " < ")
}

// shortFrame turns "path/file.py:LINE:name" into "name (file.py:LINE)".
func shortFrame(f string) string {
	file, line, name, ok := splitFrame(f)
	if !ok {
		return f
	}
	base := path.Base(strings.ReplaceAll(file, `\`, "/"))
	if strings.HasSuffix(file, ".py") {
		return name + " (" + base + ":" + line + ")"
	}
	name = cppName(name)
	switch {
	case file == "" || file == "??":
		return name
	case line == "0":
		return name + " (" + base + ")"
	}
	return name + " (" + base + ":" + line + ")"
}

// splitFrame splits "file:LINE:name" at the first ":DIGITS:" (a Windows
// path's drive letter and a C++ name's "::" have no digits between).
func splitFrame(f string) (file, line, name string, ok bool) {
	for i := 0; i < len(f); i++ {
		if f[i] != ':' {
			continue
		}
		j := i + 1
		for j < len(f) && f[j] >= '0' && f[j] <= '9' {
			j++
		}
		if j > i+1 && j < len(f) && f[j] == ':' {
			return f[:i], f[i+1 : j], f[j+1:], true
		}
	}
	return "", "", "", false
}

// cppName shortens a C++ signature to its qualified name: no argument
// list, no return type, and of a long name only the last two parts
// ("BmmBackward0::apply" for torch::autograd::generated::BmmBackward0::apply).
func cppName(name string) string {
	name = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(name), " const"))
	if strings.HasSuffix(name, ")") { // drop the argument list, matching parentheses from the end
		depth := 0
		for i := len(name) - 1; i >= 0; i-- {
			switch name[i] {
			case ')':
				depth++
			case '(':
				depth--
			}
			if depth == 0 {
				name = name[:i]
				break
			}
		}
	}
	depth := 0 // the return type ends at the last space outside template brackets
	for i := len(name) - 1; i >= 0; i-- {
		switch name[i] {
		case '>':
			depth++
		case '<':
			depth--
		case ' ':
			if depth == 0 && !strings.HasSuffix(name[:i], "operator") {
				name = name[i+1:]
				i = -1
			}
		}
	}
	if parts := strings.Split(name, "::"); len(name) > 40 && len(parts) > 2 {
		name = strings.Join(parts[len(parts)-2:], "::")
	}
	return name
}
