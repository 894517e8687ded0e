package replay

import (
	"math"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// TestWindowLastClassLargestFirst checks a window whose last size class
// holds far more intersecting elements than Detail still wants, with more
// than classifyLimit elements in the classes after it: the class is
// classified largest first only until Detail intersect (classifyLargest),
// and the rest of it is counted in the summary's bound. The drawn elements
// must be the largest Detail that intersect (the naive polygons say which),
// the summary a bound at least the true count, and the answer before the
// index the same, bit for bit.
func TestWindowLastClassLargestFirst(t *testing.T) {
	r := rand.New(rand.NewSource(32))
	// Two size classes interleaved, 1-2 KiB and 16-31 bytes; every few
	// steps one of the last few elements is freed, sliding those above.
	var evs []ev
	var live []ev
	next := uint64(0x100000)
	for i := range 100_000 {
		size := uint64(1024 + r.Intn(1024))
		if i%2 == 1 {
			size = uint64(16 + r.Intn(16))
		}
		e := ev{aAlloc, next, size}
		next += size + 512
		evs = append(evs, e)
		live = append(live, e)
		if i%7 == 6 && len(live) > 4 {
			j := len(live) - 1 - r.Intn(4)
			evs = append(evs, free(live[j].addr, live[j].size)...)
			live = append(live[:j], live[j+1:]...)
		}
	}
	s := mkSnapshot(evs, nil, nil)
	tl := NewTimeline(s, 0, KindActive)
	tl.waitBuckets()
	<-tl.blocksBuilt
	blocks, buckets := tl.blocksBuilt, tl.bucketsBuilt
	nv := naiveTimeline(s, 0, false)
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	checked, bounded := 0, 0
	for q := range 12 {
		t0 := T * (0.3 + 0.4*r.Float64())
		t1 := t0 + (T-t0)*(0.2+0.8*r.Float64())
		y0 := P * 0.05 * r.Float64()
		y1 := y0 + (P-y0)*(0.8+0.19*r.Float64())
		detail := []int{10, 100, 1000}[q%3]
		w, h := 200+r.Intn(400), 100+r.Intn(300)
		tl.blocksBuilt, tl.bucketsBuilt = blocks, buckets
		want := tl.QueryWith(t0, t1, w, h, y0, y1, QueryOptions{Detail: detail})
		if !want.SummaryExact {
			bounded++
		}
		if checkQuery(t, tl, nv, t0, t1, y0, y1, w, h, detail) {
			checked++
		}
		tl.bucketsBuilt = make(chan struct{})
		if q%2 == 1 {
			tl.blocksBuilt = make(chan struct{})
		}
		got := tl.QueryWith(t0, t1, w, h, y0, y1, QueryOptions{Detail: detail})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("window [%v,%v]x[%v,%v] Detail %d: before the index %d polygons, %d summarised; with it %d, %d",
				t0, t1, y0, y1, detail, len(got.IDs), got.Summarized, len(want.IDs), want.Summarized)
		}
	}
	tl.blocksBuilt, tl.bucketsBuilt = blocks, buckets
	// The bound path must have been taken, and most windows checked in
	// full against the naive polygons.
	if bounded < 6 || checked < 6 {
		t.Fatalf("%d windows with a bound summary, %d checked in full: the test does not test the last class's cut", bounded, checked)
	}
}

// TestSizeKeyOrdersSizes: a larger size never has a smaller key
// (largestOf takes every element of the keys above its cut), over
// every size to 4096, the powers of two and their neighbours, and random
// pairs.
func TestSizeKeyOrdersSizes(t *testing.T) {
	var sizes []uint64
	for v := uint64(0); v <= 4096; v++ {
		sizes = append(sizes, v)
	}
	for b := 12; b < 64; b++ {
		p := uint64(1) << b
		sizes = append(sizes, p-1, p, p+1, p+p/4, p+p/2, p+3*p/4, p+p-1)
	}
	sizes = append(sizes, math.MaxUint64)
	r := rand.New(rand.NewSource(3))
	for range 100000 {
		sizes = append(sizes, r.Uint64()>>r.Intn(64))
	}
	slices.Sort(sizes)
	for i := 1; i < len(sizes); i++ {
		if sizeKey(sizes[i]) < sizeKey(sizes[i-1]) {
			t.Fatalf("sizeKey(%d) = %d < sizeKey(%d) = %d", sizes[i], sizeKey(sizes[i]), sizes[i-1], sizeKey(sizes[i-1]))
		}
	}
	if sizeKey(1<<20) == sizeKey(1<<20+1<<18) {
		t.Errorf("sizes a quarter apart in one power of two share a key")
	}
}

// TestLargestOf: the largest elements filed by a sizeFiler over two
// halves of the elements (one maybe empty) are largest's (the k largest,
// largest first, then by index), with sizes that repeat a lot or not and
// k from none to all; and kthLargest with its sorting fallback (sizes in
// a pattern, rounds bounded).
func TestLargestOf(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for iter := 0; iter < 300; iter++ {
		n := r.Intn(3000) + 1
		spread := []uint64{1, 3, 50, 1 << 30, 1 << 62}[iter%5]
		tl := &Timeline{src: make([]elemSrc, n)}
		all := make([]int32, n)
		for i := range tl.src {
			tl.src[i].size = uint64(r.Int63n(int64(spread)))
			if iter%7 == 0 {
				tl.src[i].size <<= 1 // sizes of 2^63 and up
			}
			tl.src[i].free = int32(r.Intn(2)) - 1
			all[i] = int32(i)
		}
		mid := []int{0, n / 2, n}[iter%3]
		f := &sizeFiler{keys: make([]uint8, n)}
		var counts [2][256]int32
		end := make([]int32, n)
		f.fileElements(&counts[0], tl.src, end, 5, 0, mid)
		f.fileElements(&counts[1], tl.src, end, 5, mid, n)
		for k := range f.counts {
			f.counts[k] = counts[0][k] + counts[1][k]
		}
		for id, e := range tl.src {
			if want := int32(0); e.free < 0 && end[id] != 5 || e.free >= 0 && end[id] != want {
				t.Fatalf("iter %d: element %d (free %d): end %d", iter, id, e.free, end[id])
			}
		}
		for _, k := range []int{0, 1, r.Intn(n + 1), n, n + 5} {
			want := tl.largest(slices.Clone(all), k)
			if got := f.largestOf(tl.src, k); !slices.Equal(got, want) {
				t.Fatalf("iter %d: %d of %d elements (split at %d): got %v, want %v", iter, k, n, mid, got, want)
			}
		}
	}
	a := make([]uint64, 5000)
	for i := range a {
		a[i] = uint64(i % 7 * 1000)
	}
	want := slices.Clone(a)
	slices.Sort(want)
	defer func(r int) { selectRounds = r }(selectRounds)
	for _, rounds := range []int{64, 1, 0} {
		selectRounds = rounds
		for _, k := range []int{1, 10, 2500, 5000} {
			if got := kthLargest(slices.Clone(a), k); got != want[len(want)-k] {
				t.Errorf("%d rounds: kthLargest(k %d) = %d, want %d", rounds, k, got, want[len(want)-k])
			}
		}
	}
}
