package replay

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
)

// classifyLimit bounds how many elements beyond Detail a query classifies
// to count the summary exactly when the window is not the whole height.
const classifyLimit = 20000

// sweepLimit bounds how many frees a query sweeps to find where the
// elements that start above the window and end inside it have slid to;
// past it they are not drawn but counted in the summary, as maybe
// intersecting.
const sweepLimit = 300_000

// overlapping appends to dst the elements of bucket bi that overlap
// (t0, t1) in time, start < t1 and end > t0, at stack positions in
// [r.lo, r.hi).
func (t *Timeline) overlapping(dst []int32, bi int32, t0, t1 float64, r posRange) []int32 {
	b := &t.buckets[bi]
	from, limit := t.bucketSpan(b, t1, r)
	b.ends.eachIn(from, limit, floorEnd(t0), func(i int) { dst = append(dst, b.ids[i]) })
	return dst
}

// countOverlapping is len(overlapping) without listing the elements.
func (t *Timeline) countOverlapping(bi int32, t0, t1 float64, r posRange) int {
	b := &t.buckets[bi]
	from, limit := t.bucketSpan(b, t1, r)
	return b.ends.count(from, limit, floorEnd(t0))
}

// posRange is a range of stack positions [lo, hi); a window's candidates
// lie in one (windowSel.bounds).
type posRange struct{ lo, hi int32 }

// anyPos is the range of every position.
var anyPos = posRange{0, math.MaxInt32}

// bucketSpan returns the part of bucket b's elements that start before t1
// and lie at stack positions in r: a bucket's elements are in start order
// and so in position order (an element is pushed when it starts).
func (t *Timeline) bucketSpan(b *bucket, t1 float64, r posRange) (from, limit int) {
	limit = sort.Search(len(b.ids), func(i int) bool { return float64(t.start[b.ids[i]]) >= t1 })
	if r.lo > 0 {
		from = sort.Search(limit, func(i int) bool { return t.pos[b.ids[i]] >= r.lo })
	}
	if r.hi < math.MaxInt32 {
		limit = from + sort.Search(limit-from, func(i int) bool { return t.pos[b.ids[from+i]] >= r.hi })
	}
	return from, limit
}

// floorEnd is the largest end that does not overlap a window from t0.
func floorEnd(t0 float64) int32 {
	return int32(max(math.Floor(t0), -1<<31))
}

// bySizeDesc orders elements largest first, then by index.
func (t *Timeline) bySizeDesc(a, b int32) int {
	sa, sb := t.itemSize(a), t.itemSize(b)
	if sa != sb {
		if sa > sb {
			return -1
		}
		return 1
	}
	return int(a - b)
}

// selectWindow returns the largest detail elements that intersect
// [t0, t1] x [y0, y1] (overlapping it in time, and in bytes at some
// moment), with each one's bottom edge at its first sample in the window
// (base[i] is vis[i]'s), and fills f's summary of the others.
//
// Elements come by size class, largest first, until Detail of them are
// known to intersect: all later ones are smaller. An element's offset
// never grows, so it intersects the window if its top at its first sample
// is above y0 and its bottom at its last sample is below y1. Only the
// elements at the stack positions between the window's bottom edge at t0
// and its top edge at t1 can (windowSel.bounds): a window zoomed in bytes
// looks at those alone.
func (t *Timeline) selectWindow(f *Frame, t0, t1, y0, y1 float64, detail int) (vis []int32, base []float64) {
	f.SummaryExact = true
	if detail < 0 {
		detail = 0
	}
	// The whole height: every element overlapping in time intersects.
	fullY := y0 <= 0 && y1 >= float64(t.peak)
	w := &windowSel{t: t, t0: t0, t1: t1, y0: y0, y1: y1, fullY: fullY, r: anyPos}
	defer func() { w.first.release(); w.last.release() }()
	if fullY && t0 <= 0 && t1 >= float64(t.timesteps) && detail <= wholeDetail && t.wholeBuilt != nil && !t.bucketsReady() {
		// The whole trace, as the first view asks for it while the
		// buckets are still being built: every element overlaps it (an
		// element is pushed before the last timestep and ends at 1 or
		// later), so the answer is the timeline's largest, which the
		// layout listed.
		<-t.wholeBuilt
		vis := slices.Clone(t.wholeTop[:min(detail, len(t.wholeTop))])
		f.Summarized += len(t.src) - len(vis)
		f.Truncated = f.Summarized > 0
		return vis, w.bases(vis)
	}
	if !fullY {
		w.bounds()
	}
	// The candidates come a size class at a time, largest first: from the
	// buckets, or, while they are being built, from scans of the elements
	// (a user's first zoom does not wait for the index; the answer is the
	// same, TestWindowBeforeIndex).
	bc := &bucketClasses{t: t, t0: t0, t1: t1, r: w.r, buf: int32s(0)}
	defer putInt32s(bc.buf)
	var cls classSource = bc
	if !t.bucketsReady() {
		t.StartIndexes()
		cls = newScanClasses(t, t0, t1, w.r)
	}
	classify := func(cand []int32) {
		if fullY {
			w.in = append(w.in, cand...)
		} else {
			w.classify(cand)
		}
	}
	// skipped is the part of the last class taken that was not
	// classified: its smallest elements, once Detail were known to
	// intersect (classifyLargest).
	var skipped []sizedID
	for cls.more() && len(w.in) < detail {
		cand := cls.next(detail - len(w.in))
		if fullY {
			classify(cand)
			continue
		}
		skipped = w.classifyLargest(cand, detail)
	}
	// The rest only count: exactly for the whole height or when they are
	// few, else as an upper bound.
	rest := cls.rest()
	if fullY {
		f.Summarized += rest
	} else if rest <= classifyLimit {
		ids := make([]int32, len(skipped))
		for i, e := range skipped {
			ids[i] = e.id
		}
		classify(ids)
		for cls.more() {
			classify(cls.next(rest))
		}
	} else {
		f.Summarized += rest + len(skipped)
		f.SummaryExact = false
	}
	w.putKeys()
	if n := w.resolve(); n > 0 {
		f.Summarized += n
		f.SummaryExact = false
	}

	all := w.in
	vis = t.largest(all, detail)
	f.Summarized += len(all) - len(vis)
	f.Truncated = f.Summarized > 0
	return vis, w.bases(vis)
}

