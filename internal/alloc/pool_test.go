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

// TestVASpaceFirstFit checks the address space's first fit, which resumes
// its scan where the spans stop being packed, against a scan from base
// through random allocs, takes, frees and shrinks.
func TestVASpaceFirstFit(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	const base = 1 << 30
	v := vaSpace{base: base}
	// firstFit is the scan from base, as alloc did before it kept packed.
	firstFit := func(size uint64) uint64 {
		size = (size + vaAlign - 1) / vaAlign * vaAlign
		at := uint64(base)
		for _, s := range v.spans.all() {
			if s.end <= at {
				continue
			}
			if s.start >= at+size {
				break
			}
			at = (s.end + vaAlign - 1) / vaAlign * vaAlign
		}
		return at
	}
	for step := 0; step < 5000; step++ {
		spans := v.spans.all()
		switch op := rng.Intn(10); {
		case op < 5 || len(spans) == 0:
			size := uint64(1+rng.Intn(12)) * MiB
			want := firstFit(size)
			if got := v.alloc(size); got != want {
				t.Fatalf("step %d: alloc(%d) = %#x, first fit from base %#x", step, size, got, want)
			}
		case op < 7:
			// A trace address: anywhere free, even below packed.
			start := base + uint64(rng.Intn(1<<12))*(MiB/2)
			size := uint64(1+rng.Intn(3)) * (MiB / 2)
			if !v.overlaps(start, size) {
				v.take(start, size)
			}
		case op < 9:
			v.free(spans[rng.Intn(len(spans))].start)
		default:
			s := spans[rng.Intn(len(spans))]
			if s.end-s.start > MiB {
				v.resize(s.start, s.end-MiB)
			}
		}
	}
	if v.spans.len() < 50 {
		t.Fatalf("%d spans: the test never built a long packed run", v.spans.len())
	}
}

// TestChunkedLasts checks that the copy of each chunk's last element,
// which searches read, follows inserts, erases, splits and removals.
func TestChunkedLasts(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var s sizeSet
	var in []*block
	for step := 0; step < 20000; step++ {
		if rng.Intn(3) > 0 || len(in) == 0 {
			b := &block{size: uint64(rng.Intn(1000)), ptr: uint64(step)}
			s.insert(b)
			in = append(in, b)
		} else {
			k := rng.Intn(len(in))
			s.erase(in[k])
			in = append(in[:k], in[k+1:]...)
		}
		if len(s.lasts) != len(s.chunks) {
			t.Fatalf("step %d: %d lasts for %d chunks", step, len(s.lasts), len(s.chunks))
		}
		for c, ch := range s.chunks {
			if s.lasts[c] != ch[len(ch)-1] {
				t.Fatalf("step %d: chunk %d ends in %v, lasts has %v", step, c, ch[len(ch)-1], s.lasts[c])
			}
		}
	}
}
