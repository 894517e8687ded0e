//go:build !(linux || darwin)

package record

// terminalSent: without process groups to compare (Windows), every signal
// is forwarded.
var terminalSent = func() bool { return false }
