package web

import "golang.org/x/sys/unix"

// lowerThreadPriority sets the calling thread's nice value (Linux
// schedules threads one by one, so this is the thread's own).
var lowerThreadPriority = func(nice int) { _ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice) }
