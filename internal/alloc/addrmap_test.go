package alloc

import (
	"math/rand"
	"testing"
)

// TestAddrMap checks the address map against Go's map on aligned
// addresses of tiled copies (2^40 apart), across several growths.
func TestAddrMap(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	m := newAddrMap(1)
	ref := map[uint64]int32{}
	for step := 0; step < 50000; step++ {
		key := uint64(rng.Intn(8))<<40 | 0x7f0000000000 + uint64(rng.Intn(20000))*512
		if rng.Intn(2) == 0 {
			v, ok := m.get(key)
			if w, wok := ref[key]; ok != wok || v != w {
				t.Fatalf("step %d: get(%#x) = %d %v, want %d %v", step, key, v, ok, w, wok)
			}
			continue
		}
		v, ok := m.getOrPut(key, int32(step))
		w, wok := ref[key]
		if !wok {
			w = int32(step)
			ref[key] = w
		}
		if ok != wok || v != w {
			t.Fatalf("step %d: getOrPut(%#x) = %d %v, want %d %v", step, key, v, ok, w, wok)
		}
	}
	if m.n != len(ref) || len(m.slots) < 2*len(ref) {
		t.Fatalf("%d entries in %d slots, want %d at most half full", m.n, len(m.slots), len(ref))
	}
}