// classSource lists the elements overlapping a window in time, one size
// class at a time, largest first.
type classSource interface {
	more() bool
	// next returns the next class's elements; want is about how many
	// more elements the caller expects to look at (a hint).
	next(want int) []int32
	// rest counts the elements of the classes not returned yet.
	rest() int
}

// bucketClasses takes the classes from the buckets.
type bucketClasses struct {
	t      *Timeline
	t0, t1 float64
	r      posRange
	ti     int
	// buf holds the class next returns, reused by the next call: the
	// caller copies what it keeps.
	buf *[]int32
}

func (b *bucketClasses) more() bool { return b.ti < len(b.t.bySize) }

func (b *bucketClasses) next(int) []int32 {
	t := b.t
	cand := (*b.buf)[:0]
	sc := t.buckets[t.bySize[b.ti]].sizeClass
	for ; b.ti < len(t.bySize) && t.buckets[t.bySize[b.ti]].sizeClass == sc; b.ti++ {
		cand = t.overlapping(cand, t.bySize[b.ti], b.t0, b.t1, b.r)
	}
	*b.buf = cand
	return cand
}

func (b *bucketClasses) rest() int {
	n := 0
	for _, bi := range b.t.bySize[b.ti:] {
		n += b.t.countOverlapping(bi, b.t0, b.t1, b.r)
	}
	return n
}

// scanClasses takes the classes from passes over the elements, for
// windows asked for before the buckets are built: one pass counts the
// elements of each class, and each later one collects as many classes
// (largest first) as the caller expects to need, so that a window takes
// two or three passes (about 10 ms each per million elements) and never
// holds more than it classifies. The elements are those at the window's
// stack positions, in position order as in the buckets.
type scanClasses struct {
	t        *Timeline
	t0, t1   float64
	fe       int32
	ids      []int32 // the positions' elements (a part of byPos)
	perClass [65]int
	class    int       // the largest class not collected yet
	pending  [][]int32 // collected, largest first, not yet returned
	left     int       // elements in classes not returned yet
}

func newScanClasses(t *Timeline, t0, t1 float64, r posRange) *scanClasses {
	lo, hi := min(int(r.lo), len(t.byPos)), min(int(r.hi), len(t.byPos))
	s := &scanClasses{t: t, t0: t0, t1: t1, fe: floorEnd(t0), class: 64, ids: t.byPos[lo:max(lo, hi)]}
	for _, id := range s.ids {
		if s.in(id) {
			s.perClass[bits.Len64(t.src[id].size)]++
			s.left++
		}
	}
	s.skipEmpty()
	return s
}

func (s *scanClasses) in(id int32) bool {
	return float64(s.t.start[id]) < s.t1 && s.t.end[id] > s.fe
}

func (s *scanClasses) skipEmpty() {
	for s.class >= 0 && s.perClass[s.class] == 0 {
		s.class--
	}
}

func (s *scanClasses) more() bool { return len(s.pending) > 0 || s.class >= 0 }

