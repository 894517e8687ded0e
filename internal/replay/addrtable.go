package replay

import "math/bits"

// addrTable maps live addresses to element ids: an open-addressing hash
// table with linear probing, a few times faster than a Go map for the
// millions of put/take pairs a long trace makes. Deletion shifts later
// entries back, so there are no tombstones and probes stay short.
type addrTable struct {
	keys  []uint64
	vals  []int32 // -1: empty slot
	shift uint8   // 64 - log2(len(keys))
	n     int
}

func newAddrTable(capacity int) *addrTable {
	t := &addrTable{}
	t.alloc(max(16, 1<<bits.Len(uint(capacity*2))))
	return t
}

func (t *addrTable) alloc(size int) {
	t.keys = make([]uint64, size)
	t.vals = make([]int32, size)
	for i := range t.vals {
		t.vals[i] = -1
	}
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

// slot is where key's probe sequence starts: Fibonacci hashing spreads
// addresses that are all multiples of 512.
func (t *addrTable) slot(key uint64) int {
	return int((key * 0x9E3779B97F4A7C15) >> t.shift)
}

// put maps key to v, replacing an earlier value as a JS Map set does.
func (t *addrTable) put(key uint64, v int32) {
	if 2*(t.n+1) > len(t.keys) {
		t.grow()
	}
	mask := len(t.keys) - 1
	for i := t.slot(key); ; i = (i + 1) & mask {
		if t.vals[i] < 0 {
			t.keys[i], t.vals[i] = key, v
			t.n++
			return
		}
		if t.keys[i] == key {
			t.vals[i] = v
			return
		}
	}
}

func (t *addrTable) get(key uint64) (int32, bool) {
	mask := len(t.keys) - 1
	for i := t.slot(key); ; i = (i + 1) & mask {
		if t.vals[i] < 0 {
			return -1, false
		}
		if t.keys[i] == key {
			return t.vals[i], true
		}
	}
}

// take removes key and returns its value.
func (t *addrTable) take(key uint64) (int32, bool) {
	mask := len(t.keys) - 1
	i := t.slot(key)
	for ; ; i = (i + 1) & mask {
		if t.vals[i] < 0 {
			return -1, false
		}
		if t.keys[i] == key {
			break
		}
	}
	v := t.vals[i]
	// Backward-shift: move later entries of the run into the hole when
	// their probe sequence starts at or before it.
	for j := (i + 1) & mask; t.vals[j] >= 0; j = (j + 1) & mask {
		home := t.slot(t.keys[j])
		if (j-home)&mask >= (j-i)&mask {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.vals[i] = -1
	t.n--
	return v, true
}

func (t *addrTable) grow() {
	keys, vals := t.keys, t.vals
	t.alloc(2 * len(keys))
	t.n = 0
	for i, v := range vals {
		if v >= 0 {
			t.put(keys[i], v)
		}
	}
}

// slots is the number of slots of the table (keysIn's range).
func (t *addrTable) slots() int { return len(t.keys) }

// keysIn appends to dst the keys held in slots [lo, hi), in no order.
func (t *addrTable) keysIn(dst []uint64, lo, hi int) []uint64 {
	for i, v := range t.vals[lo:hi] {
		if v >= 0 {
			dst = append(dst, t.keys[lo+i])
		}
	}
	return dst
}
