package replay

import (
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem/snapshot"
)

// Timeline is one memory_viz timeline of one device; see NewTimeline.
//
// Per element it keeps its lifetime in timesteps, its size, its position
// in the stack (push order) and its bottom edge when pushed. Because
// allocations are always pushed on top, an element's bottom edge at time t
// is the sum of sizes of elements below it in push order that are still
// alive at t (a free below it slides it down linearly over 3 timesteps,
// as memory_viz animates it), so offsets over time need not be stored.
type Timeline struct {
	s      *snapshot.Snapshot
	device int
	kind   Kind
	segs   []int32 // device dump segments by address

	src   []elemSrc
	start []int32  // timestep pushed
	end   []int32  // timestep its polygon closes
	off0  []uint64 // bottom edge when pushed
	pos   []int32  // stack position (push order)
	slid  []bool   // its free slid the elements above it down
	byPos []int32  // element at each stack position

	// aliveTree lists, by stack position, the time an element stops
	// contributing to the offsets above it (end, or end+3 when slid).
	// aliveBuilt, when not nil, is closed once it is built (waitAlive).
	aliveTree  maxTree
	aliveBuilt chan struct{}
	// wholeTop lists the timeline's wholeDetail largest elements, largest
	// first, then by index, for windows over the whole trace (the first
	// window) before the buckets are built; wholeBuilt, when not nil, is
	// closed once it is (sizeFiler.largestOf, beside that window's start).
	wholeTop   []int32
	wholeBuilt chan struct{}
	// The stack in blocks of prefixBlock positions (the last, partial
	// one left out), each block's elements sorted by the time they stop
	// counting whole (end when freed, MaxInt32 when not): blkEnd holds
	// those times, blkBelow the bytes of the block's elements before
	// each in that order and blkOff each one's position in its block;
	// blockSize is a block's bytes. The bytes of a block that count at x
	// are then blockSize less blkBelow at the first end past x, plus the
	// few elements sliding down there: a stack walk takes a block in
	// O(log prefixBlock) (see prefixAt).
	blkEnd    []int32
	blkBelow  []float64
	blkOff    []uint8
	blockSize []float64
	// blocksBuilt is closed once the blocks are built, before the
	// buckets (a window does not wait for them: it walks without).
	blocksBuilt chan struct{}
	// Slid frees sorted by end: the times offsets change.
	freeEnd  []int32
	freeSize []uint64 // the freed element's size
	freePos  []int32  // the freed element's stack position

	// max_at_time as runs: value runVal[r] from timestep runStart[r]
	// (materialized timelines), or cruns.
	runStart []int32
	runVal   []uint64
	runIdx   *rangeMinMax
	cruns    *compactRuns

	buckets []bucket
	// bySize lists the buckets by size class, largest first: a window's
	// largest elements come from its first buckets.
	bySize []int32
	// bucketsBuilt, when not nil, is closed once buckets and bySize are
	// built (on another goroutine: see waitBuckets); startBuckets starts
	// that build once.
	bucketsBuilt chan struct{}
	startBuckets func()
	// indexPause, when set, is called every so often while the indexes
	// are built, and may block (SetIndexPause).
	indexPause atomic.Pointer[func()]

	// Materialized polygons, used for KindActiveWithPools when the device
	// has private pools: items are the elements, then one envelope per pool.
	ser        []series
	poolKeys   []string
	totalAfter []uint64

	timesteps int
	peak      uint64

	searchIdx searchIndex
}

// bucket holds the elements of one (size class, duration class), by start,
// for window queries. Their starts are read through ids (a binary search
// reads a few): a column of them was 21 MB of the 1 GB tile's index.
type bucket struct {
	sizeClass, durClass int
	ids                 []int32
	ends                endTree // the ends, by start
}

