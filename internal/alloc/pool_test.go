package alloc

import (
	"math/rand"
	"sort"
	"testing"
)

// TestSizeSetChunks checks the chunked set against a sorted slice through
// random inserts, erases, lower bounds and walks, across chunk splits.
func TestSizeSetChunks(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var s sizeSet
	var ref []*block
	less := func(a, b *block) bool { return sizeLess(a.stream, a.size, a.ptr, b.stream, b.size, b.ptr) }
	for step := 0; step < 20000; step++ {
		switch op := rng.Intn(10); {
		case op < 6 || len(ref) == 0:
			b := &block{stream: uint64(rng.Intn(3)), size: uint64(rng.Intn(64)) * 512, ptr: uint64(step) << 12}
			s.insert(b)
			i := sort.Search(len(ref), func(i int) bool { return !less(ref[i], b) })
			ref = append(ref, nil)
			copy(ref[i+1:], ref[i:])
			ref[i] = b
		case op < 9:
			k := rng.Intn(len(ref))
			if !s.erase(ref[k]) {
				t.Fatalf("step %d: erase of a present block failed", step)
			}
			ref = append(ref[:k], ref[k+1:]...)
		default:
			stream, size := uint64(rng.Intn(3)), uint64(rng.Intn(64))*512
			p := s.lowerBound(stream, size, 0)
			i := sort.Search(len(ref), func(i int) bool { return !blockLess(ref[i], stream, size, 0) })
			for j := i; j < len(ref) && j < i+5; j++ {
				if s.isEnd(p) || s.at(p) != ref[j] {
					t.Fatalf("step %d: walk from lower bound differs at %d", step, j)
				}
				p = s.next(p)
			}
			if i == len(ref) && !s.isEnd(p) {
				t.Fatalf("step %d: lower bound past the last block is not the end", step)
			}
		}
		if s.len() != len(ref) {
			t.Fatalf("step %d: len %d, want %d", step, s.len(), len(ref))
		}
	}
	all := s.all()
	for i := range ref {
		if all[i] != ref[i] {
			t.Fatalf("final order differs at %d", i)
		}
	}
	// Walking backwards from the end visits everything in reverse.
	p, ok := s.prev(s.end())
	for i := len(ref) - 1; i >= 0; i-- {
		if !ok || s.at(p) != ref[i] {
			t.Fatalf("backward walk differs at %d", i)
		}
		p, ok = s.prev(p)
	}
	if ok {
		t.Fatal("backward walk does not end")
	}
	if len(s.chunks) < 2 {
		t.Fatalf("%d chunks: the test never split one", len(s.chunks))
	}
}
