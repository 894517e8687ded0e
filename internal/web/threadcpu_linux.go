package web

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU is the calling thread's user+system CPU time (the caller
// locks its goroutine to the thread): what a request cost, which other
// processes on a busy machine do not inflate as they do its wall time.
func threadCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
