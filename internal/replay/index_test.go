package replay

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// TestEndTreeMatchesScan checks endTree's listing and count, and
// maxTree's listing, against a scan of their values, over lengths around
// their block sizes and powers of two, thresholds inside and outside the
// values, and every kind of range.
func TestEndTreeMatchesScan(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, n := range []int{0, 1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 1000, 4099, 1<<16 + 70} {
		vals := make([]int32, n)
		span := int32(1 + r.Intn(50))
		for i := range vals {
			vals[i] = r.Int31n(span) - 5
			if r.Intn(40) == 0 {
				vals[i] = math.MaxInt32
			}
		}
		tr := newEndTree(vals)
		mt := newMaxTree(vals)
		for q := 0; q < 300; q++ {
			from, limit := r.Intn(n+3)-1, r.Intn(n+20)
			above := r.Int31n(span+12) - 8
			switch q % 10 {
			case 0:
				above = math.MinInt32
			case 1:
				above = math.MaxInt32
			case 2:
				from, limit = 0, n
			}
			var want []int
			for i := max(from, 0); i < min(limit, n); i++ {
				if vals[i] > above {
					want = append(want, i)
				}
			}
			var got []int
			tr.eachIn(from, limit, above, func(i int) { got = append(got, i) })
			if !slices.Equal(got, want) {
				t.Fatalf("n %d: eachIn(%d, %d, %d) = %v, want %v", n, from, limit, above, got, want)
			}
			var gotMax []int
			mt.eachWhile(from, limit, above, func(i int) bool { gotMax = append(gotMax, i); return true })
			if !slices.Equal(gotMax, want) {
				t.Fatalf("n %d: maxTree eachWhile(%d, %d, %d) = %v, want %v", n, from, limit, above, gotMax, want)
			}
			if c := tr.count(from, limit, above); c != len(want) {
				t.Fatalf("n %d: count(%d, %d, %d) = %d, want %d", n, from, limit, above, c, len(want))
			}
			if from <= 0 {
				got = got[:0]
				tr.each(limit, above, func(i int) { got = append(got, i) })
				if !slices.Equal(got, want) {
					t.Fatalf("n %d: each(%d, %d) = %v, want %v", n, limit, above, got, want)
				}
			}
		}
	}
}
