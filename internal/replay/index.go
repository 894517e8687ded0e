package replay

import "math"

// maxTree lists the positions of a prefix whose value exceeds a
// threshold in O(k log n) for k results (intervals by start order,
// pruned by end): the values themselves in one column, and a segment
// tree of the maxima of blocks of maxBlock of them. The Active Memory
// Timeline's tree (aliveTree) is built between the decode's end and the
// first window: a tree down to every value (a power of two of leaves and
// as many inner nodes, 67 MB for the 1 GB tile's 5.3 M elements) took 15
// ms to build there, and a block of values is two cache lines, read whole
// where the tree says it holds a result.
type maxTree struct {
	n    int     // number of values
	v    []int32 // the values (the leaves)
	size int     // power of two >= the number of blocks
	mx   []int32 // mx[size+b] is block b's maximum; inner nodes above
}

// maxBlock is how many values a leaf of a maxTree's tree covers: a
// stack block (prefixAt reads its maximum).
const maxBlock = prefixBlock

func newMaxTree(vals []int32) maxTree {
	return newMaxTreeOf(len(vals), func(i int) int32 { return vals[i] })
}

// newMaxTreeOf builds the tree of n leaves, leaf i being val(i).
func newMaxTreeOf(n int, val func(i int) int32) maxTree {
	t := emptyMaxTree(n)
	for i := range n {
		t.v[i] = val(i)
	}
	t.build()
	return t
}

// emptyMaxTree allocates the tree of n leaves, to be filled in (v) and
// built.
func emptyMaxTree(n int) maxTree {
	nb := (n + maxBlock - 1) / maxBlock
	size := 1
	for size < nb {
		size <<= 1
	}
	return maxTree{n: n, size: size, v: make([]int32, n), mx: make([]int32, 2*size)}
}

// blocks computes the maxima of blocks [b0, b1).
func (t *maxTree) blocks(b0, b1 int) {
	for b := b0; b < b1; b++ {
		m := int32(-1 << 31)
		if lo := b * maxBlock; lo < t.n {
			for _, v := range t.v[lo:min(lo+maxBlock, t.n)] {
				m = max(m, v)
			}
		}
		t.mx[t.size+b] = m
	}
}

// inner computes the inner nodes from the blocks' maxima.
func (t *maxTree) inner() {
	t.mx[0] = -1 << 31
	for i := t.size - 1; i >= 1; i-- {
		t.mx[i] = max(t.mx[2*i], t.mx[2*i+1])
	}
}

// finish computes the inner nodes and the maxima of the blocks past
// the values (none): those of the values' blocks are written already.
func (t *maxTree) finish() {
	t.blocks((t.n+maxBlock-1)/maxBlock, t.size)
	t.inner()
}

// build computes the blocks' maxima and the inner nodes.
func (t *maxTree) build() {
	t.blocks(0, t.size)
	t.inner()
}

// blockMax is the largest value of block b (positions b*maxBlock up).
func (t *maxTree) blockMax(b int) int32 { return t.mx[t.size+b] }

// each calls fn, in increasing order, for every leaf i < limit with
// value > above.
func (t *maxTree) each(limit int, above int32, fn func(i int)) {
	t.eachIn(0, limit, above, fn)
}

// eachIn calls fn, in increasing order, for every leaf from <= i < limit
// with value > above.
func (t *maxTree) eachIn(from, limit int, above int32, fn func(i int)) {
	t.eachWhile(from, limit, above, func(i int) bool { fn(i); return true })
}

// eachWhile is eachIn until fn returns false.
func (t *maxTree) eachWhile(from, limit int, above int32, fn func(i int) bool) {
	limit = min(limit, t.n)
	if limit <= from {
		return
	}
	t.walk(1, 0, t.size, from, limit, above, fn)
}

