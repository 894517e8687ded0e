package replay

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
)

func (t *Timeline) query(t0, t1 float64, w, h int, y0, y1 float64, o QueryOptions) *Frame {
	f := &Frame{T0: t0, T1: t1, Y0: y0, Y1: y1, Width: w, Height: h, Starts: []int32{0}}
	if w <= 0 || h <= 0 || !(t1 > t0) || !(y1 > y0) || math.IsInf(t1-t0, 0) || math.IsInf(y1-y0, 0) {
		f.Width, f.Height = max(w, 0), max(h, 0)
		f.ColMin, f.ColMax = make([]float64, f.Width), make([]float64, f.Width)
		return f
	}
	if o.Detail == 0 {
		o.Detail = 15000
	}
	tpp := (t1 - t0) / float64(w) // timesteps per pixel
	bpp := (y1 - y0) / float64(h) // bytes per pixel
	// The columns' totals read only the runs, and nothing below reads
	// them: they are found on another goroutine beside the selection and
	// the sweep, on the second core that the page leaves idle while it
	// waits for the window. On the 80 MB tile's whole-trace window (the
	// first paint's) they took 2-11 ms cold and 1.5-2.5 ms warm, on one
	// core, of a query of 8-14 ms.
	colsDone := make(chan struct{})
	var colsPanic any
	go func() {
		defer close(colsDone)
		defer func() { colsPanic = recover() }()
		f.ColMin, f.ColMax = t.columns(t0, tpp, w)
	}()
	defer func() {
		<-colsDone
		if colsPanic != nil {
			panic(colsPanic)
		}
	}()

	if t.ser != nil {
		t.polygonsMaterialized(f, t.selectMaterialized(t0, t1), t0, t1, tpp, bpp, o.Detail)
		return f
	}
	// 1-2. The largest Detail elements that intersect the window, and the
	// bottom edge of each at its first sample.
	vis, baseBySize := t.selectWindow(f, t0, t1, y0, y1, o.Detail)
	if len(vis) == 0 {
		return f
	}
	// vis comes largest first, the order of the frame's polygons; the
	// sweep wants it up the stack. rank[k] is the k-th element's place in
	// the frame.
	nv := len(vis)
	rank := make([]int32, nv)
	rankPos := make([]int32, nv)
	for r, id := range vis {
		rank[r], rankPos[r] = int32(r), t.pos[id]
	}
	slices.SortFunc(rank, func(a, b int32) int { return cmp.Compare(rankPos[a], rankPos[b]) })
	bySize := vis
	vis = make([]int32, nv)
	for k, r := range rank {
		vis[k] = bySize[r]
	}
	vpos := make([]int32, nv)
	base := make([]float64, nv)
	baseT := make([]float64, nv)
	for k, id := range vis {
		vpos[k] = t.pos[id]
		base[k] = baseBySize[rank[k]]
		baseT[k] = max(t0, float64(t.start[id]))
	}

	// 3. Sweep the frees that slide things inside the window. For element
	// k, the slide since its first sample is C_k(x) - C_k(baseT) with
	// C_k(x) = sum over frees j below it of size_j * ramp_j(x).
	f0 := sort.Search(len(t.freeEnd), func(i int) bool { return float64(t.freeEnd[i])+3 > t0 })
	f1 := sort.Search(len(t.freeEnd), func(i int) bool { return float64(t.freeEnd[i]) >= t1 })
	// q[j] is the first visible index above free j (nv: none, the free
	// slides nothing drawn), qOf(j), kept for the frees while they ramp.
	// The frees' ends and sizes are read in place.
	top := vpos[nv-1]
	frSize, frEnd := t.freeSize[f0:f1], t.freeEnd[f0:f1]
	qp := int32s(f1 - f0) // 16 MB for the 1 GB tile's whole trace
	defer putInt32s(qp)
	q := *qp
	// aboveBlk[b] is the first visible index at or above stack position
	// b*prefixBlock: a free finds the first above it from there in a few
	// steps, without a binary search (an array per position, 20 MB on the
	// 1 GB tile, was a tenth of a zoomed query).
	aboveBlk := make([]int32, top/prefixBlock+1)
	for b, k := range aboveBlk {
		if b > 0 {
			k = aboveBlk[b-1]
		}
		for int(k) < nv && vpos[k] < int32(b*prefixBlock) {
			k++
		}
		aboveBlk[b] = k
	}
	frPos := t.freePos[f0:f1]
	qOf := func(j int) int32 {
		p := frPos[j]
		if p >= top {
			return int32(nv)
		}
		k := aboveBlk[p/prefixBlock]
		for vpos[k] <= p {
			k++
		}
		return k
	}
	var sl *Slides // the slides, not the points (QueryOptions.Slides)
	if o.Slides {
		sl = &Slides{}
	}
	fen := make([]float64, nv+1) // completed frees, Fenwick by q
	completed, started := 0, 0   // frees [0,completed) done, [completed,started) ramping
	dirty := nv                  // lowest visible index whose slide changed since the last column
	// The completed frees wait in pend, by q, until fen is read: a wide
	// window completes millions of frees (3.9 M on the 1 GB tile's whole
	// trace), most of them between the same two drawn elements, and one
	// Fenwick update per q and column replaces one per free. The sums are
	// of whole bytes, exact in any order.
	pend := make([]float64, nv)
	var touched []int32
	flush := func() {
		for _, k := range touched {
			s := pend[k]
			pend[k] = 0
			for i := int(k) + 1; i <= nv; i += i & -i {
				fen[i] += s
			}
		}
		touched = touched[:0]
	}
	complete := func(j int, k int32) {
		dirty = min(dirty, int(k))
		if s := float64(frSize[j]); s > 0 && int(k) < nv {
			if pend[k] == 0 {
				touched = append(touched, k)
			}
			pend[k] += s
		}
	}
	advanceTo := func(x float64) {
		// The ramping frees that complete by x first: then, once none
		// ramps, the frees that start and complete before x are done
		// in one pass (most of a wide window's), their q found and used
		// at once; q keeps those that ramp. (Frees are dense: one ramped
		// at nearly every column and mark of the 1 GB tile's whole
		// trace, and every free then took the way of the ramping ones,
		// two thirds of its sweep.)
		for completed < started && float64(frEnd[completed])+3 <= x {
			complete(completed, q[completed])
			completed++
		}
		if completed == started {
			// complete(j, qOf(j)) written out: this loop sees every
			// free of the window (3.9 M on the 1 GB tile's whole trace),
			// and a free above the top drawn element changes nothing.
			j := started
			for ; j < len(frSize) && float64(frEnd[j])+3 <= x; j++ {
				p := frPos[j]
				if p >= top {
					continue
				}
				k := aboveBlk[p/prefixBlock]
				for vpos[k] <= p {
					k++
				}
				dirty = min(dirty, int(k))
				if s := frSize[j]; s > 0 {
					if pend[k] == 0 {
						touched = append(touched, k)
					}
					pend[k] += float64(s)
				}
			}
			started, completed = j, j
		}
		for started < len(frSize) && float64(frEnd[started]) < x {
			q[started] = qOf(started)
			dirty = min(dirty, int(q[started]))
			if sl != nil && int(q[started]) < nv && frSize[started] > 0 {
				sl.RampQ = append(sl.RampQ, q[started])
				sl.RampSize = append(sl.RampSize, float64(frSize[started]))
				sl.RampEnd = append(sl.RampEnd, float64(frEnd[started]))
			}
			started++
		}
		for completed < started && float64(frEnd[completed])+3 <= x {
			complete(completed, q[completed])
			completed++
		}
	}
	ramping := func(k int, x float64) float64 {
		var c float64
		for j := completed; j < started; j++ {
			if int(q[j]) <= k {
				// Converted once multiplied: never fused into one
				// rounding, as the page's copy of the sweep (wincode.js)
				// cannot.
				c += float64(float64(frSize[j]) * min(1, (x-float64(frEnd[j]))/3))
			}
		}
		return c
	}
	cAt := func(k int, x float64) float64 { // C_k(x), after advanceTo(x)
		flush()
		var c float64
		for i := k + 1; i > 0; i -= i & -i {
			c += fen[i]
		}
		return c + ramping(k, x)
	}

	// Sample times: column boundaries plus element starts and ends.
	type mark struct {
		x    float64
		k    int32
		kind int8 // 0 start, 1 end
	}
	marks := make([]mark, 0, 2*nv)
	for k, id := range vis {
		marks = append(marks, mark{baseT[k], int32(k), 0})
		marks = append(marks, mark{min(float64(t.end[id]), t1), int32(k), 1})
	}
	// Plain comparisons: the marks' times are never NaN (the window's
	// edges are finite), which cmp.Compare checks on every comparison.
	slices.SortFunc(marks, func(a, b mark) int {
		switch {
		case a.x < b.x:
			return -1
		case a.x > b.x:
			return 1
		}
		return int(a.kind) - int(b.kind)
	})
	if sl != nil {
		// The sweep's steps, each mark's time and each column edge in
		// order (advanceTo's calls below), with the frees each step
		// completes, grouped by the first drawn element above them;
		// the page makes the points (wincode.js).
		group := func(x float64) {
			if len(touched) == 0 {
				return
			}
			sl.GroupX = append(sl.GroupX, x)
			sl.GroupN = append(sl.GroupN, int32(len(touched)))
			for _, k := range touched {
				sl.SlideQ = append(sl.SlideQ, k)
				sl.SlideBytes = append(sl.SlideBytes, pend[k])
				pend[k] = 0
			}
			touched = touched[:0]
		}
		sl.ColX = make([]float64, w+1)
		mi := 0
		for col := 0; col <= w; col++ {
			xc := t0 + float64(col)*tpp
			if col == w {
				xc = t1
			}
			sl.ColX[col] = xc
			for ; mi < len(marks) && marks[mi].x < xc; mi++ {
				advanceTo(marks[mi].x)
				group(marks[mi].x)
			}
			advanceTo(xc)
			group(xc)
			for mi < len(marks) && marks[mi].x == xc {
				mi++
			}
		}
		if len(sl.SlideQ)+len(sl.RampQ) >= nv/slidesPerElement {
			sl.IDs, sl.Rank, sl.Base, sl.StartX = vis, rank, base, baseT
			sl.Size, sl.EndX = make([]float64, nv), make([]float64, nv)
			for k, id := range vis {
				sl.Size[k] = float64(t.src[id].size)
				sl.EndX[k] = min(float64(t.end[id]), t1)
			}
			f.Slides = sl
			return f
		}
		// Few slides: the points are few too (an element's are its
		// corners and two a slide below it), and the sweep makes them,
		// from the window's first free again.
		sl = nil
		completed, started, dirty = 0, 0, nv
		clear(fen)
		clear(pend)
		touched = touched[:0]
	}
	// Each element gets a point where its bottom edge changes, plus the
	// point just before (the previous column) so flat stretches stay flat.
	// The points as they come, every element's in one log of chunks kept
	// between queries: a zoomed-out window of the 264 MB tile has 15,000
	// elements whose bottom edges move at most columns, 2-4 M points, and
	// 15,000 slices growing by doubling were a fifth of its time. They are
	// put in order by element once the sweep is done.
	var ptLog [][]ptRec
	cur := ptChunk()
	c0 := make([]float64, nv) // C_k at the first sample
	// alive has a bit per element sampled now: a column visits the few
	// alive in it (a whole-trace window has thousands of columns, 15,000
	// elements and a few dozen alive at a time), not every one above its
	// lowest change.
	alive := make([]uint64, (nv+63)/64)
	lastVal := make([]float64, nv)
	lastX := make([]float64, nv)
	px := func(x float64) float32 { return float32((x - t0) / tpp) }
	py := func(bytes float64) float32 { return float32((y1 - bytes) / bpp) }
	emit := func(k int, x, v float64) {
		if len(cur) == cap(cur) {
			ptLog = append(ptLog, cur)
			cur = ptChunk()
		}
		cur = append(cur, ptRec{int32(k), px(x), py(v)})
		lastX[k], lastVal[k] = x, v
	}
	prevX := t0 // previous column boundary
	change := func(k int, x, v float64) {
		if v == lastVal[k] {
			return
		}
		if prevX > lastX[k] && prevX < x {
			emit(k, prevX, lastVal[k])
		}
		emit(k, x, v)
	}
	startAt := func(k int, x float64) {
		c0[k] = cAt(k, x)
		alive[k>>6] |= 1 << (k & 63)
		emit(k, x, base[k])
	}
	endAt := func(k int, x float64) {
		if alive[k>>6]&(1<<(k&63)) == 0 {
			return
		}
		v := base[k] - (cAt(k, x) - c0[k])
		change(k, x, v)
		if lastX[k] < x {
			emit(k, x, v)
		}
		alive[k>>6] &^= 1 << (k & 63)
	}
	mi := 0
	for col := 0; col <= w; col++ {
		xc := t0 + float64(col)*tpp
		if col == w {
			xc = t1
		}
		for mi < len(marks) && marks[mi].x < xc {
			m := marks[mi]
			mi++
			advanceTo(m.x)
			if m.kind == 0 {
				startAt(int(m.k), m.x)
			} else {
				endAt(int(m.k), m.x)
			}
		}
		advanceTo(xc)
		for mi < len(marks) && marks[mi].x == xc && marks[mi].kind == 0 {
			startAt(int(marks[mi].k), xc)
			mi++
		}
		lo := dirty
		for j := completed; j < started; j++ {
			lo = min(lo, int(q[j]))
		}
		if lo < nv {
			flush()
			// The hot loop of the query: the elements alive from lo up,
			// each with its sum of completed frees below it (sizes are
			// whole bytes, so the sums are exact in any order); the
			// closures are called only where something changes.
			ramps := started > completed
			for wi := lo >> 6; wi < len(alive); wi++ {
				word := alive[wi]
				if wi == lo>>6 {
					word &= ^uint64(0) << (lo & 63)
				}
				for word != 0 {
					k := wi<<6 | bits.TrailingZeros64(word)
					word &= word - 1
					var v float64
					for i := k + 1; i > 0; i -= i & -i {
						v += fen[i]
					}
					if ramps {
						v += ramping(k, xc)
					}
					if v = base[k] - (v - c0[k]); v != lastVal[k] {
						change(k, xc, v)
					}
				}
			}
		}
		dirty = nv
		for mi < len(marks) && marks[mi].x == xc {
			endAt(int(marks[mi].k), xc)
			mi++
		}
		prevX = xc
	}

	// pts[k] is element k's x, bottom pairs in pixels, in time order.
	ptLog = append(ptLog, cur)
	defer putPtChunks(ptLog)
	pts := make([][]float32, nv)
	{
		at := make([]int, nv+1)
		for _, c := range ptLog {
			for _, r := range c {
				at[r.k+1] += 2
			}
		}
		for k := range nv {
			at[k+1] += at[k]
		}
		flat := flats.Get(at[nv])
		defer flats.Put(flat)
		for k := range nv {
			pts[k] = flat[at[k]:at[k]:at[k+1]]
		}
		for _, c := range ptLog {
			for _, r := range c {
				pts[r.k] = append(pts[r.k], r.x, r.y)
			}
		}
	}

	// 4. Polygons, largest first, dropping samples on flat stretches and
	// elements entirely outside [y0, y1]; each is written once, straight
	// into the frame.
	kOf := make([]int32, nv) // by rank
	nPts := 0
	for k, id := range vis {
		kOf[rank[k]] = int32(k)
		p := simplify(pts[k])
		pts[k] = p
		if len(p) < 4 {
			pts[k] = nil
			continue
		}
		sizePx := float32(float64(t.src[id].size) / bpp)
		// Plain comparisons: min and max of floats, which order NaNs
		// and zeros, were a tenth of a window with millions of points.
		lo, hi := p[1], p[1]
		for i := 3; i < len(p); i += 2 {
			if y := p[i]; y < lo {
				lo = y
			} else if y > hi {
				hi = y
			}
		}
		if hi < 0 || lo-sizePx > float32(h) {
			pts[k] = nil
			continue
		}
		nPts += len(p)
	}
	f.IDs = make([]int32, 0, nv)
	f.Points = points(2 * nPts)
	f.Starts = slices.Grow(f.Starts, nv)
	for _, k := range kOf {
		p := pts[k]
		if p == nil {
			continue
		}
		id := vis[k]
		sizePx := float32(float64(t.src[id].size) / bpp)
		f.IDs = append(f.IDs, id)
		f.Points = append(f.Points, p...)
		for i := len(p) - 2; i >= 0; i -= 2 {
			f.Points = append(f.Points, p[i], p[i+1]-sizePx)
		}
		f.Starts = append(f.Starts, int32(len(f.Points)/2))
	}
	return f
}

