package snapshot

import (
	"fmt"
	"os"
	"runtime/debug"
	"syscall"
)

// decodeMapped decodes a regular file that holds an uncompressed pickle
// straight from a read-only mapping of it: read(2) would copy every byte
// out of the page cache first, a tenth of the decode time. ok is false
// when the file is not that (compressed, JSON, too big for a mapping) or
// cannot be mapped; the caller then reads it as a stream.
//
// Pages the decoder has gone past are unmapped as it goes (the data stays
// in the page cache), so the file adds one or two windows to the resident
// set, not its size. The decoder copies every string it keeps, so
// nothing refers to the mapping once it is unmapped.
func decodeMapped(f *os.File, name string, size int64, opt *Options) (s *Snapshot, ok bool, err error) {
	if size < 64<<10 || int64(int(size)) != size || (opt.MaxBytes > 0 && size > opt.MaxBytes) {
		return nil, false, nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false, nil
	}
	defer syscall.Munmap(data)
	// Another process may truncate the file while it is mapped; reading
	// past the new end faults. Make that an error instead of a crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			if _, fault := p.(interface{ Addr() uintptr }); !fault {
				panic(p)
			}
			s, ok, err = nil, true, decodeError(name, fmt.Errorf("the file changed while it was read (%v)", p))
		}
	}()
	if sniff(data[:512]) != "pickle" {
		return nil, false, nil
	}
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	released := 0
	s, err = decodePickleBytes(data, name, func(off int64) {
		if opt.Progress != nil {
			opt.Progress(off, size)
		}
		if end := int(off)&^(releaseEvery-1) - releaseEvery; end > released {
			_ = syscall.Madvise(data[released:end], syscall.MADV_DONTNEED)
			released = end
		}
	}, func(lo, hi int) {
		_ = syscall.Madvise(data[lo:hi], syscall.MADV_DONTNEED)
	}, opt)
	if err == nil && opt.Progress != nil {
		opt.Progress(size, size)
	}
	return s, true, err
}
