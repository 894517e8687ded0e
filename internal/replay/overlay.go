package replay

import (
	"maps"
	"slices"
)

// The maps of a work state (see work) hold either every block and segment
// (dump == nil) or only their differences from the dump's state, over the
// history's sorted arrays of it (an overlay). A state near the dump, a
// loaded checkpoint and the checkpoint build then cost what differs, not
// a copy of the dump's million blocks and segments (two such copies were
// 180 MB on a 1 GB snapshot). An overlay marks what the dump has and the
// state has not with a tombstone, and drops an entry that becomes equal
// to the dump's, so that it is exactly the difference (the checkpoint
// build saves it as it is).

// blockMap is a work state's blocks by address.
type blockMap struct {
	// m, in an overlay: refGone where a dump block is gone, refNew on a
	// block where the dump has none (each finds those without a look-up).
	m    map[uint64]blockRef
	dump *History
	n    int // the blocks of an overlay's state
}

const refNew blockRef = 1 << 60

func newBlockMap(n int) blockMap { return blockMap{m: make(map[uint64]blockRef, n)} }

func (b *blockMap) get(a uint64) (blockRef, bool) {
	if r, ok := b.m[a]; ok {
		return r &^ refNew, r != refGone
	}
	if b.dump == nil {
		return 0, false
	}
	return b.dump.baseBlock(a)
}

func (b *blockMap) set(a uint64, r blockRef) {
	if b.dump == nil {
		b.m[a] = r
		return
	}
	prev, inOv := b.m[a]
	was, inDump := b.dump.baseBlock(a)
	if had := inOv && prev != refGone || !inOv && inDump; !had {
		b.n++
	}
	switch {
	case !inDump:
		b.m[a] = r | refNew
	case was == r:
		delete(b.m, a)
	default:
		b.m[a] = r
	}
}

func (b *blockMap) del(a uint64) {
	if b.dump == nil {
		delete(b.m, a)
		return
	}
	prev, inOv := b.m[a]
	_, inDump := b.dump.baseBlock(a)
	if inOv && prev != refGone || !inOv && inDump {
		b.n--
	}
	if inDump {
		b.m[a] = refGone
	} else {
		delete(b.m, a)
	}
}

func (b *blockMap) len() int {
	if b.dump == nil {
		return len(b.m)
	}
	return b.n
}

// each calls fn for every block of the state, in no order.
func (b *blockMap) each(fn func(a uint64, r blockRef)) {
	if b.dump == nil {
		for a, r := range b.m {
			fn(a, r)
		}
		return
	}
	for i, a := range b.dump.baseAddrs {
		if r, ok := b.m[a]; ok {
			if r != refGone {
				fn(a, r)
			}
			continue
		}
		fn(a, b.dump.baseRefs[i])
	}
	for a, r := range b.m {
		if r&refNew != 0 {
			fn(a, r&^refNew)
		}
	}
}

func (b *blockMap) clone() blockMap { return blockMap{maps.Clone(b.m), b.dump, b.n} }

// segMap is a work state's segments by start address. An overlay's
// tombstone is a record whose addr is not its key.
type segMap struct {
	m    map[uint64]segRec
	dump *History
	n    int
}

func gone(a uint64) segRec { return segRec{addr: a + 1} }

func (s *segMap) get(a uint64) (segRec, bool) {
	if v, ok := s.m[a]; ok {
		return v, v.addr == a
	}
	if s.dump == nil {
		return segRec{}, false
	}
	return s.dump.baseSeg(a)
}

func (s *segMap) set(a uint64, v segRec) {
	if s.dump == nil {
		s.m[a] = v
		return
	}
	prev, inOv := s.m[a]
	was, inDump := s.dump.baseSeg(a)
	if !(inOv && prev.addr == a || !inOv && inDump) {
		s.n++
	}
	if inDump && was == v {
		delete(s.m, a)
	} else {
		s.m[a] = v
	}
}

func (s *segMap) del(a uint64) {
	if s.dump == nil {
		delete(s.m, a)
		return
	}
	prev, inOv := s.m[a]
	_, inDump := s.dump.baseSeg(a)
	if inOv && prev.addr == a || !inOv && inDump {
		s.n--
	}
	if inDump {
		s.m[a] = gone(a)
	} else {
		delete(s.m, a)
	}
}

func (s *segMap) len() int {
	if s.dump == nil {
		return len(s.m)
	}
	return s.n
}

// each calls fn for every segment of the state, in no order.
func (s *segMap) each(fn func(v segRec)) {
	if s.dump == nil {
		for _, v := range s.m {
			fn(v)
		}
		return
	}
	hits := 0 // entries of m at the dump's segments
	for _, v := range s.dump.baseSS.segs {
		if o, ok := s.m[v.addr]; ok {
			hits++
			if o.addr == v.addr {
				fn(o)
			}
			continue
		}
		fn(v)
	}
	if hits == len(s.m) {
		return
	}
	for a, v := range s.m {
		if _, inDump := s.dump.baseSeg(a); !inDump && v.addr == a {
			fn(v)
		}
	}
}

func (s *segMap) clone() segMap { return segMap{maps.Clone(s.m), s.dump, s.n} }

// endMap maps a segment's end address to its start address. An overlay's
// tombstone is noStart.
type endMap struct {
	m    map[uint64]uint64
	dump *History
}

const noStart = ^uint64(0)

func (e *endMap) get(end uint64) (uint64, bool) {
	if st, ok := e.m[end]; ok {
		return st, st != noStart
	}
	if e.dump == nil {
		return 0, false
	}
	return e.dump.baseEnd(end)
}

func (e *endMap) set(end, start uint64) {
	if e.dump != nil {
		if was, ok := e.dump.baseEnd(end); ok && was == start {
			delete(e.m, end)
			return
		}
	}
	e.m[end] = start
}

func (e *endMap) del(end uint64) {
	if e.dump != nil {
		if _, ok := e.dump.baseEnd(end); ok {
			e.m[end] = noStart
			return
		}
	}
	delete(e.m, end)
}

func (e *endMap) clone() endMap { return endMap{maps.Clone(e.m), e.dump} }

// overlayWork returns the dump's state as an empty overlay. The caller
// has called baseSorted, and h.overlay is set.
func (h *History) overlayWork() *work {
	return &work{
		segs: segSet{byStart: segMap{m: map[uint64]segRec{}, dump: h, n: len(h.baseSS.segs)},
			endAt: endMap{m: map[uint64]uint64{}, dump: h}},
		blocks: blockMap{m: map[uint64]blockRef{}, dump: h, n: len(h.baseSS.blocks)},
	}
}

// baseEnd looks up the dump's segment ending at end (when h.overlay: the
// dump's segments by address end in address order).
func (h *History) baseEnd(end uint64) (uint64, bool) {
	i, ok := slices.BinarySearch(h.baseSegEnds, end)
	if !ok {
		return 0, false
	}
	return h.baseSS.segs[i].addr, true
}

// endsInOrder reports whether segments sorted by address also have their
// ends in strictly increasing order (none overlaps another, none shares
// an end), which baseEnd's search needs.
func endsInOrder(segs []segRec) bool {
	for i := 1; i < len(segs); i++ {
		if segs[i].addr+segs[i].size <= segs[i-1].addr+segs[i-1].size {
			return false
		}
	}
	return true
}
