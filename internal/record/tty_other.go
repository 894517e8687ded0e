//go:build !(linux || darwin)

package record

// terminalSent: without process groups to compare (Windows), every signal
// is forwarded.
func terminalSent() bool { return false }
