package replay

import (
	"syscall"
	"unsafe"
)

// releasePages drops the resident pages wholly inside b (MADV_DONTNEED:
// private anonymous pages read as zeros after it).
func releasePages(b []byte) {
	const page = 4096
	lo := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (page - 1)) // to the first page boundary
	if lo >= len(b) {
		return
	}
	b = b[lo:]
	b = b[:len(b)&^(page-1)]
	if len(b) == 0 {
		return
	}
	_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
}
