package snapshot

// versionColumn holds a trace's address versions (Trace.Version) in the
// narrowest of three widths that holds them all: a byte each while every
// version is under 256, two bytes under 65,536, else four. A version
// counts the frees of one address before the entry, and few addresses
// are freed that often: the 1 GB tiled snapshot's highest is 131 (15 MB
// for its 15 million entries, where int32s took 60 MB of the viewer's
// memory), the real snapshots' highest 2,435. Only one of the slices is
// set; a column widens (once, by a copy) at the first version that does
// not fit, so that the same versions give the same column however they
// were counted.
type versionColumn struct {
	b []uint8
	h []uint16
	w []int32
}

// at returns version i (0 out of range).
func (c *versionColumn) at(i int) int32 {
	switch {
	case i < 0:
		return 0
	case i < len(c.b):
		return int32(c.b[i])
	case i < len(c.h):
		return int32(c.h[i])
	case i < len(c.w):
		return c.w[i]
	}
	return 0
}

// len is the number of versions held.
func (c *versionColumn) len() int { return len(c.b) + len(c.h) + len(c.w) }

// makeVersionColumn returns a column of n zero versions (none for n 0).
func makeVersionColumn(n int) versionColumn {
	if n == 0 {
		return versionColumn{}
	}
	return versionColumn{b: make([]uint8, n)}
}

// fits reports whether v fits the column's width.
func (c *versionColumn) fits(v int32) bool {
	switch {
	case c.w != nil:
		return true
	case c.h != nil:
		return uint32(v) < 1<<16
	}
	return uint32(v) < 1<<8
}

// widen makes the column wide enough for v, keeping its length and
// capacity.
func (c *versionColumn) widen(v int32) {
	n, room := c.len(), max(cap(c.b), cap(c.h), cap(c.w))
	if uint32(v) < 1<<16 {
		h := make([]uint16, n, room)
		for i, x := range c.b {
			h[i] = uint16(x)
		}
		*c = versionColumn{h: h}
		return
	}
	w := make([]int32, n, room)
	for i := range n {
		w[i] = c.at(i)
	}
	*c = versionColumn{w: w}
}

// set sets version i (i < len).
func (c *versionColumn) set(i int, v int32) {
	if !c.fits(v) {
		c.widen(v)
	}
	switch {
	case c.w != nil:
		c.w[i] = v
	case c.h != nil:
		c.h[i] = uint16(v)
	default:
		c.b[i] = uint8(v)
	}
}

// append adds a version after the last; a column with none yet starts
// with room for hint.
func (c *versionColumn) append(v int32, hint int) {
	if c.b == nil && c.h == nil && c.w == nil {
		c.b = make([]uint8, 0, max(hint, 1))
	}
	if !c.fits(v) {
		c.widen(v)
	}
	switch {
	case c.w != nil:
		c.w = append(c.w, v)
	case c.h != nil:
		c.h = append(c.h, uint16(v))
	default:
		c.b = append(c.b, uint8(v))
	}
}

// slice returns versions lo..hi-1 as a column of their own, in the
// narrowest width that holds them (a copy only when it is narrower).
func (c *versionColumn) slice(lo, hi int) versionColumn {
	if lo >= hi {
		return versionColumn{}
	}
	switch {
	case c.b != nil:
		return versionColumn{b: c.b[lo:hi:hi]}
	case c.h != nil:
		part := versionColumn{h: c.h[lo:hi:hi]}
		for _, v := range part.h {
			if v >= 1<<8 {
				return part
			}
		}
		return part.narrowed()
	}
	part := versionColumn{w: c.w[lo:hi:hi]}
	for _, v := range part.w {
		if uint32(v) >= 1<<16 {
			return part
		}
	}
	return part.narrowed()
}

// narrowed returns the column's versions in a new column, as set makes
// it.
func (c *versionColumn) narrowed() versionColumn {
	n := c.len()
	out := makeVersionColumn(n)
	for i := range n {
		out.set(i, c.at(i))
	}
	return out
}
