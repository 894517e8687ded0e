package replay

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// History is a device's Allocator State History; see NewHistory.
type History struct {
	s      *snapshot.Snapshot
	device int
	events []snapshot.Event
	viz    []int32          // raw index of each memory_viz event
	divs   *rules.Divisions // roundup_power2_divisions for estimated block sizes
	// pools are the dump's segments' pool ids, which segRec.pool indexes
	// (0: none, the zero id of the segments the trace re-creates).
	pools [][2]int64

	// The dump's state, which checkpoints are changes to: kept as the
	// sorted arrays baseSS and baseRefs (the blocks' references, in the
	// order of baseSS.blocks), made once from the maps newHistory fills
	// (baseInit), which the checkpoint build then undoes in. A copy of
	// those maps was 84 MB on a 1 GB snapshot. Only a state whose
	// segments share a start or an end address (inconsistent traces),
	// whose maps depend on the order segments were added in, keeps them
	// (base, cloned for each use).
	base     *work
	baseInit *work // read in baseOnce only
	baseRefs []blockRef
	// baseAddrs are the addresses of baseSS.blocks, searched by the build
	// at every block event: dense, they miss the cache less than the
	// blocks themselves (a 264 MB snapshot's build took 50% longer).
	baseAddrs []uint64
	// baseSegAddrs and baseSegEnds are the starts and ends of
	// baseSS.segs, searched as baseAddrs are (a jump far back looks up
	// every segment it changes: twice as slow on the segments' records).
	baseSegAddrs, baseSegEnds []uint64
	// overlay: work states hold their differences from baseSS (set in
	// baseOnce, when base is nil and the dump's segments by address end
	// in order; see overlay.go).
	overlay bool

	// The checkpoints, built from the end backwards (in the background
	// after StartHistory): mu guards them, grown is signalled at each new
	// one and when the build is done.
	mu    sync.Mutex
	grown *sync.Cond
	done  bool
	every int          // distance between checkpoints
	ckpt  []checkpoint // ckpt[c] is the state after event len(viz)-1-c*every

	// last is the work state of the latest StateAt, which the next one
	// can undo from: stepping back one event then costs one undo.
	lastMu     sync.Mutex
	lastIdx    int
	last       *work
	lastSorted *sortedState // last sorted, when it is (see sortedState)
	// spare: the dump's state sorted when it was asked for before last
	// was made; the first step back merges into its arrays.
	spare *sortedState
	// lastJournal can take last forward again (see journal).
	lastJournal *journal

	baseOnce sync.Once
	baseSS   *sortedState // base sorted

	// asking counts the StateAt calls past their wait for a checkpoint:
	// the background build pauses meanwhile, so that a step the user
	// waits for has the CPU (a 2-core machine otherwise halves it).
	asking atomic.Int32
	// busy, when set, says that the user is at work elsewhere (stepping
	// through states, zooming): the build pauses then too, unless a
	// StateAt waits for it (waiting counts those).
	busy    func() bool
	waiting atomic.Int32
}

// segRec and blockRec are the mutable state memory_viz's simulate_memory
// works on.
type segRec struct {
	addr, size uint64
	stream     snapshot.StreamID
	version    int32
	pool       int32 // in History.pools: 32 bytes a segment instead of 48
	stack      snapshot.StackID
}

type blockRec struct {
	addr, size, requested uint64
	version               int32
	pending               bool
	stack                 snapshot.StackID
}

// checkpoint is a state stored as its differences from the dump's: most
// of a big state is often the same blocks and segments for long, so
// checkpoints can be many and small.
type checkpoint struct {
	after  int // state after this event idx
	blocks []blockChange
	segs   []segChange
	dups   []segRec
	// overlay: saved from an overlay (saveOverlay), with its segments'
	// ends (ends) and the state's counts: it loads as it is, without a
	// look-up in the dump per change (a jump far back took twice as long
	// with them).
	overlay        bool
	ends           [][2]uint64 // end, start (noStart: none)
	nBlocks, nSegs int
}

// blockChange is the block at addr (refGone: none) where it differs from
// the dump.
type blockChange struct {
	addr uint64
	ref  blockRef
}

// segChange is the segment starting at addr where it differs from the dump.
type segChange struct {
	addr uint64
	seg  segRec
	gone bool
}

// tracker keeps the differences between a work state and the dump up to
// date as events are undone.
type tracker struct {
	blocks map[uint64]blockRef
	segs   map[uint64]segChange
}

// work is a state being undone. Segments are kept in maps by start and
// end address so that undoing a segment event is O(1) (a sorted slice made
// every segment event O(segments)); address order is only materialized when
// a checkpoint or a State is built.
type work struct {
	segs   segSet
	blocks blockMap
}

// blockRef is a block of a work state as where it comes from, 8 bytes
// instead of a blockRec's 40, so that checkpoints are small and many: the
// raw trace event that re-created it (undoing a free), or the dump block
// (refDump), and whether it waits for record_stream events (refPending).
type blockRef uint64