func (s *scanClasses) next(want int) []int32 {
	if len(s.pending) == 0 {
		// Collect classes from s.class down until they hold want
		// elements (at least one class), in one pass.
		hi, n := s.class, 0
		for s.class >= 0 && (n == 0 || n < want) {
			n += s.perClass[s.class]
			s.class--
			s.skipEmpty()
		}
		lo := s.class + 1
		ids := make([]int32, n)
		at := [65]int{}
		a := 0
		for c := hi; c >= lo; c-- {
			at[c] = a
			a += s.perClass[c]
		}
		for _, id := range s.ids {
			if c := bits.Len64(s.t.src[id].size); c >= lo && c <= hi && s.in(id) {
				ids[at[c]] = id
				at[c]++
			}
		}
		a = 0
		for c := hi; c >= lo; c-- {
			if k := s.perClass[c]; k > 0 {
				s.pending = append(s.pending, ids[a:a+k:a+k])
				a += k
			}
		}
	}
	cand := s.pending[0]
	s.pending = s.pending[1:]
	s.left -= len(cand)
	return cand
}

func (s *scanClasses) rest() int { return s.left }

// wholeDetail is how many of its largest elements a timeline lists as it
// is laid out (wholeTop), for windows over the whole trace: the page's
// Detail by default, and a query's.
const wholeDetail = 15000

// sizeFiler files elements by size key in the layout's one pass over the
// elements (fileElements), so that their wholeDetail largest can be told
// after from a byte an element (largestOf). Keeping the elements of the
// keys that could hold the largest, as they came, cost three times the
// pass on the 1 GB tile (a few keys hold hundreds of thousands).
type sizeFiler struct {
	keys   []uint8    // each element's sizeKey
	counts [256]int32 // the elements of each key
}

// fileElements files src's elements lo..hi-1 in f.keys, counting them in
// counts, and sets the end of each alive one (not freed: its polygon
// closes at timestep): the layout's one pass over the elements.
func (f *sizeFiler) fileElements(counts *[256]int32, src []elemSrc, end []int32, timestep int32, lo, hi int) {
	for id := lo; id < hi; id++ {
		e := &src[id]
		k := sizeKey(e.size)
		f.keys[id] = k
		counts[k]++
		if e.free < 0 { // not freed (freed)
			end[id] = timestep
		}
	}
}

// largestOf returns the k largest of the filed elements, largest first,
// then by index (cutKey, candidates and largestOfCands in one).
func (f *sizeFiler) largestOf(src []elemSrc, k int) []int32 {
	from, _ := f.cutKey(k)
	return largestOfCands(f.candidates(src, from, 0, len(f.keys)), k)
}

// cutKey returns the key from which the filed elements hold the k
// largest (every element of a key above it is among them, and some of
// its own), and how many elements those keys hold.
func (f *sizeFiler) cutKey(k int) (from uint8, n int) {
	key, above := 255, 0
	for key > 0 && above+int(f.counts[key]) < k {
		above += int(f.counts[key])
		key--
	}
	return uint8(key), above + int(f.counts[key])
}

// candidates returns the filed elements lo..hi-1 of key from or above,
// with their sizes, in index order.
func (f *sizeFiler) candidates(src []elemSrc, from uint8, lo, hi int) []sizedID {
	var out []sizedID
	for id, key := range f.keys[lo:hi] {
		if key >= from {
			out = append(out, sizedID{src[lo+id].size, int32(lo + id)})
		}
	}
	return out
}

// largestOfCands returns the k largest of cands (every element of a key
// above the cut key, and the cut key's, in index order), largest first,
// then by index: the k-th largest size is found by a selection over the
// sizes; the candidates larger than it are taken, and of those of its
// size (all of the cut key) the first. Two passes over the elements'
// sizes, starts and ends, and ordering the 440,000 elements of the 1 GB
// tile's cut key by size and index, were 25 ms of its first window.
func largestOfCands(cands []sizedID, k int) []int32 {
	k = min(k, len(cands))
	if k <= 0 {
		return nil
	}
	sizes := make([]uint64, len(cands))
	for i, c := range cands {
		sizes[i] = c.size
	}
	cut := kthLargest(sizes, k)
	equal := k // the elements of size cut taken
	for _, c := range cands {
		if c.size > cut {
			equal--
		}
	}
	top := cands[:0] // in place: written behind the reading
	for _, c := range cands {
		switch {
		case c.size > cut:
		case c.size == cut && equal > 0:
			equal--
		default:
			continue
		}
		top = append(top, c)
	}
	slices.SortFunc(top, largerFirst)
	out := make([]int32, len(top))
	for i, c := range top {
		out[i] = c.id
	}
	return out
}

