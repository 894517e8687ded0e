//go:build !linux

package replay

// releasePages does nothing where madvise's MADV_DONTNEED is not at hand.
func releasePages(b []byte) {}