const (
	refGone    blockRef = 1 << 61 // no block (in a blockChange)
	refDump    blockRef = 1 << 62
	refPending blockRef = 1 << 63
)

func eventRef(raw int32, pending bool) blockRef {
	r := blockRef(uint32(raw))
	if pending {
		r |= refPending
	}
	return r
}

// resolve returns the block a reference stands for.
func (h *History) resolve(r blockRef) blockRec {
	i := int(uint32(r))
	pending := r&refPending != 0
	if r&refDump != 0 {
		b := &h.s.Blocks[i]
		return blockRec{b.Addr, b.Size, h.s.Requested(b), b.Version, pending, blockStack(h.s, b)}
	}
	e := &h.events[i]
	return blockRec{e.Addr, rules.RoundSize(e.Size, h.divs), e.Size, h.s.Traces[h.device].Version(i), pending, e.Stack}
}

func (h *History) refAddr(r blockRef) uint64 {
	if r&refDump != 0 {
		return h.s.Blocks[uint32(r)].Addr
	}
	return h.events[uint32(r)].Addr
}

// segSet is a set of segments indexed by start and end address.
type segSet struct {
	byStart segMap
	// endAt maps a segment's end address to its start address.
	endAt endMap
	// dups holds segments whose start address was taken when they were
	// inserted (only inconsistent traces do that), in insertion order.
	dups []segRec
	// touched collects the start addresses inserted or removed, when not
	// nil.
	touched *[]uint64
	// log records the old values of what is written, when not nil.
	log *journal
}

func newSegSet(n int) segSet {
	return segSet{byStart: segMap{m: make(map[uint64]segRec, n)}, endAt: endMap{m: make(map[uint64]uint64, n)}}
}

func (s *segSet) len() int { return s.byStart.len() + len(s.dups) }

func (s *segSet) insert(seg segRec) {
	if s.touched != nil {
		*s.touched = append(*s.touched, seg.addr)
	}
	if _, ok := s.byStart.get(seg.addr); ok {
		s.log.dups(s)
		s.dups = append(s.dups, seg)
		return
	}
	s.log.start(s, seg.addr)
	s.byStart.set(seg.addr, seg)
	s.log.end(s, seg.addr+seg.size)
	s.endAt.set(seg.addr+seg.size, seg.addr)
}

// set replaces the segment starting at addr (which must exist) by seg.
func (s *segSet) set(addr uint64, seg segRec) {
	s.remove(addr)
	s.insert(seg)
}

// remove deletes the first segment starting at addr, if any.
func (s *segSet) remove(addr uint64) {
	if s.touched != nil {
		*s.touched = append(*s.touched, addr)
	}
	old, ok := s.byStart.get(addr)
	if !ok {
		for i := range s.dups {
			if s.dups[i].addr == addr {
				s.log.dups(s)
				s.dups = append(s.dups[:i], s.dups[i+1:]...)
				return
			}
		}
		return
	}
	s.log.start(s, addr)
	s.byStart.del(addr)
	if st, ok := s.endAt.get(old.addr + old.size); ok && st == addr {
		s.log.end(s, old.addr+old.size)
		s.endAt.del(old.addr + old.size)
	}
	for i := range s.dups {
		if s.dups[i].addr == addr {
			d := s.dups[i]
			s.log.dups(s)
			s.dups = append(s.dups[:i], s.dups[i+1:]...)
			s.insert(d)
			return
		}
	}
}

// containing returns the start of the segment holding [addr, addr+size).
// Undoing a map carves from a segment's start or end, found in O(1); a
// carve from the middle falls back to a scan.
func (s *segSet) containing(addr, size uint64) (uint64, bool) {
	end := addr + size
	inside := func(ex segRec) bool { return ex.addr <= addr && end <= ex.addr+ex.size }
	if ex, ok := s.byStart.get(addr); ok && inside(ex) {
		return ex.addr, true
	}
	if st, ok := s.endAt.get(end); ok {
		if ex, ok := s.byStart.get(st); ok && inside(ex) {
			return ex.addr, true
		}
	}
	found, best := false, uint64(0)
	s.byStart.each(func(ex segRec) {
		if inside(ex) && (!found || ex.addr < best) {
			found, best = true, ex.addr
		}
	})
	return best, found
}

// sorted returns the segments by address (ties in insertion order).
func (s *segSet) sorted() []segRec {
	out := make([]segRec, 0, s.len())
	s.byStart.each(func(sg segRec) { out = append(out, sg) })
	slices.SortFunc(out, func(a, b segRec) int { return cmp.Compare(a.addr, b.addr) })
	if len(s.dups) > 0 {
		out = append(out, s.dups...)
		slices.SortStableFunc(out, func(a, b segRec) int { return cmp.Compare(a.addr, b.addr) })
	}
	return out
}

