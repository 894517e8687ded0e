package alloc

import "math/bits"

// addrMap maps device addresses to int32s: open addressing with linear
// probing in one array, kept at most half full, so a look-up is usually
// one cache miss (Go's map takes two or three, and rebuilding a tiled
// trace's start makes tens of millions of look-ups). It only grows.
type addrMap struct {
	slots []addrSlot
	n     int
	shift uint // 64 - log2(len(slots))
}

type addrSlot struct {
	key uint64
	val int32 // the value + 1; 0 marks an empty slot
}

// newAddrMap returns a map sized for about n addresses.
func newAddrMap(n int) *addrMap {
	m := &addrMap{}
	m.alloc(max(n, 8))
	return m
}

// alloc makes room for n addresses at half load.
func (m *addrMap) alloc(n int) {
	b := bits.Len(uint(2*n - 1))
	m.slots = make([]addrSlot, 1<<b)
	m.shift = uint(64 - b)
}

// home is where a key's probe starts: Fibonacci hashing spreads aligned
// addresses (and copies 2^40 apart) over the table.
func (m *addrMap) home(key uint64) uint64 { return (key * 0x9e3779b97f4a7c15) >> m.shift }

// get returns key's value.
func (m *addrMap) get(key uint64) (int32, bool) {
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.val == 0 {
			return 0, false
		}
		if s.key == key {
			return s.val - 1, true
		}
	}
}

// getOrPut returns key's value and true, or adds key with value v and
// returns v and false.
func (m *addrMap) getOrPut(key uint64, v int32) (int32, bool) {
	mask := uint64(len(m.slots) - 1)
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.val == 0 {
			s.key, s.val = key, v+1
			if m.n++; 2*m.n > len(m.slots) {
				m.grow()
			}
			return v, false
		}
		if s.key == key {
			return s.val - 1, true
		}
	}
}

func (m *addrMap) grow() {
	old := m.slots
	m.alloc(len(old))
	mask := uint64(len(m.slots) - 1)
	for _, s := range old {
		if s.val == 0 {
			continue
		}
		i := m.home(s.key)
		for m.slots[i].val != 0 {
			i = (i + 1) & mask
		}
		m.slots[i] = s
	}
}
