package alloc

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// Replay re-runs a snapshot's recorded requests through the model.
//
// The allocator state at the start of the trace is rebuilt by undoing the
// trace from the final segments (as memory_viz's Allocator State History
// does). The requests are then replayed free-running: the model picks
// blocks and decides when to cudaMalloc. Only what it cannot know comes
// from the trace: the address a new cudaMalloc returns, when a deferred
// (record_stream) free completes, and the segments an empty_cache or an
// OOM retry released.
//
// With the snapshot's own settings it is a validation of the model; with
// another Config it is a what-if.

// ReplayOptions configure Simulate.
type ReplayOptions struct {
	// Config overrides the snapshot's settings (what-if); nil validates.
	Config *Config
	// Capacity is the device memory for the what-if (0 = unlimited).
	Capacity uint64
	// MaxMismatches caps the explanations kept (default 20).
	MaxMismatches int
	// FromEmpty starts from an empty allocator instead of the recorded
	// layout: the blocks live at trace start are allocated first, in
	// address order, under the replay's settings (a what-if even without
	// Config). Segments made before recording then follow the setting too.
	FromEmpty bool
	// Curve, when above 0, keeps the reserved bytes over the trace in
	// at most that many buckets (ReplayResult.Curve).
	Curve int
	// off switches model rules off (ablation tests).
	off rule
	// start, when set, is the trace start already rebuilt (replays of
	// one trace under several settings share it; it is only read).
	start *initState
}

// ReplayResult is the outcome of replaying one device's trace.
type ReplayResult struct {
	Device     int
	Validation bool // replayed with the snapshot's own settings
	Config     Config
	FromEmpty  bool // started from an empty allocator (ReplayOptions.FromEmpty)

	Events int // trace entries replayed

	// Validation counters.
	AllocAddrsMatched int
	AllocAddrsTotal   int
	SegEventsMatched  int // recorded segment_alloc/segment_map the model also made
	SegEventsTotal    int
	// Recorded segment_free/segment_unmap the model could apply exactly
	// (an entirely free segment, or whole free pages of one free block).
	ReleasesMatched   int
	ReleasesTotal     int
	FinalStateMatches bool
	// Mismatches explains the first differences (capped); MismatchCount
	// counts all of them.
	Mismatches    []string
	MismatchCount int

	// Predictions of the model.
	PeakReserved      uint64
	PeakAllocated     uint64
	UnallocatedAtPeak float64 // 1 - allocated/reserved at the peak of reserved (not rules.Fragmentation)
	CudaMallocs       int64   // cudaMalloc + page maps
	CudaFrees         int64   // cudaFree + page unmaps
	ModelOOMs         []ReplayOOM

	// What the trace itself shows (segment events are exact).
	RecordedPeakReserved uint64
	RecordedCudaMallocs  int
	RecordedCudaFrees    int
	RecordedOOMs         []ReplayOOM

	// Initial state rebuilt from the snapshot.
	InitialSegments int
	InitialBlocks   int
	InitialReserved uint64

	Stats MemoryStats

	// Curve is the reserved bytes over the trace (ReplayOptions.Curve).
	Curve *ReplayCurve
}

// OOMs counts the requests that failed in the model: its own OOMs and
// the recorded OOMs whose request still fails at the what-if's capacity.
func (r *ReplayResult) OOMs() int {
	n := len(r.ModelOOMs)
	for _, o := range r.RecordedOOMs {
		if o.StillOOM {
			n++
		}
	}
	return n
}

// ReplayOOM places an out-of-memory.
type ReplayOOM struct {
	Event int    // trace index
	Size  uint64 // request size
	// StillOOM (for recorded OOMs in a what-if): the model at the given
	// capacity fails too.
	StillOOM bool
	// AtStart: the request was one of the blocks live at trace start,
	// allocated first from empty (Event is 0).
	AtStart bool
}