// dumpBlockRef is the reference to the dump's block bi (b): an inactive
// block is none (simulate_memory leaves it out); an active one pending
// free is marked so.
func dumpBlockRef(b *snapshot.Block, bi int32) (blockRef, bool) {
	if b.State == snapshot.BlockInactive {
		return 0, false
	}
	r := blockRef(uint32(bi)) | refDump
	if b.State == snapshot.BlockActivePendingFree {
		r |= refPending
	}
	return r, true
}

func newHistory(s *snapshot.Snapshot, device int, spawn func(func()), busy func() bool, pause func()) *History {
	h := &History{s: s, device: device, viz: vizEvents(s, device), divs: s.AllocatorSettings.Divisions(), busy: busy}
	if device >= 0 && device < len(s.Traces) {
		h.events = s.Traces[device].Events
	}
	w := &work{segs: newSegSet(0), blocks: newBlockMap(0)}
	h.pools = [][2]int64{{}}
	poolAt := map[[2]int64]int32{{}: 0}
	k := 0 // blocks and segments so far, for pauseAt
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		pool, ok := poolAt[seg.PoolID]
		if !ok {
			pool = int32(len(h.pools))
			poolAt[seg.PoolID] = pool
			h.pools = append(h.pools, seg.PoolID)
		}
		pauseAt(pause, k)
		k++
		w.segs.insert(segRec{seg.Address, seg.TotalSize, seg.Stream, seg.Version, pool, seg.Stack})
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			pauseAt(pause, k)
			k++
			b := &s.Blocks[bi]
			r, ok := dumpBlockRef(b, bi)
			if !ok {
				continue
			}
			w.blocks.set(b.Addr, r)
		}
	}

	h.baseInit = w
	undoIn := w
	if len(w.segs.dups) > 0 || len(w.segs.endAt.m) != len(w.segs.byStart.m) {
		h.base, undoIn = w, w.clone()
	}
	h.grown = sync.NewCond(&h.mu)
	h.every = CheckpointEvery
	// The dump's own checkpoint: no changes, but the segments that share a
	// start with another (load takes them from the checkpoint).
	h.ckpt = append(h.ckpt, checkpoint{after: len(h.viz) - 1, dups: slices.Clone(w.segs.dups)})
	// The dump's sorted state and the state for the first step back from
	// it are made before the build undoes in w. With an overlay (see
	// overlay.go) both undo in differences from the sorted state, and
	// the maps are let go.
	start := func(steps bool) *work {
		h.baseSorted()
		if h.overlay {
			undoIn = h.overlayWork()
		}
		if steps {
			h.lastMu.Lock()
			if h.last == nil {
				if h.overlay {
					h.last = h.overlayWork()
				} else {
					h.last = w.clone()
				}
				h.lastIdx = len(h.viz) - 1
			}
			h.lastMu.Unlock()
		}
		in := undoIn
		w, undoIn = nil, nil
		return in
	}
	if spawn != nil {
		// Off the caller's path. The dump's state sorted stays out of
		// spawn (a server's lowest priority): the state view's first
		// request waits for it (baseSorted), and made at nice 19 on a
		// loaded machine it took 2.2 s to open against 0.8 s (one run each)
		// (bench/RESULTS-web.md, #32 part 32g).
		go func() {
			in := start(true)
			spawn(func() { h.build(in) })
		}()
	} else {
		h.build(start(false))
	}
	return h
}

// baseWork returns a copy of the dump's state to undo in.
func (h *History) baseWork() *work {
	if h.base != nil {
		return h.base.clone()
	}
	bs := h.baseSorted()
	w := &work{segs: newSegSet(len(bs.segs)), blocks: newBlockMap(len(bs.blocks))}
	for _, sg := range bs.segs {
		w.segs.byStart.set(sg.addr, sg)
		w.segs.endAt.set(sg.addr+sg.size, sg.addr)
	}
	for i, r := range h.baseRefs {
		w.blocks.set(bs.blocks[i].Addr, r)
	}
	return w
}

// baseBlock and baseSeg look up the dump's block and segment at addr.
// The caller has called baseSorted.
func (h *History) baseBlock(addr uint64) (blockRef, bool) {
	if h.base != nil {
		return h.base.blocks.get(addr)
	}
	i, ok := slices.BinarySearch(h.baseAddrs, addr)
	if !ok {
		return 0, false
	}
	return h.baseRefs[i], true
}

func (h *History) baseSeg(addr uint64) (segRec, bool) {
	if h.base != nil {
		return h.base.segs.byStart.get(addr)
	}
	i, ok := slices.BinarySearch(h.baseSegAddrs, addr)
	if !ok {
		return segRec{}, false
	}
	return h.baseSS.segs[i], true
}