// newTimeline builds the timeline, with pre (when not nil) the pairing of
// the device's trace done already.
func newTimeline(s *snapshot.Snapshot, device int, kind Kind, pre *pairing) *Timeline {
	if kind == KindActiveWithPools && hasPrivatePools(s, device) {
		return newMaterialized(s, device)
	}
	var st *stacker
	if pre != nil {
		st = pre.stack
	}
	l := buildElements(s, device, kind == KindSegments, pre, nil)
	if st == nil {
		st = newStacker(len(l.elems), len(l.actions))
	}
	t := &Timeline{s: s, device: device, kind: kind, segs: l.segs, src: l.elems}
	st.finish(t, l)
	// A pass over the elements gives each alive one its end and files
	// each by size key for the first, whole-trace window (sizeFiler); the
	// runs' block tree, which reads only the runs, is built beside it.
	// Half the elements are on another goroutine: the first paint waits
	// on this function.
	timestep := int32(t.timesteps)
	filer := &sizeFiler{keys: make([]uint8, len(t.src))}
	var counts [2][256]int32
	byElement := func(half, lo, hi int) {
		filer.fileElements(&counts[half], t.src, t.end, timestep, lo, hi)
	}
	n := len(t.src)
	t.aliveTree = emptyMaxTree(len(t.byPos))
	wholeDone := make(chan struct{})
	t.wholeBuilt = wholeDone
	sumCounts := func() {
		for k := range filer.counts {
			filer.counts[k] = counts[0][k] + counts[1][k]
		}
	}
	if n >= twoCoreMin {
		runsDone := make(chan struct{})
		go func() {
			defer close(runsDone)
			t.finishRuns()
		}()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			byElement(1, n/2, n)
		}()
		byElement(0, 0, n/2)
		wg.Wait()
		// The candidates for the largest, a half on each core too.
		sumCounts()
		from, _ := filer.cutKey(wholeDetail)
		var cands [2][]sizedID
		wg.Add(1)
		go func() {
			defer wg.Done()
			cands[1] = filer.candidates(t.src, from, n/2, n)
		}()
		cands[0] = filer.candidates(t.src, from, 0, n/2)
		wg.Wait()
		<-runsDone
		// The largest and the alive tree are left to another goroutine:
		// the whole-trace window waits for the first after its columns,
		// and does not walk the stack; what does waits for the tree
		// (waitAlive). Built here, the tree was 15-25 ms of the 1 GB
		// tile's way to the first paint.
		alive := make(chan struct{})
		t.aliveBuilt = alive
		go func() {
			t.wholeTop = largestOfCands(append(cands[0], cands[1]...), wholeDetail)
			close(wholeDone)
			t.fillAlive()
			close(alive)
			t.runStarts()
		}()
	} else {
		byElement(0, 0, n)
		t.finishRuns()
		sumCounts()
		t.wholeTop = filer.largestOf(t.src, wholeDetail)
		close(wholeDone)
		t.fillAlive()
		t.runStarts()
	}
	// Off the first paint's path: 9 ms on the 1 GB tile.
	go t.releaseRoom()
	// src keeps its room: a fed pairing reserves for every entry the
	// decoder expected, but the pages of the room never written are never
	// faulted in, and trimming it copied 120 MB (the 1 GB tile's 5 M
	// elements) on the way to the first paint.
	// The three indexes only read what is built above: the largest is
	// built on another core, and this returns without waiting for it (the
	// first paint waits on this function, and its whole-trace window needs
	// no buckets: see selectWindow).
	built, blocks := make(chan struct{}), make(chan struct{})
	t.bucketsBuilt, t.blocksBuilt = built, blocks
	t.startBuckets = sync.OnceFunc(func() {
		go func() {
			// After the whole trace's largest, which the first window
			// waits for (the alive tree is built beside this: waiting
			// for it too, the blocks were not built by the 1 GB tile's
			// first zoom, which its faster first paint brought sooner).
			<-t.wholeBuilt
			// The blocks first: a window asked for before the buckets
			// are built is answered without them (scanClasses), and its
			// stack walks are most of its time without the blocks.
			t.stackBlocks()
			close(blocks)
			t.buildBuckets(t.byPos)
			close(built)
		}()
	})
	return t
}

// fillAlive writes aliveTree's leaves, each element's effective end by
// stack position (end, end+3 when its free slid, MaxInt32 when alive to
// the end), and its blocks' maxima, and builds it.
func (t *Timeline) fillAlive() {
	a := &t.aliveTree
	for b := 0; b*maxBlock < a.n; b++ {
		p0 := b * maxBlock
		leaves := a.v[p0:min(p0+maxBlock, a.n)]
		m := int32(-1 << 31)
		for p, id := range t.byPos[p0 : p0+len(leaves)] {
			end := int32(math.MaxInt32)
			if t.freed(id) {
				end = t.end[id]
				if t.slid[id] {
					end += 3
				}
			}
			leaves[p] = end
			m = max(m, end)
		}
		a.mx[a.size+b] = m
	}
	a.finish()
}

