package pickle

// An EntryReader is a DictFinisher that can read the commonest dicts of its
// input straight from the bytes, without the opcode loop building their
// key/value pairs first. A memory snapshot is millions of trace entries of
// one shape (memoized keys, small ints, memoized strings and stacks), and
// reading them in one pass over the bytes is most of a fast decode.
//
// ReadEntry gets the input at hand (buf, all of it readable) and p, the
// offset just past the dict's MARK; self is the memo index the dict itself
// was given (-1 when none). When it recognizes everything up to and
// including the dict's SETITEMS, and DictEndsAt says the dict is complete
// there, it records the entry and returns its value and the offset past
// SETITEMS. Otherwise it returns ok false and must have changed nothing:
// the decoder then reads the dict its ordinary way.
type EntryReader interface {
	ReadEntry(d *Decoder, buf []byte, p int, self int64) (v Value, end int, ok bool)
}

// MemoPlain returns memo entry i when it holds a plain value (not a
// container, not empty).
func (d *Decoder) MemoPlain(i uint64) (Value, bool) {
	if i >= d.memoLen {
		return Value{}, false
	}
	slot := d.memo[i>>memoPageBits][i&(1<<memoPageBits-1)]
	if slot == slotHole && i < d.runEnd {
		if _, ok := d.memoMap[i]; !ok {
			return d.runValue(i) // a run holds no containers
		}
	}
	if k := Kind(slot & 15); k == mark || (k >= List && k <= Object) {
		return Value{}, false
	}
	return unpackSlot(slot), true
}

// DictEndsAt reports whether a dict of a few pairs whose SETITEMS ends at
// offset end of the buffer given to ReadEntry is complete there, as the
// decoder's own dict reading would judge it. It answers false when too
// little input is at hand to tell.
func (d *Decoder) DictEndsAt(end int) bool {
	if end+10 > d.end {
		return false
	}
	q := end
	if d.buf[q] == opFrame {
		q += 9
	}
	return d.buf[q] != opMark
}

// MemoStr returns the string id of memo entry i when it holds a str.
func (d *Decoder) MemoStr(i uint64) (uint32, bool) {
	if i >= d.memoLen {
		return 0, false
	}
	slot := d.memo[i>>memoPageBits][i&(1<<memoPageBits-1)]
	return uint32(slot >> 8), slot&15 == uint64(String)
}

// MemoRewrites counts the times a memo entry holding a str was overwritten
// (Python's pickler never does it). A reader that remembers what memoized
// strs say may trust that memory while the count stays the same.
func (d *Decoder) MemoRewrites() uint64 { return d.strRewrites }