// slidesPerElement: a window asked for as slides (QueryOptions.Slides)
// whose slides are fewer than one per slidesPerElement drawn elements has
// its points instead: 4-6 an element (44-60 bytes as sent), against 56
// bytes an element as slides, and no points for the reader to make. The
// 264 MB tile's zoomed windows are 480-660 KB of points, 540-740 KB as
// slides.
const slidesPerElement = 8

// int32Bufs keeps the large per-query arrays between queries: a whole
// trace's allocated 30 MB each time, and the server's collector, which
// runs often to keep its resident memory down, charged the query for it.
var int32Bufs sync.Pool

// int32s returns a buffer of n int32s (not zeroed) from int32Bufs.
func int32s(n int) *[]int32 {
	p, _ := int32Bufs.Get().(*[]int32)
	if p == nil {
		p = new([]int32)
	}
	*p = slices.Grow((*p)[:0], n)[:n]
	return p
}

// putInt32s gives a buffer of int32s back.
func putInt32s(p *[]int32) { int32Bufs.Put(p) }

// Held keeps one buffer between window queries: the largest given back. A
// zoomed-out window of the 264 MB tile needs 50-70 MB of them (its points
// in order by element, the frame's points, the encoded answer), and fresh
// ones, from a sync.Pool that the server's frequent collections empty,
// were faulted in and cleared again for every such window. The zero
// value holds nothing.
type Held[T any] struct {
	mu sync.Mutex
	b  []T
}