// walk is eachWhile over node, which covers blocks [lo, hi).
func (t *maxTree) walk(node, lo, hi, from, limit int, above int32, fn func(int) bool) bool {
	if lo*maxBlock >= limit || hi*maxBlock <= from || t.mx[node] <= above {
		return true
	}
	if hi-lo == 1 {
		for i := max(from, lo*maxBlock); i < min(limit, hi*maxBlock); i++ {
			if t.v[i] > above && !fn(i) {
				return false
			}
		}
		return true
	}
	mid := (lo + hi) / 2
	return t.walk(2*node, lo, mid, from, limit, above, fn) && t.walk(2*node+1, mid, hi, from, limit, above, fn)
}

// blockMinMax is a segment tree of per-block minima and maxima: the
// shared part of rangeMinMax and compactRuns, which differ in how a
// block's values are read.
type blockMinMax struct {
	size     int      // power of two >= blocks
	min, max []uint64 // leaves at size+b
}

// newBlockMinMax builds the tree over nb blocks; leaf gives block b's min
// and max.
func newBlockMinMax(nb int, leaf func(b int) (mn, mx uint64)) blockMinMax {
	size := 1
	for size < nb {
		size <<= 1
	}
	t := blockMinMax{size: size, min: make([]uint64, 2*size), max: make([]uint64, 2*size)}
	for i := range t.min {
		t.min[i] = ^uint64(0)
	}
	for b := 0; b < nb; b++ {
		t.min[size+b], t.max[size+b] = leaf(b)
	}
	for i := size - 1; i >= 1; i-- {
		t.min[i] = min(t.min[2*i], t.min[2*i+1])
		t.max[i] = max(t.max[2*i], t.max[2*i+1])
	}
	return t
}

// fold returns mn and mx folded with the min and max of blocks [b0, b1).
func (t *blockMinMax) fold(b0, b1 int, mn, mx uint64) (uint64, uint64) {
	lo, hi := b0+t.size, b1+t.size
	for lo < hi {
		if lo&1 == 1 {
			mn, mx = min(mn, t.min[lo]), max(mx, t.max[lo])
			lo++
		}
		if hi&1 == 1 {
			hi--
			mn, mx = min(mn, t.min[hi]), max(mx, t.max[hi])
		}
		lo >>= 1
		hi >>= 1
	}
	return mn, mx
}

// rangeMinMax answers min/max over ranges of a uint64 series with blocks
// of 64 and a segment tree over the blocks: O(n/64) memory beyond the
// series, O(64 + log n) per query.
type rangeMinMax struct {
	vals []uint64
	blockMinMax
}

const rmmBlock = 64

func newRangeMinMax(vals []uint64) *rangeMinMax {
	nb := (len(vals) + rmmBlock - 1) / rmmBlock
	return &rangeMinMax{vals: vals, blockMinMax: newBlockMinMax(nb, func(b int) (uint64, uint64) {
		mn, mx := ^uint64(0), uint64(0)
		for _, v := range vals[b*rmmBlock : min((b+1)*rmmBlock, len(vals))] {
			mn = min(mn, v)
			mx = max(mx, v)
		}
		return mn, mx
	})}
}

// query returns min and max over vals[i0:i1] (i0 < i1).
func (r *rangeMinMax) query(i0, i1 int) (mn, mx uint64) {
	mn = ^uint64(0)
	b0, b1 := i0/rmmBlock, (i1-1)/rmmBlock
	if b1-b0 <= 1 {
		for _, v := range r.vals[i0:i1] {
			mn = min(mn, v)
			mx = max(mx, v)
		}
		return
	}
	for _, v := range r.vals[i0 : (b0+1)*rmmBlock] {
		mn = min(mn, v)
		mx = max(mx, v)
	}
	for _, v := range r.vals[b1*rmmBlock : i1] {
		mn = min(mn, v)
		mx = max(mx, v)
	}
	// Whole blocks b0+1 .. b1-1 through the tree.
	return r.fold(b0+1, b1, mn, mx)
}

