package replay

import (
	"math/rand"
	"testing"
)

// TestAddrTableMatchesMap runs random puts, gets and takes against a Go
// map, with addresses that collide often (multiples of 512 in a small
// range) so that deletion's backward shift is exercised.
func TestAddrTableMatchesMap(t *testing.T) {
	for _, span := range []int{4, 64, 5000} {
		r := rand.New(rand.NewSource(int64(span)))
		tab, ref := newAddrTable(1), map[uint64]int32{}
		for i := 0; i < 200000; i++ {
			k := uint64(r.Intn(span)) * 512
			switch r.Intn(3) {
			case 0:
				tab.put(k, int32(i))
				ref[k] = int32(i)
			case 1:
				v, ok := tab.get(k)
				w, wok := ref[k]
				if ok != wok || (ok && v != w) {
					t.Fatalf("span %d step %d: get(%d) = %d,%v, want %d,%v", span, i, k, v, ok, w, wok)
				}
			case 2:
				v, ok := tab.take(k)
				w, wok := ref[k]
				delete(ref, k)
				if ok != wok || (ok && v != w) {
					t.Fatalf("span %d step %d: take(%d) = %d,%v, want %d,%v", span, i, k, v, ok, w, wok)
				}
			}
			if tab.n != len(ref) {
				t.Fatalf("span %d step %d: %d entries, want %d", span, i, tab.n, len(ref))
			}
		}
	}
}