// Get returns a buffer of n Ts (not zeroed), the one held when it is
// large enough.
func (h *Held[T]) Get(n int) []T {
	h.mu.Lock()
	b := h.b
	if cap(b) >= n {
		h.b = nil
	}
	h.mu.Unlock()
	if cap(b) < n {
		return make([]T, n)
	}
	return b[:n]
}

// Put gives b back: it is held if it is larger than the one held.
func (h *Held[T]) Put(b []T) {
	h.mu.Lock()
	if cap(b) > cap(h.b) {
		h.b = b[:0]
	}
	h.mu.Unlock()
}

var (
	flats  Held[float32] // a query's points in order by element
	frames Held[float32] // the frames' points (Frame.Release)
)

// ptChunks holds the chunks of the sweeps' point logs between queries.
var ptChunks struct {
	mu   sync.Mutex
	free [][]ptRec
}

// ptChunk returns an empty chunk of a point log: growing one log by
// doubling copied it over and over, for the first big window most of all.
func ptChunk() []ptRec {
	ptChunks.mu.Lock()
	defer ptChunks.mu.Unlock()
	if n := len(ptChunks.free); n > 0 {
		c := ptChunks.free[n-1]
		ptChunks.free = ptChunks.free[:n-1]
		return c[:0]
	}
	return make([]ptRec, 0, 1<<14)
}