// build adds the checkpoints, undoing the trace from the end in w: one
// every CheckpointEvery events; when they pass the budget every other
// one is dropped and the spacing doubles.
func (h *History) build(w *work) {
	const budget = 64 << 20
	h.baseSorted() // for baseBlock and baseSeg
	// An overlay is its differences from the dump; a full state keeps
	// them in a tracker.
	ov := w.blocks.dump != nil
	tr := &tracker{blocks: map[uint64]blockRef{}, segs: map[uint64]segChange{}}
	var touched []uint64
	if !ov {
		w.segs.touched = &touched
	}
	last := len(h.viz) - 1
	used := 0
	for i := last; i >= 0; i-- {
		if i%4096 == 0 {
			for h.asking.Load() > 0 || h.busy != nil && h.waiting.Load() == 0 && h.busy() {
				time.Sleep(time.Millisecond)
			}
		}
		touched = touched[:0]
		h.undo(w, i)
		if !ov {
			h.note(tr, w, i, touched)
		}
		// Only build writes every: it reads it without the lock.
		if (last-(i-1))%h.every != 0 {
			continue
		}
		var c checkpoint
		if ov {
			c = saveOverlay(i-1, w)
		} else {
			c = tr.save(i-1, w)
		}
		h.mu.Lock()
		h.ckpt = append(h.ckpt, c)
		used += c.bytes()
		for used > budget && h.every < len(h.viz) {
			kept, u := h.ckpt[:0], 0
			for k, c := range h.ckpt {
				if k%2 == 0 {
					kept = append(kept, c)
					u += c.bytes()
				}
			}
			clear(h.ckpt[len(kept):])
			h.ckpt, used, h.every = kept, u, 2*h.every
		}
		h.mu.Unlock()
		h.grown.Broadcast()
	}
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
	h.grown.Broadcast()
}

// checkpointFor returns the checkpoint to undo from for the state after
// idx: the nearest one at or after it. While the build has not reached
// idx it waits, unless the last one built is near enough to undo from.
func (h *History) checkpointFor(idx int) checkpoint {
	n := len(h.viz)
	h.mu.Lock()
	defer h.mu.Unlock()
	for {
		c := (n - 1 - idx) / h.every
		if c < len(h.ckpt) || h.done {
			return h.ckpt[min(c, len(h.ckpt)-1)]
		}
		if cp := h.ckpt[len(h.ckpt)-1]; cp.after-idx <= 2*h.every {
			return cp
		}
		h.waiting.Add(1)
		h.grown.Wait()
		h.waiting.Add(-1)
	}
}

// wait returns once every checkpoint is built.
func (h *History) wait() {
	h.mu.Lock()
	for !h.done {
		h.grown.Wait()
	}
	h.mu.Unlock()
}

// clone copies a work state.
func (w *work) clone() *work {
	return &work{
		segs:   segSet{byStart: w.segs.byStart.clone(), endAt: w.segs.endAt.clone(), dups: slices.Clone(w.segs.dups)},
		blocks: w.blocks.clone(),
	}
}

// note records in tr how undoing event i changed w.
func (h *History) note(tr *tracker, w *work, i int, touched []uint64) {
	e := &h.events[h.viz[i]]
	switch e.VizAction() {
	case snapshot.ActionFree, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionAlloc:
		cur, ok := w.blocks.get(e.Addr)
		was, wok := h.baseBlock(e.Addr)
		switch {
		case ok == wok && cur == was:
			delete(tr.blocks, e.Addr)
		case ok:
			tr.blocks[e.Addr] = cur
		default:
			tr.blocks[e.Addr] = refGone
		}
	}
	for _, addr := range touched {
		cur, ok := w.segs.byStart.get(addr)
		was, wok := h.baseSeg(addr)
		switch {
		case ok == wok && cur == was:
			delete(tr.segs, addr)
		default:
			tr.segs[addr] = segChange{addr, cur, !ok}
		}
	}
}

func (tr *tracker) save(after int, w *work) checkpoint {
	c := checkpoint{after: after, dups: slices.Clone(w.segs.dups)}
	c.blocks = make([]blockChange, 0, len(tr.blocks))
	for addr, r := range tr.blocks {
		c.blocks = append(c.blocks, blockChange{addr, r})
	}
	c.segs = make([]segChange, 0, len(tr.segs))
	for _, sc := range tr.segs {
		c.segs = append(c.segs, sc)
	}
	return c
}

// saveOverlay is the checkpoint of an overlay's state.
func saveOverlay(after int, w *work) checkpoint {
	c := checkpoint{after: after, dups: slices.Clone(w.segs.dups), overlay: true, nBlocks: w.blocks.n, nSegs: w.segs.byStart.n}
	c.blocks = make([]blockChange, 0, len(w.blocks.m))
	for addr, r := range w.blocks.m {
		c.blocks = append(c.blocks, blockChange{addr, r})
	}
	c.segs = make([]segChange, 0, len(w.segs.byStart.m))
	for addr, v := range w.segs.byStart.m {
		if v.addr != addr {
			c.segs = append(c.segs, segChange{addr: addr, gone: true})
		} else {
			c.segs = append(c.segs, segChange{addr, v, false})
		}
	}
	c.ends = make([][2]uint64, 0, len(w.segs.endAt.m))
	for end, start := range w.segs.endAt.m {
		c.ends = append(c.ends, [2]uint64{end, start})
	}
	return c
}

