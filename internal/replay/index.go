package replay

// maxTree is a static max segment tree over int32 values, used to list the
// positions of a prefix whose value exceeds a threshold in
// O(k log n) for k results: intervals by start order, pruned by end.
type maxTree struct {
	n    int     // number of leaves in use
	size int     // power of two >= n
	v    []int32 // v[size+i] is leaf i
}

func newMaxTree(vals []int32) maxTree {
	return newMaxTreeOf(len(vals), func(i int) int32 { return vals[i] })
}

// newMaxTreeOf builds the tree of n leaves, leaf i being val(i).
func newMaxTreeOf(n int, val func(i int) int32) maxTree {
	t := emptyMaxTree(n)
	leaves := t.v[t.size:]
	for i := range n {
		leaves[i] = val(i)
	}
	t.build()
	return t
}

// endTrees builds the max trees of the ends of ids and of the ends
// negated, their leaves in one pass over ids (newMaxTreeOf's call per
// leaf was most of building a timeline's buckets).
func endTrees(ids, end []int32) (ends, negEnds maxTree) {
	ends, negEnds = emptyMaxTree(len(ids)), emptyMaxTree(len(ids))
	a, b := ends.v[ends.size:], negEnds.v[negEnds.size:]
	for i, id := range ids {
		e := end[id]
		a[i], b[i] = e, -e
	}
	ends.build()
	negEnds.build()
	return ends, negEnds
}

// emptyMaxTree allocates the tree of n leaves, to be filled in and built.
func emptyMaxTree(n int) maxTree {
	size := 1
	for size < n {
		size <<= 1
	}
	return maxTree{n: n, size: size, v: make([]int32, 2*size)}
}

// build pads the leaves past n and computes the inner nodes.
func (t *maxTree) build() {
	for i := t.n; i < t.size; i++ {
		t.v[t.size+i] = -1 << 31
	}
	t.v[0] = -1 << 31
	for i := t.size - 1; i >= 1; i-- {
		t.v[i] = max(t.v[2*i], t.v[2*i+1])
	}
}

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

func (t *maxTree) walk(node, lo, hi, from, limit int, above int32, fn func(int) bool) bool {
	if lo >= limit || hi <= from || t.v[node] <= above {
		return true
	}
	if hi-lo == 1 {
		return fn(lo)
	}
	mid := (lo + hi) / 2
	return t.walk(2*node, lo, mid, from, limit, above, fn) && t.walk(2*node+1, mid, hi, from, limit, above, fn)
}

// count returns how many leaves from <= i < limit have a value > above,
// as eachIn would list them; neg is the tree of the negated values, whose
// maxima let it count a whole subtree at once.
func (t *maxTree) count(neg *maxTree, from, limit int, above int32) int {
	limit = min(limit, t.n)
	if limit <= from {
		return 0
	}
	return t.countWalk(neg, 1, 0, t.size, from, limit, above)
}

func (t *maxTree) countWalk(neg *maxTree, node, lo, hi, from, limit int, above int32) int {
	if lo >= limit || hi <= from || t.v[node] <= above {
		return 0
	}
	if lo >= from && hi <= limit && -int64(neg.v[node]) > int64(above) {
		return min(hi, t.n) - lo
	}
	if hi-lo == 1 {
		return 1
	}
	mid := (lo + hi) / 2
	return t.countWalk(neg, 2*node, lo, mid, from, limit, above) + t.countWalk(neg, 2*node+1, mid, hi, from, limit, above)
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