// waitAlive returns once aliveTree is built (fillAlive).
func (t *Timeline) waitAlive() {
	if t.aliveBuilt != nil {
		<-t.aliveBuilt
	}
}

// releaseRoom releases the unwritten room of the stacked columns (see
// releaseRoom): a fed layout reserved them for more elements and runs
// than the trace had. It only reads what newTimeline wrote before it
// started it, and writes nothing the timeline reads.
func (t *Timeline) releaseRoom() {
	releaseRoom(t.src)
	releaseRoom(t.start)
	releaseRoom(t.end)
	releaseRoom(t.off0)
	releaseRoom(t.pos)
	releaseRoom(t.slid)
	releaseRoom(t.byPos)
	releaseRoom(t.freeEnd)
	releaseRoom(t.freeSize)
	releaseRoom(t.freePos)
	releaseRoom(t.cruns.code)
}

// prefixBlock is the number of stack positions of a block (stackBlocks).
const prefixBlock = 64

// stackBlocks computes Timeline.blkEnd, blkBelow, blkOff and blockSize
// (13 bytes an element).
func (t *Timeline) stackBlocks() {
	nb := len(t.byPos) / prefixBlock
	n := nb * prefixBlock
	t.blkEnd, t.blkBelow, t.blkOff = make([]int32, n), make([]float64, n), make([]uint8, n)
	t.blockSize = make([]float64, nb)
	// Sorted as end<<8 | offset: one integer sort, no comparison calls.
	var keys [prefixBlock]int64
	for b := range nb {
		t.pauseIndexAt(b * prefixBlock)
		lo := b * prefixBlock
		ids := t.byPos[lo : lo+prefixBlock]
		for k, id := range ids {
			e := int32(math.MaxInt32)
			if t.freed(id) {
				e = t.end[id]
			}
			keys[k] = int64(e)<<8 | int64(k)
		}
		slices.Sort(keys[:])
		sum := 0.0
		for i, key := range keys {
			k := uint8(key & 0xff)
			t.blkEnd[lo+i], t.blkBelow[lo+i], t.blkOff[lo+i] = int32(key>>8), sum, k
			sum += float64(t.src[ids[k]].size)
		}
		t.blockSize[b] = sum
	}
}

// SetIndexPause makes the build of the indexes (StartIndexes) call pause
// about every 65,536 elements, before or while it runs: the server's
// pause blocks while a user's request is being answered, so that the
// build, on the other core, never takes the CPU or the memory bandwidth
// from it on a machine with two cores.
func (t *Timeline) SetIndexPause(pause func()) { t.indexPause.Store(&pause) }

// pauseIndexAt calls the index pause when i is a multiple of
// pauseEvery+1.
func (t *Timeline) pauseIndexAt(i int) {
	if i&pauseEvery == 0 {
		if p := t.indexPause.Load(); p != nil && *p != nil {
			(*p)()
		}
	}
}

// StartIndexes starts building, on another goroutine, the indexes that
// windows narrower than the whole trace need, if they are not being built
// already. NewTimeline starts them itself; NewTimelineFed leaves them
// until this is called or such a window is asked for.
func (t *Timeline) StartIndexes() {
	if t.startBuckets != nil {
		t.startBuckets()
	}
}

// waitBuckets returns once buckets and bySize are built, starting the
// build if no one has.
func (t *Timeline) waitBuckets() {
	t.StartIndexes()
	if t.bucketsBuilt != nil {
		<-t.bucketsBuilt
	}
}

// blocksReady reports whether the stack's blocks are built (stackBlocks).
func (t *Timeline) blocksReady() bool {
	if t.blocksBuilt == nil {
		return false
	}
	select {
	case <-t.blocksBuilt:
		return true
	default:
		return false
	}
}

// bucketsReady reports whether buckets and bySize are built.
func (t *Timeline) bucketsReady() bool {
	if t.bucketsBuilt == nil {
		return true
	}
	select {
	case <-t.bucketsBuilt:
		return true
	default:
		return false
	}
}