// bytes is about what a checkpoint holds in memory.
func (c *checkpoint) bytes() int {
	return 96 + 16*(len(c.blocks)+len(c.ends)) + 64*(len(c.segs)+len(c.dups))
}

// load returns the state of checkpoint c: the dump's with c's changes
// (with an overlay, c's changes are the state).
func (h *History) load(c *checkpoint) *work {
	h.baseSorted()
	var w *work
	if h.overlay {
		w = h.overlayWork()
	} else {
		w = h.baseWork()
	}
	w.segs.dups = slices.Clone(c.dups)
	if h.overlay && c.overlay {
		// The overlay as saved.
		w.blocks.m = make(map[uint64]blockRef, len(c.blocks))
		for _, bc := range c.blocks {
			w.blocks.m[bc.addr] = bc.ref
		}
		w.blocks.n = c.nBlocks
		w.segs.byStart.m = make(map[uint64]segRec, len(c.segs))
		for _, sc := range c.segs {
			if sc.gone {
				w.segs.byStart.m[sc.addr] = gone(sc.addr)
			} else {
				w.segs.byStart.m[sc.addr] = sc.seg
			}
		}
		w.segs.byStart.n = c.nSegs
		w.segs.endAt.m = make(map[uint64]uint64, len(c.ends))
		for _, e := range c.ends {
			w.segs.endAt.m[e[0]] = e[1]
		}
		return w
	}
	for _, bc := range c.blocks {
		if bc.ref == refGone {
			w.blocks.del(bc.addr)
		} else {
			w.blocks.set(bc.addr, bc.ref)
		}
	}
	// Remove what changed, then add the new segments, so that end
	// addresses shared by an old and a new segment end up on the new one.
	for _, sc := range c.segs {
		if old, ok := w.segs.byStart.get(sc.addr); ok {
			w.segs.byStart.del(sc.addr)
			if st, ok := w.segs.endAt.get(old.addr + old.size); ok && st == sc.addr {
				w.segs.endAt.del(old.addr + old.size)
			}
		}
	}
	for _, sc := range c.segs {
		if !sc.gone {
			w.segs.byStart.set(sc.addr, sc.seg)
			w.segs.endAt.set(sc.seg.addr+sc.seg.size, sc.addr)
		}
	}
	return w
}

// undo reverts memory_viz event i, as simulate_memory does.
func (h *History) undo(w *work, i int) {
	e := &h.events[h.viz[i]]
	switch e.VizAction() {
	case snapshot.ActionFree:
		w.blocks.set(e.Addr, eventRef(h.viz[i], false))
	case snapshot.ActionFreeRequested:
		if b, ok := w.blocks.get(e.Addr); ok {
			w.blocks.set(e.Addr, b&^refPending)
		}
	case snapshot.ActionFreeCompleted:
		w.blocks.set(e.Addr, eventRef(h.viz[i], true))
	case snapshot.ActionAlloc:
		w.blocks.del(e.Addr)
	case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
		w.mapSegment(e.Action == snapshot.ActionSegmentUnmap, segRec{e.Addr, e.Size, e.Stream, h.s.Traces[h.device].Version(int(h.viz[i])), 0, e.Stack})
	case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
		w.unmapSegment(e.Action == snapshot.ActionSegmentMap, segRec{e.Addr, e.Size, e.Stream, h.s.Traces[h.device].Version(int(h.viz[i])), 0, e.Stack})
	}
}

// mapSegment inserts seg, merging it with same-stream neighbours it
// touches when merge is set (undoing an unmap).
func (w *work) mapSegment(merge bool, seg segRec) {
	_, taken := w.segs.byStart.get(seg.addr)
	w.segs.insert(seg)
	if !merge || taken {
		return
	}
	if next, ok := w.segs.byStart.get(seg.addr + seg.size); ok && next.stream == seg.stream && seg.size > 0 {
		w.segs.remove(next.addr)
		seg.size += next.size
		w.segs.set(seg.addr, seg)
	}
	if st, ok := w.segs.endAt.get(seg.addr); ok && st != seg.addr {
		if prev, ok := w.segs.byStart.get(st); ok && prev.stream == seg.stream {
			w.segs.remove(seg.addr)
			prev.size += seg.size
			w.segs.set(prev.addr, prev)
		}
	}
}

// unmapSegment removes seg (undoing a segment_alloc), or carves its range
// out of the segment containing it when merge is set (undoing a map).
func (w *work) unmapSegment(merge bool, seg segRec) {
	if !merge {
		w.segs.remove(seg.addr)
		return
	}
	at, ok := w.segs.containing(seg.addr, seg.size)
	if !ok {
		return
	}
	ex, _ := w.segs.byStart.get(at)
	end, exEnd := seg.addr+seg.size, ex.addr+ex.size
	switch {
	case ex.addr == seg.addr:
		w.segs.remove(at)
		ex.addr += seg.size
		ex.size -= seg.size
		if ex.size > 0 {
			w.segs.insert(ex)
		}
	case exEnd == end:
		ex.size -= seg.size
		w.segs.set(at, ex)
	default:
		ex.size = seg.addr - ex.addr
		w.segs.set(at, ex)
		rest := seg
		rest.addr, rest.size = end, exEnd-end
		w.segs.insert(rest)
	}
}