// selectRounds bounds kthLargest's rounds (a variable for the tests).
var selectRounds = 64

// kthLargest returns the k-th largest of a (1 <= k <= len(a)), reordering
// a: a quickselect with three-way partitions (sizes repeat a lot), which
// sorts what is left after 64 rounds (inputs made to defeat its pivots).
func kthLargest(a []uint64, k int) uint64 {
	lo, hi, at := 0, len(a), k-1
	for round := 0; hi-lo > 1; round++ {
		if round == selectRounds {
			slices.Sort(a[lo:hi])
			slices.Reverse(a[lo:hi])
			return a[at]
		}
		x, y, z := a[lo], a[lo+(hi-lo)/2], a[hi-1]
		p := max(min(x, y), min(max(x, y), z)) // the median of three
		// [lo,gt) > p, [gt,i) == p, [lt,hi) < p.
		gt, i, lt := lo, lo, hi
		for i < lt {
			switch v := a[i]; {
			case v > p:
				a[gt], a[i] = a[i], a[gt]
				gt++
				i++
			case v < p:
				lt--
				a[lt], a[i] = a[i], a[lt]
			default:
				i++
			}
		}
		switch {
		case at < gt:
			hi = gt
		case at >= lt:
			lo = lt
		default:
			return p
		}
	}
	return a[lo]
}

// sizeKey orders sizes by bit length and the two bits below the leading
// one: a larger size never has a smaller key (sizes of 2^63 and up share
// 255 with the largest of 63 bits).
func sizeKey(v uint64) uint8 {
	n := bits.Len64(v)
	if n == 0 {
		return 0
	}
	// 4(n-1) plus the leading bit and the two below it (4 to 7).
	return uint8(min(4*n-4+int(v<<(64-n)>>61), 255))
}

// windowSel is the state of one selectWindow.
type windowSel struct {
	t              *Timeline
	t0, t1, y0, y1 float64
	fullY          bool
	r              posRange     // the positions that can intersect (bounds)
	first, last    *stackPrefix // the stack at t0 and t1, as far up as needed
	in             []int32      // intersecting
	maybe          []maybeElem  // starting above, ending inside
	keys           *[]sizedID   // classifyLargest's, from sizedIDs
}

// maybeElem is an element that starts above the window and ends inside it
// in time, with its bottom edge at its first sample.
type maybeElem struct {
	id   int32
	base float64
}

// edgeSlack is the margin, in bytes, by which a bound must clear an edge
// of the window to decide without the exact bottom edge: sizes are whole
// bytes, and the sums of the few fractions (elements sliding down) differ
// by far less than a byte with the order they are added in.
const edgeSlack = 1

// bounds finds the stack positions that can hold elements intersecting
// the window, w.r, and walks the stack at t0 and t1 over them. An
// element's bottom edge at a time is the bytes below its position then,
// which grow with the position: one at or above the first position whose
// bottom at t1 is y1 lies above the window at t1 and so throughout; one
// that started before t0 below the last position whose bottom at t0 is at
// most y0 lies, whole, below y0 at t0 and so throughout. Elements start in
// position order, so those that started before t0 are the positions below
// s0. A window zoomed in bytes then classifies the elements of a band of
// the stack instead of every one of its time.
func (w *windowSel) bounds() {
	t := w.t
	n := len(t.byPos)
	startAt := func(p int) float64 { return float64(t.start[t.byPos[p]]) }
	s0 := sort.Search(n, func(p int) bool { return startAt(p) >= w.t0 })
	s1 := s0 + sort.Search(n-s0, func(p int) bool { return startAt(s0+p) >= w.t1 })
	stop := w.y1 + edgeSlack
	w.last = t.prefixAt(w.t1, int32(s1), stop)
	hi := w.last.limit
	if j := sort.Search(len(w.last.below), func(j int) bool { return w.last.below[j] >= stop }); j < len(w.last.below) {
		hi = w.last.pos[j]
	}
	// The range is rounded out to whole blocks of the stack, so that it
	// is the same whether the walks went a block or an element at a time
	// (the summary's bound counts its elements). Positions from the end of
	// w.last up lie above y1 at t1, where w.last's bounds say its total.
	hi = min(roundUp(hi, prefixBlock), int32(s1))
	lim0 := min(hi, int32(s0))
	w.first = t.prefixAt(w.t0, lim0, math.Inf(1))
	lo, floor := int32(0), w.y0-edgeSlack
	if w.first.total <= floor {
		lo = lim0
	} else if j := sort.Search(len(w.first.below), func(j int) bool { return w.first.below[j] > floor }) - 1; j >= 0 {
		lo = w.first.pos[j]
	}
	lo -= lo % prefixBlock
	w.r = posRange{lo, hi}
}

