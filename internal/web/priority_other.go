//go:build !linux

package web

// lowerThreadPriority is nil where a thread's priority cannot be set on
// its own: background jobs then run at the normal priority.
var lowerThreadPriority func(nice int)
