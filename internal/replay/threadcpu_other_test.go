//go:build !linux

package replay

import "time"

// threadCPU is 0 where the thread's CPU time is not read (Linux only).
func threadCPU() time.Duration { return 0 }
