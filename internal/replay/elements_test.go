package replay

import (
	"math/rand"
	"sort"
	"testing"
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
