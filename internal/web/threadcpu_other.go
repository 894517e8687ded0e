//go:build !linux

package web

import "time"

// threadCPU is unknown where a thread's CPU time cannot be read on its
// own: the window answers then give their wall time only.
func threadCPU() (time.Duration, bool) { return 0, false }
