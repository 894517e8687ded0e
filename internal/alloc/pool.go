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
	// rec is the recorded address of the request a replay served with
	// this block (it may differ from ptr when the model diverges).
	rec uint64
	// segStart marks the first block of a cudaMalloc'd segment (or the
	// block that holds the segment's head); used for reporting only.
	seq    uint64 // allocation sequence number of the block's last malloc
	liveAt int    // index in Allocator.live while allocated or pending
}

func (b *block) isSplit() bool { return b.prev != nil || b.next != nil }

// blockPool is c10's BlockPool: free blocks ordered by (stream, size,
// address) and unmapped expandable ranges ordered by (stream, address).
type blockPool struct {
	blocks   sizeSet
	unmapped addrSet
	small    bool
	gcCalls  int64 // get_free_blocks_call_count
	// releasable holds, in the same order, the free blocks an
	// empty_cache or GC looks at: entire segments and blocks of
	// expandable segments. A block's neighbours stay nil or not while it
	// is free, so it is in both sets or only in blocks throughout, and an
	// empty_cache on a pool of a million split blocks costs nothing.
	releasable sizeSet
}

func (b *block) releasable() bool { return b.exp != nil || (b.prev == nil && b.next == nil) }

func (p *blockPool) insert(b *block) {
	b.gcBase = p.gcCalls
	p.blocks.insert(b)
	if b.releasable() {
		p.releasable.insert(b)
	}
}

// erase removes a free block from the pool.
func (p *blockPool) erase(b *block) bool {
	if b.releasable() {
		p.releasable.erase(b)
	}
	return p.blocks.erase(b)
}

// eraseAt removes the free block at position i of blocks.
func (p *blockPool) eraseAt(i pos) {
	if b := p.blocks.at(i); b.releasable() {
		p.releasable.erase(b)
	}
	p.blocks.eraseAt(i)
}

// gcCount is Block::gc_count.
func (b *block) gcCount() int64 { return b.pool.gcCalls - b.gcBase }

// chunked is a sorted sequence kept in chunks of at most maxChunk
// elements: an insert or erase moves at most one chunk, so pools and
// address maps of a million entries (tiled traces) stay fast, and small
// ones are a single short slice.
type chunked[T any] struct {
	chunks [][]T
	// lasts holds each chunk's last element: a search reads this one
	// array, not the end of every chunk it passes (a cache miss each in a
	// pool of a million blocks).
	lasts []T
	n     int
}

const maxChunk = 128

// pos is a position in a chunked sequence: chunk c, index i; c ==
// len(chunks) is the end.
type pos struct{ c, i int }

func (s *chunked[T]) len() int         { return s.n }
func (s *chunked[T]) end() pos         { return pos{len(s.chunks), 0} }
func (s *chunked[T]) isEnd(p pos) bool { return p.c >= len(s.chunks) }
func (s *chunked[T]) at(p pos) T       { return s.chunks[p.c][p.i] }

// setAt replaces the element at p (keeping the order is the caller's job).
func (s *chunked[T]) setAt(p pos, v T) {
	s.chunks[p.c][p.i] = v
	s.lasts[p.c] = s.chunks[p.c][len(s.chunks[p.c])-1]
}

func (s *chunked[T]) next(p pos) pos {
	if p.i+1 < len(s.chunks[p.c]) {
		return pos{p.c, p.i + 1}
	}
	return pos{p.c + 1, 0}
}

// prev returns the position before p, or false at the beginning.
func (s *chunked[T]) prev(p pos) (pos, bool) {
	if p.i > 0 {
		return pos{p.c, p.i - 1}, true
	}
	if p.c > 0 {
		return pos{p.c - 1, len(s.chunks[p.c-1]) - 1}, true
	}
	return p, false
}

// search returns the first position whose element satisfies ok, which
// must be false then true along the sequence (like sort.Search).
func (s *chunked[T]) search(ok func(T) bool) pos {
	c := sort.Search(len(s.lasts), func(c int) bool { return ok(s.lasts[c]) })
	if c == len(s.chunks) {
		return s.end()
	}
	ch := s.chunks[c]
	return pos{c, sort.Search(len(ch), func(i int) bool { return ok(ch[i]) })}
}

