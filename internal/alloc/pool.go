package alloc

import "sort"

// block is c10's Block: a contiguous range of a segment, free or in use.
type block struct {
	stream    uint64 // raw cudaStream_t, compared as an unsigned pointer
	size      uint64
	requested uint64 // orig_size of the last malloc that used the block
	ptr       uint64
	pool      *blockPool
	prev      *block // neighbours in the same segment
	next      *block
	allocated bool
	mapped    bool // false only for unmapped ranges of expandable segments
	// eventCount > 0: freed but waiting on stream-use events
	// (active_pending_free).
	eventCount int
	// streamUses: recorded uses on other streams; a free then waits for
	// FreeCompleted.
	streamUses bool
	gcBase     int64 // pool.gcCalls when inserted (gc_count_base)
	exp        *expandableSegment
	// segStart marks the first block of a cudaMalloc'd segment (or the
	// block that holds the segment's head); used for reporting only.
	seq uint64 // allocation sequence number of the block's last malloc
}

func (b *block) isSplit() bool { return b.prev != nil || b.next != nil }

// blockPool is c10's BlockPool: free blocks ordered by (stream, size,
// address) and unmapped expandable ranges ordered by (stream, address).
type blockPool struct {
	blocks   sizeSet
	unmapped addrSet
	small    bool
	gcCalls  int64 // get_free_blocks_call_count
}

func (p *blockPool) insert(b *block) {
	b.gcBase = p.gcCalls
	p.blocks.insert(b)
}

// gcCount is Block::gc_count.
func (b *block) gcCount() int64 { return b.pool.gcCalls - b.gcBase }

// sizeSet is a sorted slice ordered like BlockComparatorSize. Pools hold
// at most a few thousand blocks, where a slice beats a tree.
type sizeSet struct{ items []*block }

func sizeLess(as, asz, ap, bs, bsz, bp uint64) bool {
	if as != bs {
		return as < bs
	}
	if asz != bsz {
		return asz < bsz
	}
	return ap < bp
}

// lowerBound returns the index of the first block not less than the key.
func (s *sizeSet) lowerBound(stream, size, ptr uint64) int {
	return sort.Search(len(s.items), func(i int) bool {
		b := s.items[i]
		return !sizeLess(b.stream, b.size, b.ptr, stream, size, ptr)
	})
}

func (s *sizeSet) insert(b *block) {
	i := s.lowerBound(b.stream, b.size, b.ptr)
	s.items = append(s.items, nil)
	copy(s.items[i+1:], s.items[i:])
	s.items[i] = b
}

func (s *sizeSet) eraseAt(i int) {
	copy(s.items[i:], s.items[i+1:])
	s.items[len(s.items)-1] = nil
	s.items = s.items[:len(s.items)-1]
}

// erase removes b (matched by identity) and reports whether it was there.
func (s *sizeSet) erase(b *block) bool {
	i := s.lowerBound(b.stream, b.size, b.ptr)
	if i < len(s.items) && s.items[i] == b {
		s.eraseAt(i)
		return true
	}
	return false
}

// addrSet is a sorted slice ordered like BlockComparatorAddress.
type addrSet struct{ items []*block }

func (s *addrSet) lowerBound(stream, ptr uint64) int {
	return sort.Search(len(s.items), func(i int) bool {
		b := s.items[i]
		if b.stream != stream {
			return b.stream > stream
		}
		return b.ptr >= ptr
	})
}

func (s *addrSet) insert(b *block) {
	i := s.lowerBound(b.stream, b.ptr)
	s.items = append(s.items, nil)
	copy(s.items[i+1:], s.items[i:])
	s.items[i] = b
}

func (s *addrSet) erase(b *block) bool {
	i := s.lowerBound(b.stream, b.ptr)
	if i < len(s.items) && s.items[i] == b {
		copy(s.items[i:], s.items[i+1:])
		s.items[len(s.items)-1] = nil
		s.items = s.items[:len(s.items)-1]
		return true
	}
	return false
}

// expandableSegment is c10's ExpandableSegment: a reserved virtual range
// whose pages are mapped on demand.
type expandableSegment struct {
	base     uint64
	pageSize uint64
	maxPages uint64
	mapped   []bool // per page; trimmed of trailing unmapped pages
	stream   uint64
}

func (e *expandableSegment) size() uint64 { return e.maxPages * e.pageSize }

// pagesLeft / pagesRight are segmentLeft / segmentRight.
func (e *expandableSegment) pageLeft(p uint64) uint64 { return (p - e.base) / e.pageSize }
func (e *expandableSegment) pageRight(p uint64) uint64 {
	return (p - e.base + e.pageSize - 1) / e.pageSize
}

func (e *expandableSegment) trim() {
	for len(e.mapped) > 0 && !e.mapped[len(e.mapped)-1] {
		e.mapped = e.mapped[:len(e.mapped)-1]
	}
}

// vaSpace hands out deterministic fake device addresses for cudaMalloc and
// address reservations: lowest-address first fit, 2 MiB aligned, like a
// fresh CUDA context tends to do.
type vaSpace struct {
	base  uint64
	spans []span // in use, sorted by start
}

type span struct{ start, end uint64 }

const vaAlign = 2 * MiB

func (v *vaSpace) overlaps(start, size uint64) bool {
	end := start + size
	i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].end > start })
	return i < len(v.spans) && v.spans[i].start < end
}

func (v *vaSpace) take(start, size uint64) {
	i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].start > start })
	v.spans = append(v.spans, span{})
	copy(v.spans[i+1:], v.spans[i:])
	v.spans[i] = span{start, start + size}
}

func (v *vaSpace) alloc(size uint64) uint64 {
	size = (size + vaAlign - 1) / vaAlign * vaAlign
	at := v.base
	for _, s := range v.spans {
		if s.start >= at+size {
			break
		}
		if s.end > at {
			at = (s.end + vaAlign - 1) / vaAlign * vaAlign
		}
	}
	v.take(at, size)
	return at
}

// resize moves the end of the span that starts at start.
func (v *vaSpace) resize(start, end uint64) {
	i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].start >= start })
	if i < len(v.spans) && v.spans[i].start == start {
		v.spans[i].end = end
	}
}

func (v *vaSpace) free(start uint64) {
	i := sort.Search(len(v.spans), func(i int) bool { return v.spans[i].start >= start })
	if i < len(v.spans) && v.spans[i].start == start {
		v.spans = append(v.spans[:i], v.spans[i+1:]...)
	}
}