// roundUp rounds p up to a multiple of m.
func roundUp(p, m int32) int32 { return (p + m - 1) / m * m }

// bases returns the bottom edge of each of vis at its first sample in the
// window.
func (w *windowSel) bases(vis []int32) []float64 {
	t := w.t
	base := make([]float64, len(vis))
	need := int32(-1)
	for _, id := range vis {
		if float64(t.start[id]) < w.t0 {
			need = max(need, t.pos[id])
		}
	}
	if need >= 0 && (w.first == nil || need >= w.first.limit) {
		w.first.release()
		w.first = t.prefixAt(w.t0, need+1, math.Inf(1))
	}
	for i, id := range vis {
		if float64(t.start[id]) < w.t0 {
			base[i] = w.first.at(t.pos[id])
		} else {
			base[i] = float64(t.off0[id])
		}
	}
	return base
}

// stackPrefix is the stack at one time below position limit: the
// positions of the elements with weight there and the weighted bytes
// below each. An entry with blk set stands for the prefixBlock positions
// from pos, every one of them counted whole.
type stackPrefix struct {
	pos   []int32
	below []float64
	blk   []bool
	total float64
	limit int32
	t     *Timeline
	x     float64
	// first[b] is the first entry at or above position b*prefixBlock
	// (b <= limit/prefixBlock): an entry is found without a search.
	first []int32
	// part[cut[j]+k] is the bytes of block entry j's first k positions,
	// computed when at first looks inside it (cut[j] < 0 until then).
	cut  []int32
	part []float64
}

// prefixes keeps the arrays of stack prefixes between queries: a zoomed
// window walks the stack up to half a million positions at two times,
// and allocating (and zeroing) those arrays anew took about 4 % of one.
var prefixes sync.Pool

// prefixAt walks the stack at x below position limit, stopping early,
// past the position where the bytes below reach stop (its limit is then
// the next position). Its arrays are given back with release.
func (t *Timeline) prefixAt(x float64, limit int32, stop float64) *stackPrefix {
	t.waitAlive()
	n := min(int(limit), 1<<20)
	sp, _ := prefixes.Get().(*stackPrefix)
	if sp == nil || cap(sp.pos) < n {
		sp = &stackPrefix{pos: make([]int32, 0, n), below: make([]float64, 0, n), blk: make([]bool, 0, n)}
	}
	sp.pos, sp.below, sp.blk, sp.total, sp.limit, sp.t = sp.pos[:0], sp.below[:0], sp.blk[:0], 0, limit, t
	sp.cut, sp.part, sp.first = sp.cut[:0], sp.part[:0], sp.first[:0]
	defer sp.fillFirst()
	a := &t.aliveTree
	sp.x = x
	// Entries at positions below b*prefixBlock so far: first[b].
	mark := func(p int) {
		for len(sp.first) <= p/prefixBlock {
			sp.first = append(sp.first, int32(len(sp.pos)))
		}
	}
	// The blocks are built before the buckets, on another goroutine.
	if !t.blocksReady() || len(t.blockSize) == 0 || a.n < prefixBlock {
		last := sort.Search(len(t.byPos), func(p int) bool { return float64(t.start[t.byPos[p]]) > x })
		t.aliveTree.eachWhile(0, min(int(limit), last), int32(math.Floor(x)), func(p int) bool {
			id := t.byPos[p]
			w := t.weight(id, x)
			if w <= 0 {
				return true
			}
			mark(p)
			return !sp.addElement(p, w*float64(t.src[id].size), stop)
		})
		return sp
	}
	// What stack walks, a block of positions at a time: a block all
	// pushed by x is one entry, its bytes at x found from its elements
	// sorted by end (stackBlocks); one whose elements all stopped
	// counting is skipped (its node in aliveTree); the partial block at
	// the limit is walked position by position. Walking every element
	// below the window at its two edges was three quarters of a zoomed
	// query's time on the 1 GB tile (5 M elements, 3 M alive mid-trace).
	last := sort.Search(len(t.byPos), func(p int) bool { return float64(t.start[t.byPos[p]]) > x })
	lim := min(int(limit), last, a.n)
	above := int32(math.Floor(x))
	leaves := a.v
	for b := 0; b*prefixBlock < lim; b++ {
		lo := b * prefixBlock
		hi := min(lo+prefixBlock, lim)
		mark(lo)
		if a.blockMax(b) <= above {
			continue // nothing in it counts at x
		}
		if hi == lo+prefixBlock && b < len(t.blockSize) {
			ends := t.blkEnd[lo:hi]
			cut := sort.Search(prefixBlock, func(i int) bool { return float64(ends[i]) > x })
			sum := t.blockSize[b] - t.blkBelow[lo+cut] // whole at x
			if cut == prefixBlock {
				sum = 0
			}
			// Freed by x but still sliding down (3 timesteps).
			for i := cut - 1; i >= 0 && float64(ends[i])+3 > x; i-- {
				id := t.byPos[lo+int(t.blkOff[lo+i])]
				sum += t.weight(id, x) * float64(t.src[id].size)
			}
			sp.pos = append(sp.pos, int32(lo))
			sp.below = append(sp.below, sp.total)
			sp.blk = append(sp.blk, true)
			for len(sp.cut) < len(sp.pos) {
				sp.cut = append(sp.cut, -1)
			}
			sp.total += sum
			if sp.total >= stop {
				sp.limit = int32(hi)
				return sp
			}
			continue
		}
		for p := lo; p < hi; p++ {
			if leaves[p] <= above {
				continue
			}
			id := t.byPos[p]
			if w := t.weight(id, x); w > 0 {
				if sp.addElement(p, w*float64(t.src[id].size), stop) {
					return sp
				}
			}
		}
	}
	return sp
}

