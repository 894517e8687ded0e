package replay

import "unsafe"

// releaseRoom hands the whole pages of s's unwritten room (between its
// length and its capacity) back to the operating system, where it can:
// they read as zeros again, and fault in anew if ever written. s holds no
// pointers.
//
// The fed layout reserves its columns for every entry the decoder
// expects (EventFeed.Expected: half of them as elements, a third more
// than the 1 GB tile's), so that they never move while the trace is
// decoded. Room that the Go allocator zeroed as it handed out recycled
// memory is resident although never written: 41 MiB of the 1 GB tile's
// start, end, off0 and slid columns, for the server's whole life.
func releaseRoom[T any](s []T) {
	var zero T
	size := uintptr(len(s)) * unsafe.Sizeof(zero)
	room := uintptr(cap(s)-len(s)) * unsafe.Sizeof(zero)
	if room < 1<<20 {
		return // a few pages: not worth a system call
	}
	end := unsafe.Add(unsafe.Pointer(unsafe.SliceData(s[:cap(s)])), size)
	releasePages(unsafe.Slice((*byte)(end), room))
}