// putPtChunks gives a point log's chunks back.
func putPtChunks(cs [][]ptRec) {
	ptChunks.mu.Lock()
	ptChunks.free = append(ptChunks.free, cs...)
	ptChunks.mu.Unlock()
}

// points returns an empty slice with room for n float32s (frames).
func points(n int) []float32 { return frames.Get(n)[:0] }

// ptRec is a point of element k's bottom edge, in pixels, as a query's
// sweep draws it.
type ptRec struct {
	k    int32
	x, y float32
}

// simplify drops interior points of horizontal runs from x,y pairs and
// points at the same x and y as their predecessor.
func simplify(p []float32) []float32 {
	out := p[:0]
	n := len(p) / 2
	for i := 0; i < n; i++ {
		x, y := p[2*i], p[2*i+1]
		if i > 0 && i < n-1 {
			py, ny := p[2*i-1], p[2*i+3]
			if py == y && ny == y {
				continue
			}
		}
		if m := len(out); m >= 2 && out[m-2] == x && out[m-1] == y {
			continue
		}
		out = append(out, x, y)
	}
	return out
}

// columns returns the min and max of max_at_time over each pixel column.
// Column c covers timesteps [a, b), a = floor of its left edge and b the
// ceiling of its right edge (at least a+1): the runs from the last that
// starts at or before a to the first that starts at or after b.
func (t *Timeline) columns(t0, tpp float64, w int) (mn, mx []float64) {
	mn, mx = make([]float64, w), make([]float64, w)
	nRuns, runStart, query := len(t.runStart), func(i int) int32 { return t.runStart[i] }, t.runIdx.query
	if t.cruns != nil {
		nRuns, runStart, query = len(t.cruns.code), t.runStartAt, t.queryRuns
	}
	if nRuns == 0 {
		return
	}
	// The columns' a+1 and b, clamped to the trace; both rise with c.
	ts := float64(t.timesteps)
	next, end := make([]float64, w), make([]float64, w)
	for c := range w {
		a := math.Floor(t0 + float64(c)*tpp)
		b := math.Ceil(t0 + float64(c+1)*tpp)
		if b <= a {
			b = a + 1
		}
		next[c], end[c] = min(max(a, 0), ts)+1, min(max(b, 0), ts)
	}
	// first[c] is the first run starting at or after v[c]: each column's
	// two searches are narrowed by their neighbours' (searchSorted), where
	// 3,200 searches over the whole runs, each step a cache miss, were
	// a tenth of a window on the 1 GB tile.
	first0, first1 := make([]int, w), make([]int, w)
	var starts []int32
	if t.cruns != nil {
		if p := t.cruns.starts.Load(); p != nil {
			starts = *p
		}
	}
	if len(starts) > 0 {
		// A block of runs at a time first, from the starts of the
		// blocks' first runs (runStarts), then inside the block: two
		// dependent cache misses for each step over the whole runs were
		// a tenth of the 1 GB tile's whole-trace window.
		for _, fs := range [2]struct {
			v     []float64
			first []int
		}{{next, first0}, {end, first1}} {
			searchSorted(fs.v, fs.first, 0, len(starts), func(b int) float64 { return float64(starts[b]) })
			for c, b := range fs.first {
				// The first run at or after v is past block b-1's first
				// (which starts before v) and at most block b's first.
				lo, hi := max(b-1, 0)*runBlock, min(b*runBlock, nRuns)
				if b == 0 {
					hi = 0
				}
				v := fs.v[c]
				fs.first[c] = lo + sort.Search(hi-lo, func(i int) bool { return float64(runStart(lo+i)) >= v })
			}
		}
	} else {
		searchSorted(next, first0, 0, nRuns, func(i int) float64 { return float64(runStart(i)) })
		searchSorted(end, first1, 0, nRuns, func(i int) float64 { return float64(runStart(i)) })
	}
	for c := range w {
		a := math.Floor(t0 + float64(c)*tpp)
		b := math.Ceil(t0 + float64(c+1)*tpp)
		if b <= a {
			b = a + 1
		}
		if b <= 0 || a >= ts {
			continue
		}
		r0 := max(first0[c]-1, 0)
		r1 := first1[c]
		if r1 <= r0 {
			r1 = r0 + 1
		}
		lo, hi := query(r0, r1)
		mn[c], mx[c] = float64(lo), float64(hi)
	}
	return
}

// searchSorted sets out[i], for every value v[i] of nondecreasing v, to
// the first index j in [lo, hi) with at(j) >= v[i] (hi if none), at
// nondecreasing: the middle value's search bounds the searches of the
// values on either side of it.
func searchSorted(v []float64, out []int, lo, hi int, at func(int) float64) {
	if len(v) == 0 {
		return
	}
	m := len(v) / 2
	j := lo + sort.Search(hi-lo, func(i int) bool { return at(lo+i) >= v[m] })
	out[m] = j
	searchSorted(v[:m], out[:m], lo, j, at)
	searchSorted(v[m+1:], out[m+1:], j, hi, at)
}
