package replay

import (
	"math/rand"
	"slices"
	"sort"
	"testing"
	"unsafe"
)

// TestDrawSetMatchesStableSort compares drawSet with memory_viz's rule
// written the plain way: a stable sort by size, descending, then the
// first maxEntries. Sizes repeat a lot so that ties at the cut matter.
func TestDrawSetMatchesStableSort(t *testing.T) {
	r := rand.New(rand.NewSource(7))
	for _, n := range []int{1, 5, 100, 3000} {
		elems := make([]elemSrc, n)
		for i := range elems {
			elems[i].size = uint64(r.Intn(40)) << uint(r.Intn(12))
		}
		for _, k := range []int{0, 1, 2, n / 3, n / 2, n - 1, n, n + 5} {
			idx := make([]int, n)
			for i := range idx {
				idx[i] = i
			}
			sort.SliceStable(idx, func(a, b int) bool { return elems[idx[a]].size > elems[idx[b]].size })
			want := make([]bool, n)
			for i, j := range idx {
				want[j] = k <= 0 || i < k
			}
			got := drawSet(elems, k)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("n %d max %d: element %d (size %d) drawn %v, want %v", n, k, i, elems[i].size, got[i], want[i])
				}
			}
		}
	}
}

// TestLiveStackMatchesScan checks liveStack.free against a scan of a plain
// alive list, on random push/free sequences with long runs of dead
// positions under a busy top (the case that makes naive pointer walks
// quadratic).
func TestLiveStackMatchesScan(t *testing.T) {
	for _, tc := range []struct {
		name     string
		seed     int64
		pushBias int // out of 10: how often to push rather than free
		topBias  int // out of 10: how often a free takes the top live one
	}{
		{"balanced", 1, 5, 3},
		{"growing", 2, 7, 2},
		{"top-churn", 3, 5, 9},
		{"random-frees", 4, 4, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewSource(tc.seed))
			s := newLiveStack(0)
			var alive []bool
			var live []int32 // live positions
			for step := 0; step < 20000; step++ {
				if len(live) == 0 || rng.Intn(10) < tc.pushBias {
					s.push()
					alive = append(alive, true)
					live = append(live, int32(len(alive)-1))
					continue
				}
				i := rng.Intn(len(live))
				if rng.Intn(10) < tc.topBias {
					i = len(live) - 1 // live is in increasing order
				}
				p := live[i]
				live = append(live[:i], live[i+1:]...)
				alive[p] = false
				want := false
				for q := int(p) + 1; q < len(alive); q++ {
					want = want || alive[q]
				}
				if got := s.free(p); got != want {
					t.Fatalf("step %d: free(%d) = %v, want %v", step, p, got, want)
				}
			}
		})
	}
}

// TestLiveStackLevels checks liveStack.top and free against a plain
// alive list over enough positions to take four levels of its tree,
// reserved for fewer than that (so that it adds levels as it grows) and
// for all of them, with every position freed in the end, top down in
// runs and bottom up.
func TestLiveStackLevels(t *testing.T) {
	const n = 300_000 // more than 64^3: four levels
	for _, capacity := range []int{0, 100, n} {
		rng := rand.New(rand.NewSource(int64(capacity)))
		s := newLiveStack(capacity)
		alive := make([]bool, 0, n)
		hi := int32(-1) // the highest alive, by scan
		check := func(step int, p int32, got bool) {
			t.Helper()
			for hi >= 0 && !alive[hi] {
				hi--
			}
			if want := hi > p; got != want {
				t.Fatalf("capacity %d, step %d: free(%d) = %v, want %v", capacity, step, p, got, want)
			}
			if s.top() != hi {
				t.Fatalf("capacity %d, step %d: top() = %d, want %d", capacity, step, s.top(), hi)
			}
		}
		for step := 0; len(alive) < n; step++ {
			s.push()
			alive = append(alive, true)
			hi = int32(len(alive) - 1)
			if rng.Intn(3) == 0 {
				// Free a live position near the top, or anywhere.
				p := int32(len(alive) - 1 - rng.Intn(min(len(alive), 200)))
				if rng.Intn(4) == 0 {
					p = int32(rng.Intn(len(alive)))
				}
				if alive[p] {
					alive[p] = false
					check(step, p, s.free(p))
				}
			}
		}
		// The rest: top down, every third run of positions bottom up.
		for p := int32(n - 1); p >= 0; p-- {
			if alive[p] && (p/1000)%3 != 0 {
				alive[p] = false
				check(-1, p, s.free(p))
			}
		}
		for p := int32(0); p < n; p++ {
			if alive[p] {
				alive[p] = false
				check(-2, p, s.free(p))
			}
		}
		if s.top() != -1 || s.size() != n {
			t.Fatalf("capacity %d: top %d, size %d at the end", capacity, s.top(), s.size())
		}
	}
}