// newChunk has room for the one element over maxChunk that makes a
// chunk split, so that no append reallocates it.
func newChunk[T any]() []T { return make([]T, 0, maxChunk+1) }

// insertAt puts v before position p (p from search keeps the order).
func (s *chunked[T]) insertAt(p pos, v T) {
	s.n++
	if p.c == len(s.chunks) {
		if p.c == 0 || len(s.chunks[p.c-1]) >= maxChunk {
			s.chunks = append(s.chunks, newChunk[T]())
			s.lasts = append(s.lasts, v)
			p = pos{p.c, 0}
		} else {
			p = pos{p.c - 1, len(s.chunks[p.c-1])}
		}
	}
	var zero T
	ch := append(s.chunks[p.c], zero)
	copy(ch[p.i+1:], ch[p.i:])
	ch[p.i] = v
	if len(ch) > maxChunk {
		// Split in halves; the upper half gets its own array.
		half := len(ch) / 2
		upper := append(newChunk[T](), ch[half:]...)
		clear(ch[half:])
		ch = ch[:half]
		s.chunks = append(s.chunks, nil)
		copy(s.chunks[p.c+2:], s.chunks[p.c+1:])
		s.chunks[p.c+1] = upper
		s.lasts = append(s.lasts, upper[len(upper)-1])
		copy(s.lasts[p.c+2:], s.lasts[p.c+1:])
		s.lasts[p.c+1] = upper[len(upper)-1]
	}
	s.chunks[p.c] = ch
	s.lasts[p.c] = ch[len(ch)-1]
}

// eraseAt removes the element at p; positions before p stay valid.
func (s *chunked[T]) eraseAt(p pos) {
	s.n--
	ch := s.chunks[p.c]
	copy(ch[p.i:], ch[p.i+1:])
	var zero T
	ch[len(ch)-1] = zero
	ch = ch[:len(ch)-1]
	if len(ch) == 0 {
		s.chunks = append(s.chunks[:p.c], s.chunks[p.c+1:]...)
		s.lasts = append(s.lasts[:p.c], s.lasts[p.c+1:]...)
		return
	}
	s.chunks[p.c] = ch
	s.lasts[p.c] = ch[len(ch)-1]
}

// all returns the elements in order (a copy, safe to use while erasing).
func (s *chunked[T]) all() []T {
	out := make([]T, 0, s.n)
	for _, ch := range s.chunks {
		out = append(out, ch...)
	}
	return out
}

// sizeSet holds free blocks ordered like BlockComparatorSize: (stream,
// size, address). Each entry carries its key, so a search reads only the
// chunks, not the blocks (a block's key does not change while it is in
// the set).
type sizeSet struct{ chunked[sizeEntry] }

type sizeEntry struct {
	stream, size, ptr uint64
	b                 *block
}

func sizeLess(as, asz, ap, bs, bsz, bp uint64) bool {
	if as != bs {
		return as < bs
	}
	if asz != bsz {
		return asz < bsz
	}
	return ap < bp
}

func blockLess(b *block, stream, size, ptr uint64) bool {
	return sizeLess(b.stream, b.size, b.ptr, stream, size, ptr)
}

func (e *sizeEntry) less(stream, size, ptr uint64) bool {
	return sizeLess(e.stream, e.size, e.ptr, stream, size, ptr)
}

// at returns the block at p.
func (s *sizeSet) at(p pos) *block { return s.chunks[p.c][p.i].b }

// lowerBound returns the position of the first block not less than the
// key (two binary searches written out: this is the replay's hot loop).
func (s *sizeSet) lowerBound(stream, size, ptr uint64) pos {
	ls := s.lasts
	lo, hi := 0, len(ls)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ls[m].less(stream, size, ptr) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(ls) {
		return s.end()
	}
	ch := s.chunks[lo]
	l, h := 0, len(ch)
	for l < h {
		m := int(uint(l+h) >> 1)
		if ch[m].less(stream, size, ptr) {
			l = m + 1
		} else {
			h = m
		}
	}
	return pos{lo, l}
}

