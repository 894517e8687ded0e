package snapshot

// versionMap counts address versions (memory_viz's version_space) in an
// open-addressing table: annotate does one lookup per trace entry, and a
// Go map's hashing dominated that pass. Key, value and used flag share one
// 16-byte slot, so a lookup touches one cache line.
type versionMap struct {
	slots []versionSlot
	n     int
}

type versionSlot struct {
	addr uint64
	ver  int32
	used bool
}

func newVersionMap(hint int) *versionMap {
	size := 64
	for size < 2*hint {
		size *= 2
	}
	return &versionMap{slots: make([]versionSlot, size)}
}

func (m *versionMap) slot(addr uint64) *versionSlot {
	mask := len(m.slots) - 1
	i := int((addr*0x9E3779B97F4A7C15)>>32) & mask
	for {
		s := &m.slots[i]
		if !s.used || s.addr == addr {
			return s
		}
		i = (i + 1) & mask
	}
}

// get returns addr's current version, then increments it when inc is set.
func (m *versionMap) get(addr uint64, inc bool) int32 {
	s := m.slot(addr)
	if !s.used {
		if !inc {
			return 0
		}
		if 2*(m.n+1) > len(m.slots) {
			m.grow()
			s = m.slot(addr)
		}
		*s = versionSlot{addr: addr, used: true}
		m.n++
	}
	v := s.ver
	if inc {
		s.ver = v + 1
	}
	return v
}

func (m *versionMap) grow() {
	old := m.slots
	m.slots = make([]versionSlot, 2*len(old))
	for _, o := range old {
		if o.used {
			*m.slot(o.addr) = o
		}
	}
}
