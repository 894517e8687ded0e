package replay

import "unsafe"

// prefetch asks the processor to bring p's cache line in, without
// waiting for it (PREFETCHT0): a load would hold the instructions after
// it until the line came, and the Go compiler emits no prefetch.
//
//go:noescape
func prefetch(p unsafe.Pointer)