// buildBuckets indexes items given in nondecreasing start order.
//
// It is a counting sort by class: a first pass finds each item's bucket
// and the bucket sizes, a second one places the items, so that every
// bucket is one exact slice of two shared arrays (a map lookup and a
// growing append per item took twice as long on a million items).
func (t *Timeline) buildBuckets(order []int32) {
	const durClasses = 33
	var slot [65 * durClasses]int32 // bucket index + 1 of each class pair
	which := make([]uint16, len(order))
	var counts []int32
	for i, id := range order {
		t.pauseIndexAt(i)
		key := bits.Len64(t.itemSize(id))*durClasses + bits.Len32(uint32(t.end[id]-t.start[id]))
		bi := slot[key] - 1
		if bi < 0 {
			bi = int32(len(t.buckets))
			slot[key] = bi + 1
			t.buckets = append(t.buckets, bucket{sizeClass: key / durClasses, durClass: key % durClasses})
			counts = append(counts, 0)
		}
		which[i] = uint16(bi)
		counts[bi]++
	}
	ids := make([]int32, len(order))
	ends := make([]int32, len(order))
	next := make([]int32, len(counts))
	at := int32(0)
	for bi, c := range counts {
		next[bi] = at
		at += c
	}
	for i, id := range order {
		t.pauseIndexAt(i)
		j := next[which[i]]
		next[which[i]]++
		ids[j], ends[j] = id, t.end[id]
	}
	at = 0
	for bi := range t.buckets {
		b := &t.buckets[bi]
		lo, hi := at, at+counts[bi]
		at = hi
		b.ids = ids[lo:hi:hi]
		t.pauseIndexAt(0)
		b.ends = newEndTree(ends[lo:hi:hi])
	}
	t.bySize = make([]int32, len(t.buckets))
	for bi := range t.bySize {
		t.bySize[bi] = int32(bi)
	}
	slices.SortFunc(t.bySize, func(a, b int32) int { return t.buckets[b].sizeClass - t.buckets[a].sizeClass })
}

// freed reports whether element id is freed in the trace (else it is
// alive at the end): a free event is paired with it. A column of its own
// was a byte an element beside the 16 of its source, which is read with
// it anyway.
func (t *Timeline) freed(id int32) bool { return t.src[id].free >= 0 }

// weight is how much of element j's size still lies under the elements
// above it at time x: 1 while alive, sliding to 0 over 3 timesteps after a
// free that slid, 0 after a free at the top.
func (t *Timeline) weight(j int32, x float64) float64 {
	e := float64(t.end[j])
	if x < e || !t.freed(j) {
		return 1
	}
	if t.slid[j] && x < e+3 {
		return 1 - (x-e)/3
	}
	return 0
}

// stack calls fn in stack order for every element below stack position
// limit that contributes to offsets at time x, with its weighted size.
func (t *Timeline) stack(x float64, limit int, fn func(id int32, w float64)) {
	t.waitAlive()
	// Elements pushed after x cannot be below anything alive at x.
	last := sort.Search(len(t.byPos), func(p int) bool { return float64(t.start[t.byPos[p]]) > x })
	limit = min(limit, last)
	above := int32(math.Floor(x))
	t.aliveTree.each(limit, above, func(p int) {
		id := t.byPos[p]
		if w := t.weight(id, x); w > 0 {
			fn(id, w*float64(t.src[id].size))
		}
	})
}

// itemSize is an element's size, or a pool envelope's largest size.
func (t *Timeline) itemSize(id int32) uint64 {
	if int(id) < len(t.src) {
		return t.src[id].size
	}
	sz := t.ser[id].size
	return uint64(sz[len(sz)-1])
}

func (t *Timeline) offsetAt(i int, x float64) float64 {
	if t.ser != nil {
		if i < 0 || i >= len(t.ser) {
			return 0
		}
		b, _ := t.ser[i].at(x)
		return b
	}
	if i < 0 || i >= len(t.src) {
		return 0
	}
	x = max(float64(t.start[i]), min(float64(t.end[i]), x))
	if x == float64(t.start[i]) {
		return float64(t.off0[i])
	}
	var sum float64
	t.stack(x, int(t.pos[i]), func(_ int32, w float64) { sum += w })
	return sum
}

func (t *Timeline) hitTest(x, y float64) (int, bool) {
	if y < 0 {
		return -1, false
	}
	if t.ser != nil {
		return t.hitTestMaterialized(x, y)
	}
	var sum float64
	hit := int32(-1)
	t.stack(x, len(t.byPos), func(id int32, w float64) {
		if hit >= 0 {
			return
		}
		if float64(t.start[id]) <= x && x <= float64(t.end[id]) && y >= sum && y < sum+float64(t.src[id].size) {
			hit = id
		}
		sum += w
	})
	return int(hit), hit >= 0
}