func (h *History) stateAt(idx, top int) *State {
	n := len(h.viz)
	idx = max(-1, min(idx, n-1))
	// The nearest checkpoint at or after idx, or the last state asked for
	// when it is nearer (stepping back through the events).
	cp := h.checkpointFor(idx)
	h.asking.Add(1)
	defer h.asking.Add(-1)
	if idx == n-1 {
		// The dump's own state: a copy of the base's sorted arrays.
		var ss *sortedState
		if h.base == nil {
			ss = h.mergeSorted(h.baseSorted(), nil, &work{}, nil, nil)
		} else if ss = h.mergeSorted(h.baseSorted(), nil, h.base, nil, nil); ss == nil {
			ss = h.sortFull(h.base)
		}
		st := h.layoutState(idx, ss, top)
		h.keepSorted(ss, idx)
		return st
	}
	from := cp.after
	h.lastMu.Lock()
	w, prev, spare, jr := h.last, h.lastSorted, h.spare, h.lastJournal
	h.spare = nil
	redo := false
	switch {
	case w != nil && h.lastIdx >= idx && h.lastIdx <= from:
		from = h.lastIdx
	case w != nil && jr != nil && h.lastIdx < idx && idx <= jr.top:
		redo = true // forward, through states the undos passed
	default:
		w = nil
		if prev.owned() && spare == nil {
			spare = prev // the loaded state merges into its arrays
		}
	}
	h.last, h.lastSorted, h.lastJournal = nil, nil, nil // in use: another StateAt meanwhile loads its own
	h.lastMu.Unlock()
	if w != nil && !redo && prev == nil && from == n-1 {
		prev = h.baseSorted() // the background's copy of the dump's state
	}
	// What changes from prev (sorted) to the state: the undone events'
	// blocks and segments, and a loaded checkpoint's.
	var blockAddrs, segAddrs []uint64
	if w == nil {
		w, jr = h.load(&cp), nil
		prev = h.baseSorted()
		if len(cp.dups) > 0 {
			prev = nil
		}
		for _, bc := range cp.blocks {
			blockAddrs = append(blockAddrs, bc.addr)
		}
		for _, sc := range cp.segs {
			segAddrs = append(segAddrs, sc.addr)
		}
	}
	if redo {
		jr.redo(w, idx, &blockAddrs, &segAddrs)
	} else {
		if jr == nil {
			jr = &journal{top: from}
		}
		if from-idx > maxJournal {
			// A long undo journals only its last events (the journal
			// keeps no more): a jump costs no more than before.
			jr.recs, jr.top = jr.recs[:0], idx+maxJournal
		}
		w.segs.touched = &segAddrs
		for i := from; i > idx; i-- {
			logging := i <= jr.top
			if logging {
				jr.event, w.segs.log = int32(i), jr
			}
			switch e := &h.events[h.viz[i]]; e.VizAction() {
			case snapshot.ActionFree, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted, snapshot.ActionAlloc:
				if logging {
					jr.block(w, e.Addr)
				}
				blockAddrs = append(blockAddrs, e.Addr)
			}
			h.undo(w, i)
		}
		w.segs.touched, w.segs.log = nil, nil
		jr.trim()
	}
	if len(blockAddrs)+len(segAddrs) > (w.blocks.len()+w.segs.len())/4 {
		prev = nil // as quick to sort in full
	}
	var ss *sortedState
	if prev.owned() && len(w.segs.dups) == 0 && len(blockAddrs)+len(segAddrs) <= maxInPlace {
		// A step: the last state's arrays take its few changes in place,
		// so that stepping holds one sorted state beside the dump's (a
		// merge into a second one was 70 MB more on a 1 GB snapshot).
		h.updateSorted(prev, w, blockAddrs, segAddrs)
		ss = prev
	} else if ss = h.mergeSorted(prev, spare, w, blockAddrs, segAddrs); ss == nil {
		ss = h.sortFull(w)
	}
	st := h.layoutState(idx, ss, top)
	h.lastMu.Lock()
	h.last, h.lastIdx, h.lastJournal = w, idx, jr
	if !ss.dups {
		h.lastSorted = ss
	}
	h.lastMu.Unlock()
	return st
}

// maxInPlace is the most changes a step applies in place (each insertion
// or removal moves the arrays after it); past it, a merge copies them
// once.
const maxInPlace = 16