// Replayable reports the devices whose traces have alloc events.
func Replayable(s *snapshot.Snapshot) []int {
	var out []int
	for d := range s.Traces {
		for i := range s.Traces[d].Events {
			if s.Traces[d].Events[i].Action == snapshot.ActionAlloc {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// Simulate re-runs device dev of s through the allocator model (replays its
// trace; package replay, by contrast, rebuilds memory_viz's views of it).
func Simulate(s *snapshot.Snapshot, dev int, o ReplayOptions) (*ReplayResult, error) {
	if dev < 0 || dev >= len(s.Traces) {
		return nil, fmt.Errorf("device %d has no trace", dev)
	}
	own := ConfigFromSettings(s.AllocatorSettings)
	cfg := own
	r := &ReplayResult{Device: dev, Validation: o.Config == nil && !o.FromEmpty, FromEmpty: o.FromEmpty}
	if o.Config != nil {
		cfg = *o.Config
	}
	r.Config = cfg
	if o.MaxMismatches == 0 {
		o.MaxMismatches = 20
	}
	rp := &replayer{s: s, dev: dev, r: r, max: o.MaxMismatches, own: own}
	init := o.start
	if init == nil {
		var err error
		if init, err = rp.initialState(); err != nil {
			return nil, err
		}
	}
	// The GPU the trace ran on is unknown; its expandable reservations
	// are sized large and end where the trace shows the next one.
	rp.a = New(cfg, Options{Capacity: o.Capacity, TotalMemory: 1 << 40, Device: dev, Record: true})
	rp.a.off = o.off
	rp.a.active = nil // the replay holds its blocks (see run)
	rp.a.live = make([]*block, 0, 2*len(init.blocks)+256)
	if o.Curve > 0 {
		r.Curve = newReplayCurve(len(s.Traces[dev].Events), o.Curve)
	}
	if o.FromEmpty {
		rp.loadFromEmpty(init)
	} else {
		rp.load(init)
	}
	rp.run(init)
	if r.Validation {
		rp.compareFinal()
	}
	r.Stats = rp.a.Stats()
	r.PeakReserved = uint64(r.Stats.ReservedBytes[PoolAll].Peak)
	r.PeakAllocated = uint64(r.Stats.AllocatedBytes[PoolAll].Peak)
	r.CudaMallocs = r.Stats.NumDeviceAlloc
	r.CudaFrees = r.Stats.NumDeviceFree
	return r, nil
}

// TraceStart describes what device dev's allocator held when recording
// began (rebuilt by undoing the trace from the dump): segments reserved
// before recording and the blocks live in them.
type TraceStart struct {
	Segments int    // cudaMalloc'd segments and mapped expandable runs
	Reserved uint64 // their bytes
	Blocks   int    // live (allocated or pending-free) blocks
}

// StartOf rebuilds the start of device dev's trace.
func StartOf(s *snapshot.Snapshot, dev int) (TraceStart, error) {
	st, err := rebuildStart(s, dev)
	if err != nil {
		return TraceStart{}, err
	}
	t := TraceStart{Segments: len(st.segs), Blocks: len(st.blocks)}
	for _, sg := range st.segs {
		t.Reserved += sg.size
	}
	return t, nil
}

// rebuildStart undoes device dev's trace from the dump (see Simulate).
func rebuildStart(s *snapshot.Snapshot, dev int) (*initState, error) {
	if dev < 0 || dev >= len(s.Traces) {
		return nil, fmt.Errorf("device %d has no trace", dev)
	}
	rp := &replayer{s: s, dev: dev, r: &ReplayResult{}, max: 1, own: ConfigFromSettings(s.AllocatorSettings)}
	return rp.initialState()
}

type replayer struct {
	s   *snapshot.Snapshot
	dev int
	r   *ReplayResult
	a   *Allocator
	max int
	own Config
	// stopAt > 0 ends run before that event (tests).
	stopAt int
	// startAddr maps the recorded address of each block live at trace
	// start to the model's block (nil for a 0-byte request); a nil map
	// means they are the same (recorded layout).
	startAddr map[uint64]*block
	// startPending maps the recorded address of a block pending at trace
	// start to the model's (from empty).
	startPending map[uint64]uint64
}

// c10Size prints as units.C10 when a mismatch is kept: replays of
// diverging traces make millions of mismatches and keep 20.
type c10Size uint64

func (n c10Size) String() string { return units.C10(uint64(n)) }

// miss counts a mismatch and reports whether its message is kept; the
// message's arguments are built only then.
func (rp *replayer) miss() bool {
	rp.r.MismatchCount++
	return len(rp.r.Mismatches) < rp.max
}

// note keeps a mismatch message (after miss).
func (rp *replayer) note(format string, args ...any) {
	rp.r.Mismatches = append(rp.r.Mismatches, fmt.Sprintf(format, args...))
}

// Reconstructed initial state.
type initSeg struct {
	addr, size uint64
	stream     uint64
	small      bool
	expandable bool
}

type initBlock struct {
	addr, size, requested uint64
	pending               bool
	sizeKnown             bool
	freedAt               int   // first trace event that frees it
	id                    int32 // of its address (initState.ids), -1 if not in the trace
}

type initState struct {
	segs   []initSeg // cudaMalloc'd segments and mapped runs of expandable ones
	blocks []initBlock
	exps   []initExp
	// ids numbers the address of each alloc and free event (-1 for the
	// others); nids addresses in all.
	ids  []int32
	nids int
}

// idOf returns the id of a live block's recorded address, -1 if the
// trace never names it.
func (st *initState) idOf(addr uint64) int32 {
	i := sort.Search(len(st.blocks), func(i int) bool { return st.blocks[i].addr >= addr })
	if i < len(st.blocks) && st.blocks[i].addr == addr {
		return st.blocks[i].id
	}
	return -1
}

// initExp is one expandable segment's reservation, as far as the trace
// and the final segments show it.
type initExp struct {
	stream    uint64
	small     bool
	base, end uint64 // lowest and highest address seen
}

// finalSegments returns the device's default-pool segments at dump time.
func (rp *replayer) finalSegments() []int {
	idx := make([]int, 0, len(rp.s.Segments))
	for i := range rp.s.Segments {
		sg := &rp.s.Segments[i]
		if int(sg.Device) != rp.dev {
			continue
		}
		if sg.InPrivatePool() {
			continue
		}
		idx = append(idx, i)
	}
	return idx
}

// initialState undoes the trace from the final segments.
func (rp *replayer) initialState() (*initState, error) {
	s := rp.s
	ev := s.Traces[rp.dev].Events
	// The blocks live at trace start are those whose first event in the
	// trace is a free (allocated before recording; pending when only
	// free_completed comes), and the dump's live blocks the trace never
	// mentions. One map look-up per event numbers the addresses (in the
	// order they first appear) and finds their first events; the replay
	// then keeps what it knows per recorded address in slices.
	st := &initState{ids: make([]int32, len(ev))}
	idOf := newAddrMap(len(ev) / 16)
	first := make([]int32, 0, len(ev)/8) // per id
	// Likewise a cudaMalloc'd segment was there at trace start if the
	// first segment_alloc or segment_free at its address is a free, or,
	// when the trace has neither, if the dump has it.
	segFirst := newAddrMap(len(ev) / 64)
	segs := make([]initSeg, 0, len(ev)/64)
	var maps []int32 // segment_map and segment_unmap events, undone below
	for i := range ev {
		st.ids[i] = -1
		switch e := &ev[i]; e.Action {
		case snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
			id, ok := idOf.getOrPut(e.Addr, int32(len(first)))
			if !ok {
				first = append(first, int32(i))
			}
			st.ids[i] = id
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree:
			if _, ok := segFirst.getOrPut(e.Addr, 0); !ok {
				if e.Action == snapshot.ActionSegmentFree {
					segs = append(segs, initSeg{addr: e.Addr, size: e.Size, stream: uint64(s.RawStream(e.Stream)),
						small: e.Size == kSmallBuffer})
				}
			}
		case snapshot.ActionSegmentMap, snapshot.ActionSegmentUnmap:
			maps = append(maps, int32(i))
		}
	}
	st.nids = len(first)
	var blocks []initBlock
	for id, i := range first {
		switch e := &ev[i]; e.Action {
		case snapshot.ActionFreeRequested:
			blocks = append(blocks, initBlock{addr: e.Addr, requested: e.Size, freedAt: int(i), id: int32(id)})
		case snapshot.ActionFreeCompleted:
			blocks = append(blocks, initBlock{addr: e.Addr, requested: e.Size, pending: true, freedAt: int(i), id: int32(id)})
		}
	}
	var runs []initSeg   // mapped runs of expandable segments
	var dumped []initSeg // the dump's other segments the trace does not name
	for _, i := range rp.finalSegments() {
		sg := &s.Segments[i]
		seg := initSeg{addr: sg.Address, size: sg.TotalSize, stream: uint64(s.RawStream(sg.Stream)),
			small: !sg.Large, expandable: sg.IsExpandable}
		if seg.expandable {
			runs = append(runs, seg)
		} else if _, ok := segFirst.get(sg.Address); !ok {
			dumped = append(dumped, seg)
		}
		for _, b := range s.SegmentBlocks(i) {
			if b.State == snapshot.BlockInactive {
				continue
			}
			if _, ok := idOf.get(b.Addr); ok {
				continue
			}
			blocks = append(blocks, initBlock{addr: b.Addr, size: b.Size, requested: s.Requested(&b),
				pending: b.State == snapshot.BlockActivePendingFree, sizeKnown: true, id: -1})
		}
	}
	var seen []initSeg // every expandable range the trace maps or unmaps
	for k := len(maps) - 1; k >= 0; k-- {
		e := &ev[maps[k]]
		switch e.Action {
		case snapshot.ActionSegmentMap:
			seen = append(seen, rp.expRange(runs, e))
			runs = carveRun(runs, e.Addr, e.Size)
		case snapshot.ActionSegmentUnmap:
			r := rp.expRange(runs, e)
			seen = append(seen, r)
			runs = addRun(runs, r)
		}
	}
	byAddr := func(x, y initSeg) int { return cmp.Compare(x.addr, y.addr) }
	increasing := true
	for k := 1; k < len(dumped) && increasing; k++ {
		increasing = dumped[k-1].addr < dumped[k].addr
	}
	if !increasing {
		// Of a repeated address the last counts.
		slices.SortStableFunc(dumped, byAddr)
		out := dumped[:0]
		for k, sg := range dumped {
			if k+1 == len(dumped) || dumped[k+1].addr != sg.addr {
				out = append(out, sg)
			}
		}
		dumped = out
	}
	st.segs = append(append(segs, dumped...), runs...)
	// Reservations live at trace start hold the mapped runs; the trace
	// maps into them above their lowest run, and the reservations it
	// creates later take their address from their first map.
	st.exps = groupReservations(runs)
	// Pages below the lowest run may have been unmapped at trace start:
	// ranges the trace maps or unmaps just below a reservation extend it.
	span := rp.own.LargeSegmentSize * 4096
	for k := range st.exps {
		g := &st.exps[k]
		for _, r := range seen {
			if r.stream == g.stream && r.small == g.small && r.addr < g.base && r.addr+span >= g.base {
				g.base = r.addr
			}
		}
	}
	// slices.SortFunc: the same order as sort.Slice, without its
	// reflection (tiled traces have a million segments and blocks).
	slices.SortFunc(st.segs, byAddr)
	st.blocks = blocks
	slices.SortFunc(st.blocks, func(x, y initBlock) int { return cmp.Compare(x.addr, y.addr) })
	rp.resolveSizes(st)
	return st, nil
}

// segmentOf returns the index of the segment holding addr, or -1.
func (st *initState) segmentOf(addr uint64) int {
	i := sort.Search(len(st.segs), func(i int) bool { return st.segs[i].addr+st.segs[i].size > addr })
	if i < len(st.segs) && st.segs[i].addr <= addr {
		return i
	}
	return -1
}

// resolveSizes fills in the sizes of blocks that were live at trace start
// and freed in the trace: the trace only has their requested size.
func (rp *replayer) resolveSizes(st *initState) {
	cfg := rp.own
	for i := range st.blocks {
		b := &st.blocks[i]
		if b.sizeKnown {
			continue
		}
		si := st.segmentOf(b.addr)
		if si < 0 {
			continue // reported in load
		}
		sg := st.segs[si]
		bound := sg.addr + sg.size
		if i+1 < len(st.blocks) && st.blocks[i+1].addr < bound {
			bound = st.blocks[i+1].addr
		}
		r := cfg.RoundSize(b.requested)
		// Any block seen after it while it was live bounds it: the region
		// in between was free all along, and a free large block is > 1 MiB.
		for _, e := range rp.s.Traces[rp.dev].Events[:b.freedAt] {
			switch e.Action {
			case snapshot.ActionAlloc, snapshot.ActionFreeRequested, snapshot.ActionFreeCompleted:
				if e.Addr >= b.addr+r && e.Addr < bound {
					bound = e.Addr
				}
			}
		}
		room := bound - b.addr
		switch {
		case r >= room:
			b.size = room
		case sg.small || sg.expandable || cfg.ExpandableSegments:
			// Small pool: remainders of >= 512 bytes are always split off.
			if room-r < kMinBlockSize {
				b.size = room
			} else {
				b.size = r
			}
		case r >= cfg.MaxSplitSize:
			// Oversize blocks are never split; they may be up to
			// max_non_split_rounding larger than the request.
			if room < r+cfg.MaxNonSplitRounding {
				b.size = room
			} else {
				b.size = r
			}
		default:
			// Large pool: a remainder of <= 1 MiB is never split off, and
			// every free large block is > 1 MiB, so a short gap is ours.
			if room-r <= kSmallSize {
				b.size = room
			} else {
				b.size = r
			}
		}
		b.sizeKnown = true
	}
}

// loadFromEmpty allocates the blocks live at trace start, in address
// order, into the empty allocator; pending ones are freed as deferred.
// Their streams are those of their recorded segments.
func (rp *replayer) loadFromEmpty(st *initState) {
	a := rp.a
	r := rp.r
	for _, sg := range st.segs {
		r.InitialSegments++
		r.InitialReserved += sg.size
	}
	rp.startAddr = map[uint64]*block{}
	rp.startPending = map[uint64]uint64{}
	for _, b := range st.blocks {
		var stream uint64
		if si := st.segmentOf(b.addr); si >= 0 {
			stream = st.segs[si].stream
		}
		mb, err := a.malloc(b.requested, int64(stream))
		if err != nil {
			r.ModelOOMs = append(r.ModelOOMs, ReplayOOM{AtStart: true, Size: b.requested, StillOOM: true})
			continue
		}
		r.InitialBlocks++
		if b.pending {
			var addr uint64
			if mb != nil {
				addr = mb.ptr
				a.free(mb, true)
			}
			rp.startPending[b.addr] = addr
		} else {
			rp.startAddr[b.addr] = mb
		}
	}
}

// load builds the allocator state from the reconstruction.
func (rp *replayer) load(st *initState) {
	a := rp.a
	r := rp.r
	used := make([]bool, len(st.blocks))
	// fill builds the blocks of the mapped range [start, end): the live
	// blocks of the reconstruction with free blocks in the gaps.
	fill := func(start, end, stream uint64, pool *blockPool, exp *expandableSegment) []*block {
		var chain []*block
		at := start
		addFree := func(to uint64) {
			if to > at {
				chain = append(chain, &block{stream: stream, size: to - at, ptr: at, pool: pool, mapped: true, exp: exp})
				at = to
			}
		}
		k := sort.Search(len(st.blocks), func(i int) bool { return st.blocks[i].addr >= start })
		for ; k < len(st.blocks) && st.blocks[k].addr < end; k++ {
			ib := st.blocks[k]
			used[k] = true
			if ib.addr < at {
				if rp.miss() {
					rp.note("trace start: live block %#x overlaps the block before it", ib.addr)
				}
				continue
			}
			addFree(ib.addr)
			size := min(ib.size, end-ib.addr)
			b := &block{stream: stream, size: size, ptr: ib.addr, pool: pool, mapped: true, exp: exp,
				requested: ib.requested, allocated: !ib.pending}
			if ib.pending {
				b.eventCount = 1
				a.pending = append(a.pending, b)
			}
			chain = append(chain, b)
			at = ib.addr + size
		}
		addFree(end)
		return chain
	}
	link := func(chain []*block, small bool) {
		for k, b := range chain {
			if k > 0 {
				b.prev = chain[k-1]
			}
			if k+1 < len(chain) {
				b.next = chain[k+1]
			}
		}
		for _, b := range chain {
			switch {
			case !b.mapped:
				b.pool.unmapped.insert(b)
			case b.allocated || b.eventCount > 0:
				a.addActive(b)
				if b.allocated {
					a.stats.Allocation.inc(small, 1)
					a.stats.AllocatedBytes.inc(small, b.size)
					if b.size >= a.cfg.MaxSplitSize {
						a.stats.OversizeAllocations.inc(1)
					}
				}
				a.stats.Active.inc(small, 1)
				a.stats.ActiveBytes.inc(small, b.size)
				a.stats.RequestedBytes.inc(small, b.requested)
				r.InitialBlocks++
			default:
				b.pool.insert(b)
				if b.isSplit() && b.exp == nil {
					a.stats.InactiveSplit.inc(small, 1)
					a.stats.InactiveSplitBytes.inc(small, b.size)
				}
			}
		}
	}
	poolOf := func(small bool) *blockPool {
		if small {
			return &a.small
		}
		return &a.large
	}
	for _, sg := range st.segs {
		a.totalAllocated += sg.size
		a.stats.ReservedBytes.inc(sg.small, sg.size)
		r.InitialSegments++
		r.InitialReserved += sg.size
		if sg.expandable {
			continue // below, with its reservation
		}
		a.va.take(sg.addr, sg.size)
		a.stats.Segment.inc(sg.small, 1)
		if sg.size >= a.cfg.MaxSplitSize {
			a.stats.OversizeSegments.inc(1)
		}
		link(fill(sg.addr, sg.addr+sg.size, sg.stream, poolOf(sg.small), nil), sg.small)
	}
	// Expandable segments: one reservation per (stream, pool) holding the
	// mapped runs, with unmapped blocks between and after them.
	for gi, g := range st.exps {
		page := uint64(kSmallBuffer)
		if !g.small {
			page = a.cfg.LargeSegmentSize
		}
		size := a.reservationSize(page)
		size = max(size, (g.end-g.base+page-1)/page*page)
		if gi+1 < len(st.exps) && st.exps[gi+1].base > g.base {
			// Do not run into the next reservation.
			size = min(size, (st.exps[gi+1].base-g.base)/page*page)
		}
		es := &expandableSegment{base: g.base, pageSize: page, maxPages: size / page, stream: g.stream}
		a.expSegs = append(a.expSegs, es)
		a.va.take(es.base, es.size())
		pool := poolOf(g.small)
		var chain []*block
		at := es.base
		unmapped := func(to uint64) {
			if to > at {
				chain = append(chain, &block{stream: g.stream, size: to - at, ptr: at, pool: pool, exp: es})
				at = to
			}
		}
		for _, sg := range st.segs {
			if !sg.expandable || sg.stream != g.stream || sg.small != g.small || sg.addr < at || sg.addr >= es.base+es.size() {
				continue
			}
			unmapped(sg.addr)
			for p := es.pageLeft(sg.addr); p < es.pageRight(sg.addr+sg.size); p++ {
				for uint64(len(es.mapped)) <= p {
					es.mapped = append(es.mapped, false)
				}
				es.mapped[p] = true
			}
			chain = append(chain, fill(sg.addr, sg.addr+sg.size, g.stream, pool, es)...)
			at = sg.addr + sg.size
		}
		unmapped(es.base + es.size())
		link(chain, g.small)
	}
	for k, u := range used {
		if !u {
			if rp.miss() {
				rp.note("trace start: live block %#x lies outside every segment", st.blocks[k].addr)
			}
		}
	}
	// Cumulative counters describe the trace, not what came before it.
	a.stats.resetAccumulated()
}

func (s *MemoryStats) resetAccumulated() {
	for _, arr := range []*StatArray{&s.Allocation, &s.Segment, &s.Active, &s.InactiveSplit,
		&s.AllocatedBytes, &s.ReservedBytes, &s.ActiveBytes, &s.InactiveSplitBytes, &s.RequestedBytes} {
		for i := range arr {
			arr[i].Allocated, arr[i].Freed = 0, 0
		}
	}
	s.OversizeAllocations.Allocated, s.OversizeAllocations.Freed = 0, 0
	s.OversizeSegments.Allocated, s.OversizeSegments.Freed = 0, 0
}

// run replays the trace events.
func (rp *replayer) run(st *initState) {
	a := rp.a
	r := rp.r
	s := rp.s
	ev := s.Traces[rp.dev].Events
	ids := st.ids
	r.Events = len(ev)
	// A live block is at its recorded address in the model too (and
	// block.rec says so), unless moved holds the model's block for the
	// recorded address (by its id, see initState). here holds the block
	// the model placed at the recorded address itself, as a look-up by
	// the model's addresses would find it. Slices, not maps: a diverging
	// replay of a tiled trace moves millions of blocks, and maps of that
	// size cost more than the model. On an exact replay moved stays empty.
	moved := make([]*block, st.nids)
	here := make([]*block, st.nids)
	for _, b := range a.live {
		b.rec = b.ptr
	}
	for rec, b := range rp.startAddr {
		if b != nil {
			b.rec = rec
			if id := st.idOf(rec); id >= 0 {
				moved[id] = b
			}
		}
	}
	for _, b := range a.live {
		if b.ptr == b.rec {
			if id := st.idOf(b.rec); id >= 0 {
				here[id] = b
			}
		}
	}
	lost := map[uint64]bool{} // recorded blocks the model failed to allocate
	// pendingModel maps recorded addresses of deferred frees to the model's.
	pendingModel := map[uint64]uint64{}
	for rec, m := range rp.startPending {
		pendingModel[rec] = m
	}
	var recSegs []snapshot.Event
	segFirst := 0 // the event of recSegs[0]
	recReserved := r.InitialReserved
	r.RecordedPeakReserved = recReserved
	peakRes := uint64(a.stats.ReservedBytes[PoolAll].Current)
	r.UnallocatedAtPeak = unallocated(a)
	// The address of a new segment comes from the recorded segment_alloc
	// of the same request: same size first, else the first unused one.
	var segUsed []bool
	// used sizes segUsed to recSegs: a malloc outside an alloc event (an
	// OOM entry's retry) finds it as the last alloc left it.
	used := func() []bool {
		if len(segUsed) < len(recSegs) {
			segUsed = append(segUsed, make([]bool, len(recSegs)-len(segUsed))...)
		}
		return segUsed
	}
	a.reserveAddr = func(size uint64) (uint64, bool) {
		segUsed := used()
		// A new reservation's first page is the first page this request
		// maps (find_expandable_block hands out the whole reservation).
		for k, e := range recSegs {
			if !segUsed[k] && e.Action == snapshot.ActionSegmentMap {
				segUsed[k] = true
				return e.Addr, true
			}
		}
		return 0, false
	}
	a.segmentAddr = func(size uint64) (uint64, bool) {
		segUsed := used()
		for pass := 0; pass < 2; pass++ {
			for k, e := range recSegs {
				if e.Action != snapshot.ActionSegmentAlloc {
					continue
				}
				if !segUsed[k] && (pass == 1 || e.Size == size) {
					segUsed[k] = true
					return e.Addr, true
				}
			}
		}
		return 0, false
	}
	marked := 0 // the first event not yet in r.Curve
	for i := 0; i < len(ev); i++ {
		if rp.stopAt > 0 && i >= rp.stopAt {
			break
		}
		// The model's trace is looked at one request at a time.
		a.trace = a.trace[:0]
		e := &ev[i]
		stream := s.RawStream(e.Stream)
		switch e.Action {
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			r.SegEventsTotal++
			r.RecordedCudaMallocs++
			recReserved += e.Size
			r.RecordedPeakReserved = max(r.RecordedPeakReserved, recReserved)
			if len(recSegs) == 0 {
				segFirst = i
			}
			recSegs = append(recSegs, *e)
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			r.RecordedCudaFrees++
			recReserved -= min(recReserved, e.Size)
			if r.Validation {
				r.ReleasesTotal++
				switch {
				case e.Action == snapshot.ActionSegmentUnmap && !rp.unmapAt(e.Addr, e.Size, uint64(stream)):
					if rp.miss() {
						rp.note("event %d segment_unmap %#x (%s): the model has no such free pages", i, e.Addr, c10Size(e.Size))
					}
				case e.Action == snapshot.ActionSegmentFree && !rp.releaseSegmentAt(e.Addr, e.Size, uint64(stream)):
					if rp.miss() {
						rp.note("event %d segment_free %#x (%s): the model has no entirely free segment there", i, e.Addr, c10Size(e.Size))
					}
				default:
					r.ReleasesMatched++
				}
			} else {
				// A what-if honours the release as an empty_cache; with a
				// capacity, an OOM retry (segment_alloc follows) is left to
				// the model.
				j := i
				for j+1 < len(ev) && (ev[j+1].Action == snapshot.ActionSegmentFree || ev[j+1].Action == snapshot.ActionSegmentUnmap) {
					j++
				}
				// Releases right before a new segment or an OOM entry are a
				// failing malloc's retry.
				retry := j+1 < len(ev) && (ev[j+1].Action == snapshot.ActionSegmentAlloc ||
					ev[j+1].Action == snapshot.ActionSegmentMap || ev[j+1].Action == snapshot.ActionOOM)
				if !(retry && a.opt.Capacity > 0) {
					a.EmptyCache()
				}
				if r.Curve != nil { // the recorded releases one by one
					r.Curve.mark(i, uint64(a.stats.ReservedBytes[PoolAll].Current), recReserved)
				}
				for k := i + 1; k <= j; k++ {
					r.RecordedCudaFrees++
					recReserved -= min(recReserved, ev[k].Size)
					if r.Curve != nil {
						r.Curve.mark(k, uint64(a.stats.ReservedBytes[PoolAll].Current), recReserved)
					}
				}
				i = j
			}
		case snapshot.ActionAlloc:
			r.AllocAddrsTotal++
			before := len(a.trace)
			segUsed = append(segUsed[:0], make([]bool, len(recSegs))...)
			b, err := a.malloc(e.Size, stream)
			addr := e.Addr // a request of 0 bytes gets no block
			if b != nil {
				addr = b.ptr
				b.rec = e.Addr
			}
			// Which segment events did the model make for this request?
			var made []Event
			for _, me := range a.trace[before:] {
				if me.Action == snapshot.ActionSegmentAlloc || me.Action == snapshot.ActionSegmentMap {
					made = append(made, me)
				}
			}
			rp.compareSegments(i, e, made, recSegs)
			if r.Curve != nil && len(made) > 0 && len(recSegs) > 0 {
				// The trace logs a request's cudaMalloc before its alloc:
				// the model's, made serving the alloc, is drawn there too.
				for k := segFirst; k < i; k++ {
					r.Curve.mark(k, uint64(a.stats.ReservedBytes[PoolAll].Current), 0)
				}
			}
			recSegs = recSegs[:0]
			if err != nil {
				r.ModelOOMs = append(r.ModelOOMs, ReplayOOM{Event: i, Size: e.Size, StillOOM: true})
				if r.Validation {
					if rp.miss() {
						rp.note("event %d alloc %s: the model ran out of memory", i, c10Size(e.Size))
					}
				}
				lost[e.Addr] = true
				moved[ids[i]] = nil
				break
			}
			if len(lost) > 0 {
				delete(lost, e.Addr)
			}
			if addr != e.Addr {
				moved[ids[i]] = b
			} else if b != nil {
				here[ids[i]] = b
			}
			if addr == e.Addr {
				r.AllocAddrsMatched++
			} else if r.Validation {
				if rp.miss() {
					rp.note("event %d alloc %s (stream %d): model chose %#x, trace %#x", i, c10Size(e.Size), stream, addr, e.Addr)
				}
			}
		case snapshot.ActionFreeRequested:
			b := moved[ids[i]]
			switch {
			case b != nil:
				moved[ids[i]] = nil
			case lost[e.Addr]:
			default:
				if b = here[ids[i]]; b != nil && b.ptr != e.Addr {
					b = nil // it moved on since
				}
			}
			if b == nil || !b.allocated || b.rec != e.Addr {
				if !lost[e.Addr] && rp.miss() {
					rp.note("event %d free_requested %#x: no live block", i, e.Addr)
				}
				break
			}
			if i+1 < len(ev) && ev[i+1].Action == snapshot.ActionFreeCompleted && ev[i+1].Addr == e.Addr {
				a.free(b, false)
				i++ // its free_completed
			} else {
				a.free(b, true)
				pendingModel[e.Addr] = b.ptr
			}
		case snapshot.ActionFreeCompleted:
			maddr, ok := pendingModel[e.Addr]
			if !ok {
				maddr = e.Addr // pending at trace start
			}
			delete(pendingModel, e.Addr)
			if b := a.pendingAt(maddr); b != nil {
				a.completeEvent(b)
			}
		case snapshot.ActionOOM:
			o := ReplayOOM{Event: i, Size: e.Size}
			if !r.Validation && a.opt.Capacity > 0 {
				b, err := a.malloc(e.Size, stream)
				if err != nil {
					o.StillOOM = true
				} else if b != nil {
					a.free(b, false)
				}
			}
			r.RecordedOOMs = append(r.RecordedOOMs, o)
		}
		if res := uint64(a.stats.ReservedBytes[PoolAll].Current); res > peakRes {
			peakRes = res
			r.UnallocatedAtPeak = unallocated(a)
		}
		if r.Curve != nil {
			// Events this one consumed (a free_completed, releases) share
			// the values after it.
			for ; marked <= i; marked++ {
				r.Curve.mark(marked, uint64(a.stats.ReservedBytes[PoolAll].Current), recReserved)
			}
		}
	}
}

// pendingAt returns the block at addr that waits for its free to
// complete, or nil.
func (a *Allocator) pendingAt(addr uint64) *block {
	for _, b := range a.pending {
		if b.ptr == addr {
			return b
		}
	}
	return nil
}

func unallocated(a *Allocator) float64 {
	res := a.stats.ReservedBytes[PoolAll].Current
	if res == 0 {
		return 0
	}
	return 1 - float64(a.stats.AllocatedBytes[PoolAll].Current)/float64(res)
}

// compareSegments checks the model's segment events for one request
// against the recorded ones.
func (rp *replayer) compareSegments(i int, e *snapshot.Event, made []Event, rec []snapshot.Event) {
	r := rp.r
	used := make([]bool, len(made))
	for _, re := range rec {
		ok := false
		for k, me := range made {
			if !used[k] && me.Size == re.Size && (re.Action != snapshot.ActionSegmentMap || me.Addr == re.Addr) {
				used[k] = true
				ok = true
				break
			}
		}
		if ok {
			r.SegEventsMatched++
		} else if r.Validation {
			if len(made) == 0 {
				if rp.miss() {
					rp.note("event %d alloc %s: trace cudaMalloc'd %s, the model reused a cached block", i, c10Size(e.Size), c10Size(re.Size))
				}
			} else {
				if rp.miss() {
					rp.note("event %d alloc %s: trace cudaMalloc'd %s, the model %s", i, c10Size(e.Size), c10Size(re.Size), c10Size(made[0].Size))
				}
			}
		}
	}
	if r.Validation {
		for k, me := range made {
			if !used[k] && len(rec) == 0 {
				if rp.miss() {
					rp.note("event %d alloc %s: the model cudaMalloc'd %s, the trace reused a cached block", i, c10Size(e.Size), c10Size(me.Size))
				}
			}
		}
	}
}

// releaseSegmentAt applies a recorded cudaFree: the model must have an
// entirely free segment of that address, size and stream (found by key,
// so that pools of a million blocks stay fast); one it lacks is skipped.
func (rp *replayer) releaseSegmentAt(addr, size, stream uint64) bool {
	a := rp.a
	for _, p := range []*blockPool{&a.large, &a.small} {
		i := p.blocks.lowerBound(stream, size, addr)
		if p.blocks.isEnd(i) {
			continue
		}
		if b := p.blocks.at(i); b.ptr == addr && b.size == size && b.stream == stream && b.prev == nil && b.next == nil && b.exp == nil {
			a.releaseBlock(b)
			return true
		}
	}
	return false
}

// unmapAt applies a recorded segment_unmap: the model must have a free
// block whose whole free pages are exactly that range.
func (rp *replayer) unmapAt(addr, size, stream uint64) bool {
	a := rp.a
	b := rp.freeExpandableBlockAt(addr, stream)
	if b == nil || addr+size > b.ptr+b.size {
		return false
	}
	n := len(a.trace)
	a.unmapBlock(b)
	ok := len(a.trace) == n+1 && a.trace[n].Addr == addr && a.trace[n].Size == size
	if b.prev == nil && b.next == nil && !b.mapped {
		a.releaseExpandableSegment(b)
	}
	return ok
}

// freeExpandableBlockAt finds the free mapped block of an expandable
// segment that holds addr, walking the segment's chain from the nearest
// unmapped range (those are few and indexed by address).
func (rp *replayer) freeExpandableBlockAt(addr, stream uint64) *block {
	a := rp.a
	holds := func(b *block) bool { return b.ptr <= addr && addr < b.ptr+b.size }
	found := func(b *block) *block {
		if b.mapped && !b.allocated && b.eventCount == 0 && !b.streamUses {
			return b
		}
		return nil
	}
	for _, p := range []*blockPool{&a.large, &a.small} {
		u := p.unmapped.items
		i := p.unmapped.lowerBound(stream, addr)
		if i < len(u) && u[i].stream == stream {
			for b := u[i]; b != nil && b.ptr+b.size > addr; b = b.prev {
				if holds(b) {
					return found(b)
				}
			}
		}
		if i > 0 && u[i-1].stream == stream {
			for b := u[i-1]; b != nil && b.ptr <= addr; b = b.next {
				if holds(b) {
					return found(b)
				}
			}
		}
	}
	// A fully mapped reservation has no unmapped range: look at every
	// free block.
	for _, p := range []*blockPool{&a.large, &a.small} {
		for _, b := range p.blocks.all() {
			if b.exp != nil && b.stream == stream && holds(b) {
				return b
			}
		}
	}
	return nil
}

// compareFinal checks the model's final segments and blocks against the
// snapshot's.
func (rp *replayer) compareFinal() {
	s := rp.s
	type seg struct {
		addr, size uint64
		i          int // in s.Segments
	}
	want := make([]seg, 0, len(s.Segments))
	for _, i := range rp.finalSegments() {
		sg := &s.Segments[i]
		want = append(want, seg{sg.Address, sg.TotalSize, i})
	}
	slices.SortFunc(want, func(x, y seg) int { return cmp.Compare(x.addr, y.addr) })
	got := rp.a.Segments()
	ok := len(got) == len(want)
	if !ok {
		if rp.miss() {
			rp.note("final state: model has %d segments, snapshot %d", len(got), len(want))
		}
	}
	// Both lists are sorted by address: the snapshot's segment for a
	// model segment is found by binary search (the last one of that
	// address, as a map by address would keep), and each is matched once.
	matched := make([]bool, len(want))
	find := func(addr uint64) int {
		k := sort.Search(len(want), func(k int) bool { return want[k].addr > addr }) - 1
		if k < 0 || want[k].addr != addr || matched[k] {
			return -1
		}
		return k
	}
	bad := 0
	for _, g := range got {
		k := find(g.Addr)
		if k < 0 {
			ok = false
			bad++
			if bad <= 5 {
				if rp.miss() {
					rp.note("final state: model segment %#x (%s) is not in the snapshot", g.Addr, c10Size(g.Size))
				}
			}
			continue
		}
		matched[k] = true
		w := want[k]
		wb := s.SegmentBlocks(w.i)
		same := g.Size == w.size && len(g.Blocks) == len(wb)
		if same {
			for j, b := range g.Blocks {
				if b.Addr != wb[j].Addr || b.Size != wb[j].Size || b.State != wb[j].State {
					same = false
					break
				}
			}
		}
		if !same {
			ok = false
			bad++
			if bad <= 5 {
				if rp.miss() {
					rp.note("final state: segment %#x differs: model %d blocks / %s, snapshot %d blocks / %s",
						g.Addr, len(g.Blocks), c10Size(g.Size), len(wb), c10Size(w.size))
				}
			}
		}
	}
	for k, w := range want {
		if matched[k] || (k+1 < len(want) && want[k+1].addr == w.addr) {
			continue // matched, or a duplicate address the look-up never sees
		}
		ok = false
		bad++
		if bad <= 5 {
			if rp.miss() {
				rp.note("final state: snapshot segment %#x (%s) is missing from the model", w.addr, c10Size(w.size))
			}
		}
	}
	rp.r.FinalStateMatches = ok
}

// expRange describes a mapped or unmapped range of an expandable segment;
// its pool is that of an adjacent known run, else guessed from the size
// (large pages are large_segment_size).
func (rp *replayer) expRange(runs []initSeg, e *snapshot.Event) initSeg {
	r := initSeg{addr: e.Addr, size: e.Size, stream: uint64(rp.s.RawStream(e.Stream)), expandable: true}
	r.small = e.Size%rp.own.LargeSegmentSize != 0
	for _, k := range runs {
		if k.stream == r.stream && k.addr <= r.addr+r.size && r.addr <= k.addr+k.size {
			r.small = k.small
			break
		}
	}
	return r
}

// carveRun removes [addr, addr+size) from the mapped runs.
func carveRun(runs []initSeg, addr, size uint64) []initSeg {
	end := addr + size
	var out []initSeg
	for _, r := range runs {
		rEnd := r.addr + r.size
		if rEnd <= addr || r.addr >= end {
			out = append(out, r)
			continue
		}
		if r.addr < addr {
			left := r
			left.size = addr - r.addr
			out = append(out, left)
		}
		if rEnd > end {
			right := r
			right.addr = end
			right.size = rEnd - end
			out = append(out, right)
		}
	}
	return out
}

// addRun adds a mapped range and merges it with adjacent runs of the same
// stream and pool.
func addRun(runs []initSeg, r initSeg) []initSeg {
	runs = append(carveRun(runs, r.addr, r.size), r)
	sort.Slice(runs, func(i, j int) bool { return runs[i].addr < runs[j].addr })
	out := runs[:0]
	for _, k := range runs {
		if n := len(out); n > 0 && out[n-1].addr+out[n-1].size == k.addr && out[n-1].stream == k.stream && out[n-1].small == k.small {
			out[n-1].size += k.size
			continue
		}
		out = append(out, k)
	}
	return out
}

// groupReservations assumes one reservation per (stream, pool), as the
// allocator makes a second one only when the first is full.
func groupReservations(ranges []initSeg) []initExp {
	type key struct {
		stream uint64
		small  bool
	}
	idx := map[key]int{}
	var out []initExp
	for _, r := range ranges {
		k := key{r.stream, r.small}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, initExp{stream: r.stream, small: r.small, base: r.addr, end: r.addr + r.size})
			continue
		}
		out[i].base = min(out[i].base, r.addr)
		out[i].end = max(out[i].end, r.addr+r.size)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].base < out[j].base })
	return out
}
