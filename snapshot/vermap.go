package snapshot

// versionMap counts address versions (memory_viz's version_space) in an
// open-addressing table: annotate does one lookup per trace entry, and a
// Go map's hashing dominated that pass.
type versionMap struct {
	keys []uint64
	vals []int32
	used []bool
	n    int
}

func newVersionMap(hint int) *versionMap {
	size := 64
	for size < 2*hint {
		size *= 2
	}
	return &versionMap{keys: make([]uint64, size), vals: make([]int32, size), used: make([]bool, size)}
}

func (m *versionMap) slot(addr uint64) int {
	mask := len(m.keys) - 1
	i := int((addr*0x9E3779B97F4A7C15)>>32) & mask
	for m.used[i] && m.keys[i] != addr {
		i = (i + 1) & mask
	}
	return i
}

// get returns addr's current version, then increments it when inc is set.
func (m *versionMap) get(addr uint64, inc bool) int32 {
	i := m.slot(addr)
	if !m.used[i] {
		if !inc {
			return 0
		}
		if 2*(m.n+1) > len(m.keys) {
			m.grow()
			i = m.slot(addr)
		}
		m.used[i], m.keys[i], m.vals[i] = true, addr, 0
		m.n++
	}
	v := m.vals[i]
	if inc {
		m.vals[i] = v + 1
	}
	return v
}

func (m *versionMap) grow() {
	old := *m
	*m = *newVersionMap(len(old.keys))
	for i, u := range old.used {
		if u {
			j := m.slot(old.keys[i])
			m.used[j], m.keys[j], m.vals[j] = true, old.keys[i], old.vals[i]
			m.n++
		}
	}
}