// keepSorted offers ss, the sorted state after idx that a State was just
// built from, to the next step: as the last sorted state when the last
// work state is at idx and has none, else as the spare, whose arrays the
// next merge fills. A step that finds neither merges into arrays it
// allocates, and on a big state (125 MB of arrays for 760 k segments)
// faulting those in took most of its 350 ms.
func (h *History) keepSorted(ss *sortedState, idx int) {
	if ss.dups || ss.shared {
		return
	}
	h.lastMu.Lock()
	switch {
	case h.last != nil && h.lastIdx == idx && h.lastSorted == nil && h.lastJournal == nil:
		h.lastSorted = ss
	case h.spare == nil:
		h.spare = ss
	}
	h.lastMu.Unlock()
}

// baseSorted returns the dump's state sorted, made on first use.
func (h *History) baseSorted() *sortedState {
	h.baseOnce.Do(func() {
		w := h.baseInit
		h.baseInit = nil
		h.baseSS = h.sortFull(w)
		h.baseSS.base = true
		h.overlay = h.base == nil && endsInOrder(h.baseSS.segs)
		if h.base == nil {
			h.baseSegAddrs = make([]uint64, len(h.baseSS.segs))
			for i := range h.baseSS.segs {
				h.baseSegAddrs[i] = h.baseSS.segs[i].addr
			}
		}
		if h.overlay {
			h.baseSegEnds = make([]uint64, len(h.baseSS.segs))
			for i := range h.baseSS.segs {
				h.baseSegEnds[i] = h.baseSS.segs[i].addr + h.baseSS.segs[i].size
			}
		}
		h.baseRefs = make([]blockRef, len(h.baseSS.blocks))
		if h.base == nil {
			h.baseAddrs = make([]uint64, len(h.baseSS.blocks))
		}
		for i := range h.baseSS.blocks {
			a := h.baseSS.blocks[i].Addr
			h.baseRefs[i], _ = w.blocks.get(a)
			if h.baseAddrs != nil {
				h.baseAddrs[i] = a
			}
		}
	})
	return h.baseSS
}

// buildState lays out a state as memory_viz's MemoryView.draw and adds
// the totals.
func (h *History) buildState(idx int, ss *sortedState) *State { return h.layoutState(idx, ss, 0) }

// layoutState is buildState; with top > 0 only the top largest segments
// (the last of Segments) and the blocks drawn in them are materialized,
// and the totals still cover the whole state. It writes the blocks'
// Segment in ss.blocks, which the State keeps, except in the dump's base,
// which it only reads (a Dump lays it out while its History merges from
// it).
func (h *History) layoutState(idx int, ss *sortedState, top int) *State {
	st := &State{Event: idx}
	inAddr, bySize, blocks := ss.segs, ss.addrPos, ss.blocks
	// One sweep over the blocks and the segments by address: each block's
	// segment (by address; the last one starting at or below it, when the
	// block starts before its end), the totals and the largest free gap.
	var covered, at uint64
	k, cur := -1, -1
	// Each block's segment goes in its Segment, or, for the dump's base
	// (which a Dump lays out while the History reads it), in segOf.
	var segOf []int32
	if ss.base {
		segOf = make([]int32, len(blocks))
	}
	done := func(j int) { // segment j (by address) has all its blocks
		sg := &inAddr[j]
		switch {
		case j != cur:
			st.LargestFree = max(st.LargestFree, sg.size)
		case sg.addr+sg.size > at:
			st.LargestFree = max(st.LargestFree, sg.addr+sg.size-at)
		}
	}
	for i := range blocks {
		b := &blocks[i]
		for k+1 < len(inAddr) && inAddr[k+1].addr <= b.Addr {
			if k >= 0 {
				done(k)
			}
			k++
		}
		st.Allocated += b.Requested
		st.RealAllocated += b.Size
		if b.Size > b.Requested {
			st.RoundingWaste += b.Size - b.Requested
		}
		if b.PendingFree {
			st.PendingFree++
		}
		if k < 0 || b.Addr >= inAddr[k].addr+inAddr[k].size {
			if segOf != nil {
				segOf[i] = -1
			} else {
				b.Segment = -1
			}
			continue
		}
		if segOf != nil {
			segOf[i] = int32(k)
		} else {
			b.Segment = int32(k)
		}
		sg := &inAddr[k]
		if cur != k {
			cur, at = k, sg.addr
		}
		if b.Addr > at {
			st.LargestFree = max(st.LargestFree, b.Addr-at)
		}
		at = max(at, b.Addr+b.Size)
		covered += min(b.Size, sg.addr+sg.size-b.Addr)
	}
	for k = max(k, 0); k < len(inAddr); k++ {
		done(k)
	}

	// Segments by (size, addr), packed into rows as wide as the largest.
	first := 0
	if top > 0 {
		first = max(0, len(bySize)-top)
	}
	st.Omitted = first
	st.Segments = make([]SegmentState, len(bySize)-first)
	var maxSize uint64
	if len(bySize) > 0 {
		maxSize = ss.sizes[len(bySize)-1]
	}
	st.Padding = float64(maxSize) / 200
	row, rowSize := 0, 0.0
	for i, size := range ss.sizes {
		if rowSize+float64(size) > float64(maxSize) {
			rowSize = 0
			row++
		}
		if i >= first {
			sg := &inAddr[bySize[i]]
			st.Segments[i-first] = SegmentState{
				Addr: sg.addr, Size: sg.size, Stream: sg.stream, Version: sg.version,
				PoolID: h.pools[sg.pool], Stack: sg.stack, Row: row, X: rowSize, FirstBlock: -1,
			}
		}
		rowSize += float64(size) + st.Padding
		st.Reserved += size
	}
	st.Rows = row + 1
	if len(bySize) == 0 {
		st.Rows = 0
	}
	if covered < st.Reserved {
		st.FreeBytes = st.Reserved - covered
	}

	// The blocks' Segment from positions by address to positions in
	// st.Segments.
	if first == 0 {
		byAddr := make([]int32, len(inAddr))
		for i, k := range ss.addrPos {
			byAddr[k] = int32(i)
		}
		if segOf != nil {
			blocks = slices.Clone(blocks) // the base's stay as they are
			for i := range blocks {
				blocks[i].Segment = segOf[i]
			}
		} else {
			ss.shared = true
		}
		for i := range blocks {
			if b := &blocks[i]; b.Segment >= 0 {
				b.Segment = byAddr[b.Segment]
			}
		}
		st.Blocks = blocks
	} else {
		// Only the blocks of the kept segments, still by address.
		kept := make([][2]int32, 0, len(st.Segments)) // by address: position by address, in st.Segments
		for i := first; i < len(bySize); i++ {
			kept = append(kept, [2]int32{ss.addrPos[i], int32(i - first)})
		}
		slices.SortFunc(kept, func(a, b [2]int32) int { return cmp.Compare(a[0], b[0]) })
		st.Blocks = []StateBlock{}
		for _, kp := range kept {
			a := inAddr[kp[0]].addr
			j, _ := slices.BinarySearchFunc(blocks, a, func(b StateBlock, a uint64) int { return cmp.Compare(b.Addr, a) })
			for ; j < len(blocks) && blocks[j].Addr < a+inAddr[kp[0]].size; j++ {
				sj := blocks[j].Segment
				if segOf != nil {
					sj = segOf[j]
				}
				if sj == kp[0] {
					b := blocks[j]
					b.Segment = kp[1]
					st.Blocks = append(st.Blocks, b)
				}
			}
		}
	}
	for i := range st.Blocks {
		b := &st.Blocks[i]
		if b.Segment < 0 {
			continue
		}
		sg := &st.Segments[b.Segment]
		if sg.FirstBlock < 0 {
			sg.FirstBlock = int32(i)
		}
		sg.NumBlocks++
		sg.Occupied += b.Requested
		if b.Size > b.Requested {
			sg.InternalFree += b.Size - b.Requested
		}
	}
	for i := range st.Segments {
		if st.Segments[i].FirstBlock < 0 {
			st.Segments[i].FirstBlock = 0
		}
	}
	return st
}