// addElement adds the element at stack position p, bytes high at the
// window's left edge, and reports whether the prefix now reaches stop
// (the limit is then the position above it).
func (sp *stackPrefix) addElement(p int, bytes, stop float64) bool {
	sp.pos = append(sp.pos, int32(p))
	sp.below = append(sp.below, sp.total)
	sp.blk = append(sp.blk, false)
	sp.total += bytes
	if sp.total >= stop {
		sp.limit = int32(p + 1)
		return true
	}
	return false
}

// fillFirst completes first up to the block of limit.
func (sp *stackPrefix) fillFirst() {
	for len(sp.first) <= int(sp.limit)/prefixBlock {
		sp.first = append(sp.first, int32(len(sp.pos)))
	}
}

// find returns the first entry at or above position p (p < limit).
func (sp *stackPrefix) find(p int32) int {
	i := int(sp.first[p/prefixBlock])
	for i < len(sp.pos) && sp.pos[i] < p {
		i++
	}
	return i
}

// bounds returns the least and the most bytes that can lie below
// position p at this time without looking inside a block: at(p) when p
// is not inside one.
func (sp *stackPrefix) bounds(p int32) (lo, hi float64) {
	if p >= sp.limit {
		return sp.total, sp.total
	}
	i := sp.find(p)
	if i > 0 && sp.blk[i-1] && p < sp.pos[i-1]+prefixBlock {
		if i < len(sp.pos) {
			return sp.below[i-1], sp.below[i]
		}
		return sp.below[i-1], sp.total
	}
	if i == len(sp.pos) {
		return sp.total, sp.total
	}
	return sp.below[i], sp.below[i]
}

// at is the bottom edge at this time of an element at stack position p.
// From limit up it is the total, a lower bound: a walk stopped early
// (prefixAt's stop) leaves out positions whose elements lie above the
// window, which classify only rejects.
func (sp *stackPrefix) at(p int32) float64 {
	if p >= sp.limit {
		return sp.total
	}
	i := sp.find(p)
	if i > 0 && sp.blk[i-1] && p < sp.pos[i-1]+prefixBlock {
		// p is inside a block: the bytes of its elements below p, from
		// the block's partial sums (a query looks into the same blocks
		// again and again).
		j := i - 1
		if sp.cut[j] < 0 {
			sp.cut[j] = int32(len(sp.part))
			b := 0.0
			for _, id := range sp.t.byPos[sp.pos[j] : sp.pos[j]+prefixBlock] {
				sp.part = append(sp.part, b)
				if w := sp.t.weight(id, sp.x); w > 0 {
					b += w * float64(sp.t.src[id].size)
				}
			}
		}
		return sp.below[j] + sp.part[int(sp.cut[j])+int(p-sp.pos[j])]
	}
	if i == len(sp.pos) {
		return sp.total
	}
	return sp.below[i]
}

// release gives sp's arrays back for the next query.
func (sp *stackPrefix) release() {
	if sp != nil {
		prefixes.Put(sp)
	}
}

