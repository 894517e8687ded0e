package replay

import (
	"math/bits"
	"unsafe"
)

// addrTable maps live addresses to element ids: an open-addressing hash
// table with linear probing, a few times faster than a Go map for the
// millions of put/take pairs a long trace makes. Deletion shifts later
// entries back, so there are no tombstones and probes stay short.
//
// A slot holds its key and value side by side: a long trace's table is
// tens of MB, and each put or take misses the cache once, not once for
// the key and once for the value (those misses were most of the fed
// pairing's time on the 1 GB tile).
type addrTable struct {
	slots []addrSlot
	shift uint8 // 64 - log2(len(slots))
	n     int
	// want, when not 0, is the size the table grows to at once when it
	// outgrows jumpFrom slots (expect).
	want int
}

type addrSlot struct {
	key uint64
	val int32 // -1: empty slot
	// aux is a second value, in what would be the slot's padding (see
	// putAux): the fed pairing keeps an element's stack position there,
	// which its free then reads from the line it misses anyway.
	aux int32
}

func newAddrTable(capacity int) *addrTable {
	t := &addrTable{}
	t.alloc(max(16, 1<<bits.Len(uint(capacity*2))))
	return t
}

func (t *addrTable) alloc(size int) {
	t.slots = make([]addrSlot, size)
	for i := range t.slots {
		t.slots[i].val = -1
	}
	t.shift = uint8(64 - bits.TrailingZeros(uint(size)))
}

// slot is where key's probe sequence starts: Fibonacci hashing spreads
// addresses that are all multiples of 512.
func (t *addrTable) slot(key uint64) int {
	return int((key * 0x9E3779B97F4A7C15) >> t.shift)
}

// put maps key to v, replacing an earlier value as a JS Map set does.
func (t *addrTable) put(key uint64, v int32) { t.putAux(key, v, 0) }

// putAux maps key to v and aux.
func (t *addrTable) putAux(key uint64, v, aux int32) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.slot(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val < 0 {
			*s = addrSlot{key, v, aux}
			t.n++
			return
		}
		if s.key == key {
			s.val, s.aux = v, aux
			return
		}
	}
}

func (t *addrTable) get(key uint64) (int32, bool) {
	mask := len(t.slots) - 1
	for i := t.slot(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val < 0 {
			return -1, false
		}
		if s.key == key {
			return s.val, true
		}
	}
}

// take removes key and returns its value.
func (t *addrTable) take(key uint64) (int32, bool) {
	v, _, ok := t.takeAux(key)
	return v, ok
}

// takeAux removes key and returns its value and aux.
func (t *addrTable) takeAux(key uint64) (v, aux int32, ok bool) {
	mask := len(t.slots) - 1
	i := t.slot(key)
	for ; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.val < 0 {
			return -1, 0, false
		}
		if s.key == key {
			break
		}
	}
	v, aux = t.slots[i].val, t.slots[i].aux
	// Backward-shift: move later entries of the run into the hole when
	// their probe sequence starts at or before it.
	for j := (i + 1) & mask; t.slots[j].val >= 0; j = (j + 1) & mask {
		home := t.slot(t.slots[j].key)
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i].val = -1
	t.n--
	return v, aux, true
}

// expect says that the table will likely hold about capacity keys: once
// it outgrows jumpFrom slots it takes the size newAddrTable(capacity)
// would have, rather than doubling to it (each doubling writes a new table
// whole and drops the last: on the 1 GB tile, 32 MB of fresh pages). A
// table that stays small never takes it.
func (t *addrTable) expect(capacity int) {
	t.want = max(16, 1<<bits.Len(uint(capacity*2)))
}

// jumpFrom is the size (slots) past which a table grows to the size it
// expects (expect); tests lower it.
var jumpFrom = 1 << 13

func (t *addrTable) grow() {
	old := t.slots
	size := 2 * len(old)
	if size > jumpFrom && t.want > size {
		size = t.want
	}
	t.alloc(size)
	t.n = 0
	for _, s := range old {
		if s.val >= 0 {
			t.putAux(s.key, s.val, s.aux)
		}
	}
}

// prefetch starts bringing in the first slot of key's probe sequence.
func (t *addrTable) prefetch(key uint64) {
	prefetch(unsafe.Pointer(&t.slots[t.slot(key)]))
}

// size is the number of slots of the table (keysIn's range).
func (t *addrTable) size() int { return len(t.slots) }

// keysIn appends to dst the keys held in slots [lo, hi), in no order.
func (t *addrTable) keysIn(dst []uint64, lo, hi int) []uint64 {
	for _, s := range t.slots[lo:hi] {
		if s.val >= 0 {
			dst = append(dst, s.key)
		}
	}
	return dst
}