func (h *History) event(i int) EventInfo {
	if i < 0 || i >= len(h.viz) {
		return EventInfo{Index: i, Raw: -1}
	}
	raw := int(h.viz[i])
	e := &h.events[raw]
	a := e.VizAction()
	info := EventInfo{
		Index: i, Raw: raw, Action: a,
		Addr:   formatAddr(a.IsSegmentAction(), e.Addr, h.s.Traces[h.device].Version(raw)),
		Size:   e.Size,
		Stream: e.Stream, TimeUS: e.TimeUS, HasTime: e.Flags&snapshot.FlagHasTime != 0,
		UserMetadata: h.s.Text(h.s.EventMeta(&h.s.Traces[h.device], raw).UserMetadata),
		Stack:        e.Stack,
		Frames:       formatFrames(h.s, e.Stack),
	}
	stream := "\n              (stream " + itoa(int64(e.Stream)) + ")"
	switch a {
	case snapshot.ActionOOM:
		info.Text = "OOM (requested " + units.Viz(e.Size) + ", Device has " + units.Viz(e.Addr) + " memory free)" + stream
	case snapshot.ActionSnapshot:
		info.Text = "snapshot"
	default:
		info.Text = padEnd(a.String(), 14) + " " + padEnd(info.Addr, 18) + " " + units.Viz(e.Size) + stream
	}
	return info
}

// EventStack is memory_viz's eventStack text for event i: the totals line
// (when st is not nil), the event, user metadata and frames.
func (h *History) EventStack(i int, st *State) string {
	e := h.event(i)
	var b strings.Builder
	if st != nil {
		b.WriteString("(" + units.Viz(st.Allocated) + " allocated / " + units.Viz(st.Reserved) + " reserved)\n")
	}
	b.WriteString(e.Text + "\n")
	if md := userMetadataText(e.UserMetadata); md != "" {
		b.WriteString(md + "\n")
	}
	b.WriteString(framesText(h.s, e.Stack))
	return b.String()
}

func padEnd(s string, n int) string {
	if len(s) >= n {
		return s
	}
	return s + strings.Repeat(" ", n-len(s))
}