// classify sorts cand, elements at positions in w.r, into in
// (intersecting) and maybe (starting above the window and ending inside
// it: it may slide in). The bottom edges are bounded from the blocks of
// the stack first: most candidates are decided without summing a block's
// elements up to their own position.
func (w *windowSel) classify(cand []int32) {
	t := w.t
	for _, id := range cand {
		p := t.pos[id]
		size := float64(t.src[id].size)
		// b is the bottom at the first sample: between bl and bh until
		// it is needed exactly.
		var bl, bh float64
		early := float64(t.start[id]) < w.t0
		if early {
			bl, bh = w.first.bounds(p)
			if bh+size <= w.y0-edgeSlack {
				continue
			}
			if bl < bh && bl+size <= w.y0+edgeSlack {
				bl = w.first.at(p)
				bh = bl
			}
		} else {
			bl = float64(t.off0[id])
			bh = bl
		}
		if bh+size <= w.y0 {
			continue // its top only falls from here
		}
		// The bottom at t1 of its position bounds it from below.
		ll, lh := w.last.bounds(p)
		if ll >= w.y1+edgeSlack {
			continue
		}
		if ll < lh && lh >= w.y1-edgeSlack {
			ll = w.last.at(p)
		}
		if ll >= w.y1 {
			continue
		}
		if float64(t.end[id]) >= w.t1 || bh < w.y1-edgeSlack {
			w.in = append(w.in, id)
			continue
		}
		if bl < bh {
			bl = w.first.at(p)
		}
		if bl < w.y1 {
			w.in = append(w.in, id)
		} else {
			w.maybe = append(w.maybe, maybeElem{id, bl})
		}
	}
}

// classifyLargest classifies the elements of cand, one size class, until
// w.in holds detail elements, largest first (then by index), and returns
// those it left out, the smallest of the class. Every element it leaves
// out is smaller than every one it classified, so the largest detail that
// intersect are the same as if the whole class had been classified. A
// wide window's last class held 170,000-290,000 elements on the 1 GB tile,
// nearly all intersecting, to pick about 15,000 of: classifying them all
// (a few cache misses each) was a third of the window's time. The result
// is w.keys's, valid until the next call.
func (w *windowSel) classifyLargest(cand []int32, detail int) []sizedID {
	need := detail - len(w.in)
	if len(cand) <= need+need/4+64 {
		w.classify(cand)
		return nil
	}
	t := w.t
	if w.keys == nil {
		w.keys, _ = sizedIDs.Get().(*[]sizedID)
		if w.keys == nil {
			w.keys = new([]sizedID)
		}
	}
	keys := slices.Grow((*w.keys)[:0], len(cand))[:len(cand)]
	*w.keys = keys
	for i, id := range cand {
		keys[i] = sizedID{t.itemSize(id), id}
	}
	var one [1]int32
	m := 0
	for len(keys) > 0 && len(w.in) < detail {
		// The next few more than are still needed, in order: nearly
		// every candidate of a class intersects. Where few do, the
		// chunks double, so that the class is gone through in a few
		// selections.
		need = detail - len(w.in)
		m = min(len(keys), max(need+need/4+64, 2*m))
		if m < len(keys) {
			selectFirst(keys, m, largerFirst)
		}
		slices.SortFunc(keys[:m], largerFirst)
		i := 0
		for ; i < m && len(w.in) < detail; i++ {
			one[0] = keys[i].id
			w.classify(one[:])
		}
		keys = keys[i:]
	}
	return keys
}

// putKeys gives w.keys back.
func (w *windowSel) putKeys() {
	if w.keys != nil {
		sizedIDs.Put(w.keys)
		w.keys = nil
	}
}

// resolve moves the elements of maybe whose bottom falls below y1 before
// they end into in. Their slide is the sum of the frees below them that
// ramp between their first sample and their end, found with one sweep of
// those frees in time and a Fenwick tree over the elements' positions.
// When that is too many frees it leaves them out and returns how many.
func (w *windowSel) resolve() int {
	t, ms := w.t, w.maybe
	if len(ms) == 0 {
		return 0
	}
	slices.SortFunc(ms, func(a, b maybeElem) int { return int(t.pos[a.id] - t.pos[b.id]) })
	minX, maxX := math.Inf(1), math.Inf(-1)
	for _, m := range ms {
		minX = min(minX, max(w.t0, float64(t.start[m.id])))
		maxX = max(maxX, float64(t.end[m.id]))
	}
	f0 := sort.Search(len(t.freeEnd), func(i int) bool { return float64(t.freeEnd[i])+3 > minX })
	f1 := sort.Search(len(t.freeEnd), func(i int) bool { return float64(t.freeEnd[i]) >= maxX })
	if f1-f0 > sweepLimit {
		return len(ms)
	}
	type query struct {
		x    float64
		k    int32
		sign float64
	}
	qs := make([]query, 0, 2*len(ms))
	for k, m := range ms {
		qs = append(qs, query{max(w.t0, float64(t.start[m.id])), int32(k), -1}, query{float64(t.end[m.id]), int32(k), 1})
	}
	slices.SortFunc(qs, func(a, b query) int { return cmpFloat(a.x, b.x) })
	// rank of free j: how many of ms lie at or below it (it slides those
	// above).
	rank := func(j int) int {
		p := t.freePos[j]
		return sort.Search(len(ms), func(i int) bool { return t.pos[ms[i].id] > p })
	}
	fen := make([]float64, len(ms)+1)
	slide := make([]float64, len(ms))
	completed, started := f0, f0
	var ramping []int // frees started but not completed, with their ranks
	var rampRank []int
	for _, q := range qs {
		for started < f1 && float64(t.freeEnd[started]) < q.x {
			ramping = append(ramping, started)
			rampRank = append(rampRank, rank(started))
			started++
		}
		for completed < started && float64(t.freeEnd[completed])+3 <= q.x {
			r := rampRank[0]
			s := float64(t.freeSize[completed])
			for i := r + 1; i <= len(ms); i += i & -i {
				fen[i] += s
			}
			ramping, rampRank = ramping[1:], rampRank[1:]
			completed++
		}
		var g float64
		for i := int(q.k) + 1; i > 0; i -= i & -i {
			g += fen[i]
		}
		for n, j := range ramping {
			if rampRank[n] <= int(q.k) {
				g += float64(t.freeSize[j]) * min(1, (q.x-float64(t.freeEnd[j]))/3)
			}
		}
		slide[q.k] += q.sign * g
	}
	for k, m := range ms {
		if m.base-slide[k] < w.y1 {
			w.in = append(w.in, m.id)
		}
	}
	return 0
}