func (s *sizeSet) insert(b *block) {
	s.insertAt(s.lowerBound(b.stream, b.size, b.ptr), sizeEntry{b.stream, b.size, b.ptr, b})
}

// erase removes b (matched by identity) and reports whether it was there.
func (s *sizeSet) erase(b *block) bool {
	p := s.lowerBound(b.stream, b.size, b.ptr)
	if !s.isEnd(p) && s.at(p) == b {
		s.eraseAt(p)
		return true
	}
	return false
}

// all returns the blocks in order (a copy, safe to use while erasing).
func (s *sizeSet) all() []*block {
	out := make([]*block, 0, s.n)
	for _, ch := range s.chunks {
		for _, e := range ch {
			out = append(out, e.b)
		}
	}
	return out
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
	spans chunked[span] // in use, sorted by start, not overlapping
	// packed is where alloc's first-fit scan resumes (0: at base): below
	// it the spans leave no gap of vaAlign bytes, so nothing fits there.
	// Replays that cudaMalloc where the trace did not pile up thousands
	// of made-up segments above base; scanning them all on every alloc
	// was quadratic. Adding a span keeps it valid; removing or shrinking
	// one below it resets it.
	packed uint64
}

type span struct{ start, end uint64 }

const vaAlign = 2 * MiB

// after returns the position of the first span that ends after addr.
func (v *vaSpace) after(addr uint64) pos {
	return v.spans.search(func(s span) bool { return s.end > addr })
}

func (v *vaSpace) overlaps(start, size uint64) bool {
	p := v.after(start)
	return !v.spans.isEnd(p) && v.spans.at(p).start < start+size
}

func (v *vaSpace) take(start, size uint64) {
	v.spans.insertAt(v.spans.search(func(s span) bool { return s.start > start }), span{start, start + size})
}

func (v *vaSpace) alloc(size uint64) uint64 {
	size = (size + vaAlign - 1) / vaAlign * vaAlign
	at := v.base
	if size >= vaAlign {
		// The scan from base would pass the packed spans without a fit
		// and reach the same address.
		at = v.packedEnd()
	}
	at = v.firstFit(at, size)
	v.take(at, size)
	return at
}

// firstFit returns the first vaAlign-aligned address from at where size
// bytes are free.
func (v *vaSpace) firstFit(at, size uint64) uint64 {
	for p := v.after(at); !v.spans.isEnd(p); p = v.spans.next(p) {
		s := v.spans.at(p)
		if s.start >= at+size {
			break
		}
		if s.end > at {
			at = (s.end + vaAlign - 1) / vaAlign * vaAlign
		}
	}
	return at
}

// packedEnd extends packed over the spans that start less than vaAlign
// after it (where no request can fit in between) and returns it.
func (v *vaSpace) packedEnd() uint64 {
	v.packed = v.firstFit(max(v.packed, v.base), vaAlign)
	return v.packed
}

// find returns the position of the span that starts at start.
func (v *vaSpace) find(start uint64) (pos, bool) {
	p := v.spans.search(func(s span) bool { return s.start >= start })
	return p, !v.spans.isEnd(p) && v.spans.at(p).start == start
}

// resize moves the end of the span that starts at start.
func (v *vaSpace) resize(start, end uint64) {
	if p, ok := v.find(start); ok {
		v.spans.setAt(p, span{start, end})
		v.unpack(start)
	}
}

// unpack forgets packed when a span below it shrinks or goes.
func (v *vaSpace) unpack(start uint64) {
	if start < v.packed {
		v.packed = 0
	}
}

func (v *vaSpace) free(start uint64) {
	if p, ok := v.find(start); ok {
		v.spans.eraseAt(p)
		v.unpack(start)
	}
}
