package snapshot

import (
	"runtime"
	"syscall"
	"time"
)

// With GPUMEM_DEBUG_SPLIT set, the decoder and the splitter print when
// they reach each phase, in their own thread's CPU time (which a busy
// machine does not inflate, unlike wall time): how splitFrac balances
// the two cores.

var debugT0 time.Time

// debugLock keeps the calling goroutine on its thread, so that the
// thread's CPU time is the goroutine's.
func debugLock() {
	runtime.LockOSThread()
	debugT0 = time.Now()
}

func debugMark(what string) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	println("split:", what, "at", cpu.Milliseconds(), "ms thread CPU,", time.Since(debugT0).Milliseconds(), "ms wall")
}