// TestElemSrcKind checks that an element's source is told from its free
// field for each way one is made, and that elemSrc stays 16 bytes.
func TestElemSrcKind(t *testing.T) {
	if n := unsafe.Sizeof(elemSrc{}); n != 16 {
		t.Fatalf("elemSrc is %d bytes, want 16", n)
	}
	for _, c := range []struct {
		e    elemSrc
		kind uint8
		free int32
	}{
		{elemSrc{ref: 7, free: freeNone}, srcAlloc, -1},
		{elemSrc{ref: 0, free: freeNone}, srcAlloc, -1},
		{elemSrc{ref: 7, free: 9}, srcAlloc, 9},
		{elemSrc{ref: 9, free: 9}, srcFree, 9},
		{elemSrc{ref: 0, free: 0}, srcFree, 0},
		{elemSrc{ref: 3, free: freeGhost}, srcGhostBlock, -1},
		{elemSrc{ref: 0, free: freeDumpSeg}, srcDumpSeg, -1},
	} {
		if k, f := c.e.kind(), c.e.freeEvent(); k != c.kind || f != c.free {
			t.Errorf("%+v: kind %d free %d, want %d %d", c.e, k, f, c.kind, c.free)
		}
	}
}

// TestRadixSort: radixSort sorts as slices.Sort does, for lengths on both
// sides of its cut and values that share digits (aligned addresses in one
// range) or not.
func TestRadixSort(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, n := range []int{0, 1, 5, 1023, 1024, 1025, 5000, 70000} {
		for _, gen := range []func() uint64{
			r.Uint64,
			func() uint64 { return 0x7f0000000000 + uint64(r.Intn(1<<28))*512 },
			func() uint64 { return uint64(r.Intn(3)) << 40 },
			func() uint64 { return 0x7f0000000000 },
		} {
			a := make([]uint64, n)
			for i := range a {
				a[i] = gen()
			}
			want := slices.Clone(a)
			slices.Sort(want)
			if got := radixSort(a); !slices.Equal(got, want) {
				t.Fatalf("%d values: radixSort differs from slices.Sort", n)
			}
		}
	}
}

// TestSortedWalk: sortedWalk.has answers as a set does, for values asked
// in rising order (with repeats and long skips) and out of order.
func TestSortedWalk(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for iter := 0; iter < 200; iter++ {
		n := r.Intn(3000)
		set := map[uint64]bool{}
		a := make([]uint64, 0, n)
		for range n {
			v := uint64(r.Intn(10000))
			if !set[v] {
				set[v] = true
				a = append(a, v)
			}
		}
		slices.Sort(a)
		qs := make([]uint64, r.Intn(2000))
		for i := range qs {
			qs[i] = uint64(r.Intn(10100))
		}
		if iter%3 != 0 {
			slices.Sort(qs) // rising, as the dump's blocks come
		}
		w := sortedWalk{a: a, i: -1}
		for _, q := range qs {
			if got := w.has(q); got != set[q] {
				t.Fatalf("iter %d: has(%d) = %v, want %v", iter, q, got, set[q])
			}
		}
	}
}