// sizedID is an element with its size, to order elements without
// reading their sizes again.
type sizedID struct {
	size uint64
	id   int32
}

// largerFirst orders by size, largest first, then by index (bySizeDesc).
func largerFirst(a, b sizedID) int {
	if a.size != b.size {
		if a.size > b.size {
			return -1
		}
		return 1
	}
	return int(a.id - b.id)
}

// sizedIDs keeps the arrays of largest between queries.
var sizedIDs sync.Pool

// largest reorders all so that all[:k] (returned) holds its k largest
// elements (at most len(all)), largest first, then by index. The sizes
// are read once into a side array: the selection compares each element a
// few times, and reading its size from the columns each time (a cache
// miss on the 1 GB tile's 5 M elements) was a quarter of a whole-trace
// window.
func (t *Timeline) largest(all []int32, k int) []int32 {
	k = min(k, len(all))
	p, _ := sizedIDs.Get().(*[]sizedID)
	if p == nil {
		p = new([]sizedID)
	}
	keys := slices.Grow((*p)[:0], len(all))[:len(all)]
	for i, id := range all {
		keys[i] = sizedID{t.itemSize(id), id}
	}
	if len(keys) > k {
		selectFirst(keys, k, largerFirst)
	}
	slices.SortFunc(keys[:k], largerFirst)
	for i, e := range keys[:k] {
		all[i] = e.id
	}
	*p = keys
	sizedIDs.Put(p)
	return all[:k]
}

// selectFirst reorders a so that a[:k] holds its k first elements under
// cmp, in no particular order (quickselect: O(len(a)) on average, where
// sorting a million candidates of one size class to keep 15,000 took
// most of a query).
func selectFirst[E any](a []E, k int, cmp func(a, b E) int) {
	lo, hi := 0, len(a)
	for hi-lo > 1 {
		// Median of three as the pivot.
		m := lo + (hi-lo)/2
		if cmp(a[m], a[lo]) < 0 {
			a[m], a[lo] = a[lo], a[m]
		}
		if cmp(a[hi-1], a[lo]) < 0 {
			a[hi-1], a[lo] = a[lo], a[hi-1]
		}
		if cmp(a[hi-1], a[m]) < 0 {
			a[hi-1], a[m] = a[m], a[hi-1]
		}
		p := a[m]
		// Three-way partition: [lo,lt) < p, [lt,gt) == p, [gt,hi) > p.
		lt, i, gt := lo, lo, hi
		for i < gt {
			switch c := cmp(a[i], p); {
			case c < 0:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case c > 0:
				gt--
				a[gt], a[i] = a[i], a[gt]
			default:
				i++
			}
		}
		switch {
		case k < lt:
			hi = lt
		case k > gt:
			lo = gt
		default:
			return
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// selectMaterialized returns the items overlapping (t0, t1) in time,
// largest first, for polygonsMaterialized to draw the first detail of
// those inside the window.
func (t *Timeline) selectMaterialized(t0, t1 float64) []int32 {
	var vis []int32
	for bi := range t.buckets {
		vis = t.overlapping(vis, int32(bi), t0, t1, anyPos)
	}
	slices.SortFunc(vis, t.bySizeDesc)
	return vis
}
