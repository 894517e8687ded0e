package snapshot

import (
	"runtime"
	"syscall"
	"unsafe"
)

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14+): fault pages in
// as if written, without writing them.
const madvPopulateWrite = 23

// prefaulter faults in the pages of a large, freshly allocated slice a few
// MiB ahead of the goroutine filling it, on another goroutine: the kernel's
// page-fault work (about a sixth of decoding a big snapshot) then runs on
// the second core. It only ever asks the kernel to map pages; it never
// reads or writes the slice.
type prefaulter struct {
	reached chan int // bytes filled so far
	done    chan struct{}
}

// prefaultAhead is how far ahead of the writer pages are faulted in. It
// is also what the decode leaves resident of the reserve it did not
// need (pages faulted in are resident, used or not): 16 MiB were 5% of
// gpumem info's peak memory on a 264 MB snapshot.
const prefaultAhead = 4 << 20

// startPrefault starts faulting in s's backing array (capacity, not just
// length) as advance reports progress; nil when s is too small to bother.
func startPrefault[T any](s []T) *prefaulter {
	var zero T
	size := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if size < 16<<20 {
		return nil
	}
	base := unsafe.Pointer(unsafe.SliceData(s[:1]))
	p := &prefaulter{reached: make(chan int, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		mapped := 0
		for filled := range p.reached {
			want := min(filled+prefaultAhead, int(size))
			for mapped < want {
				n := min(2<<20, int(size)-mapped)
				b := unsafe.Slice((*byte)(unsafe.Add(base, mapped)), n)
				if err := syscall.Madvise(b, madvPopulateWrite); err != nil {
					// Old kernel or no such advice: let the writer fault.
					for range p.reached {
					}
					return
				}
				mapped += n
			}
		}
		runtime.KeepAlive(s) // the array stays while base is in use
	}()
	p.reached <- 0
	return p
}

// advance reports that the first bytes bytes are filled; it never blocks.
func (p *prefaulter) advance(bytes int) {
	if p == nil {
		return
	}
	select {
	case p.reached <- bytes:
	default: // the helper is busy; it gets a later report
	}
}

// stop ends the helper and waits for it.
func (p *prefaulter) stop() {
	if p == nil {
		return
	}
	close(p.reached)
	<-p.done
}