// endTree lists, like maxTree, the positions of a range whose value
// exceeds a threshold, and counts them, over the ends of a bucket's
// elements: the values themselves in one column, and a tree over blocks
// of endBlock of them holding each block's maximum and minimum. A block
// is one cache line, read whole where the tree says it holds a result.
// A maxTree and its negation (for counting) took 16 bytes per element
// and up to twice that for a bucket just past a power of two, 115 MB of a
// 1 GB snapshot's index; this takes a little over 4.
type endTree struct {
	v      []int32 // the values
	size   int     // power of two >= the number of blocks
	mx, mn []int32 // per node, the max and min of its blocks' values; leaves at size+b
}

// endBlock is how many values a leaf of an endTree's tree covers.
const endBlock = 16

// newEndTree builds the tree over vals (kept, not copied).
func newEndTree(vals []int32) endTree {
	nb := (len(vals) + endBlock - 1) / endBlock
	size := 1
	for size < nb {
		size <<= 1
	}
	t := endTree{v: vals, size: size, mx: make([]int32, 2*size), mn: make([]int32, 2*size)}
	for b := range size {
		mx, mn := int32(math.MinInt32), int32(math.MaxInt32)
		if b < nb {
			for _, e := range vals[b*endBlock : min((b+1)*endBlock, len(vals))] {
				mx, mn = max(mx, e), min(mn, e)
			}
		}
		t.mx[size+b], t.mn[size+b] = mx, mn
	}
	t.mx[0], t.mn[0] = math.MinInt32, math.MaxInt32
	for i := size - 1; i >= 1; i-- {
		t.mx[i], t.mn[i] = max(t.mx[2*i], t.mx[2*i+1]), min(t.mn[2*i], t.mn[2*i+1])
	}
	return t
}

// each calls fn, in increasing order, for every i < limit with
// v[i] > above.
func (t *endTree) each(limit int, above int32, fn func(i int)) {
	t.eachIn(0, limit, above, fn)
}

// eachIn calls fn, in increasing order, for every from <= i < limit with
// v[i] > above.
func (t *endTree) eachIn(from, limit int, above int32, fn func(i int)) {
	limit = min(limit, len(t.v))
	if limit <= from {
		return
	}
	t.walk(1, 0, t.size, from, limit, above, fn)
}

// walk is eachIn over node, which covers blocks [lo, hi).
func (t *endTree) walk(node, lo, hi, from, limit int, above int32, fn func(int)) {
	if lo*endBlock >= limit || hi*endBlock <= from || t.mx[node] <= above {
		return
	}
	if hi-lo == 1 {
		for i := max(from, lo*endBlock); i < min(limit, hi*endBlock); i++ {
			if t.v[i] > above {
				fn(i)
			}
		}
		return
	}
	mid := (lo + hi) / 2
	t.walk(2*node, lo, mid, from, limit, above, fn)
	t.walk(2*node+1, mid, hi, from, limit, above, fn)
}

// count returns how many from <= i < limit have v[i] > above, as eachIn
// would list them, counting a whole node at once when its minimum is
// above.
func (t *endTree) count(from, limit int, above int32) int {
	limit = min(limit, len(t.v))
	if limit <= from {
		return 0
	}
	return t.countWalk(1, 0, t.size, from, limit, above)
}

func (t *endTree) countWalk(node, lo, hi, from, limit int, above int32) int {
	i0, i1 := lo*endBlock, min(hi*endBlock, len(t.v))
	if i0 >= limit || i1 <= from || t.mx[node] <= above {
		return 0
	}
	if i0 >= from && i1 <= limit && t.mn[node] > above {
		return i1 - i0
	}
	if hi-lo == 1 {
		n := 0
		for i := max(from, i0); i < min(limit, i1); i++ {
			if t.v[i] > above {
				n++
			}
		}
		return n
	}
	mid := (lo + hi) / 2
	return t.countWalk(2*node, lo, mid, from, limit, above) + t.countWalk(2*node+1, mid, hi, from, limit, above)
}
