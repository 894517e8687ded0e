// Package replay computes memory_viz's timelines, totals curves and allocator
// state history from a snapshot once, and answers rendering queries on them
// quickly.
//
// Three views, as in PyTorch's memory_viz:
//
//   - Timeline: the stacked-area "Active Memory Timeline" (KindActive),
//     "Allocated Memory (incl. Private Pools)" (KindActiveWithPools) and
//     "Active Cached Segment Timeline" (KindSegments). Build with
//     NewTimeline; draw any window with Query; inspect with Element,
//     HitTest and Search.
//   - Curves: allocated / reserved / active / requested bytes after every raw
//     trace event, downsampled per pixel column with Downsample.
//   - History: the "Allocator State History": StateAt(i) is every segment and
//     block of the device after memory_viz event i, from checkpoints.
//
// Units: a timeline's x axis is memory_viz's timestep (index into its
// max_at_time array); its y axis is bytes. Event indices of a History are
// memory_viz's annotated event idx (positions in snapshot.Trace.Viz).
package replay

import "github.com/gpumem/gpumem/snapshot"

// Kind selects which memory_viz timeline a Timeline reproduces.
type Kind uint8

// The timeline kinds, in memory_viz's menu order.
const (
	// KindActive is "Active Memory Timeline": alloc/free of blocks, plotted
	// with requested sizes.
	KindActive Kind = iota
	// KindActiveWithPools is "Allocated Memory (incl. Private Pools)": as
	// KindActive, but blocks of private pools (CUDA graphs, MemPools) live
	// inside one envelope per pool whose height is the pool's high-water
	// mark of max(active, reserved).
	KindActiveWithPools
	// KindSegments is "Active Cached Segment Timeline": segment_alloc /
	// segment_free (cudaMalloc / cudaFree); map/unmap are ignored as in
	// memory_viz.
	KindSegments
)

// String returns memory_viz's view name.
func (k Kind) String() string {
	switch k {
	case KindActive:
		return "Active Memory Timeline"
	case KindActiveWithPools:
		return "Allocated Memory (incl. Private Pools)"
	case KindSegments:
		return "Active Cached Segment Timeline"
	}
	return "unknown"
}

// DefaultMaxEntries is memory_viz's default detail (elements drawn
// individually before the rest is summarized).
const DefaultMaxEntries = 15000

// TimelineCounts are the counts memory_viz's process_alloc_data reports for one
// timeline.
type TimelineCounts struct {
	// PeakBytes is max(max_at_time): the highest stacked total, including
	// the initial stack (ghost blocks, pre-trace frees).
	PeakBytes uint64
	// Elements is elements_length: allocations (or segments) in the view.
	Elements int
	// Timesteps is len(max_at_time) at the given detail.
	Timesteps int
}

// Peaks returns the peak bytes of the Active Memory Timeline and of the
// Active Cached Segment Timeline of a device, exactly as memory_viz computes
// them (max of max_at_time). O(n) time for n trace events, and memory for
// the allocations live at once only: it pairs allocations with their
// frees as buildElements does but keeps running totals, not the elements
// (TestPeaksMatchComputeStats). On a 264 MB snapshot the elements were a
// fifth of gpumem info's peak memory.
func Peaks(s *snapshot.Snapshot, device int) (active, segments uint64) {
	return streamPeak(s, device, false), streamPeak(s, device, true)
}

// streamPeak is computeStats' PeakBytes without its elements. Which
// elements are drawn and where they sit decide the picture, not the
// totals (the band holds exactly the live elements not drawn), and
// memory_viz checks the total after an element is added and before one
// is taken away. The initial stack (frees of addresses allocated before
// the trace, the dump's blocks or segments no allocation explains) is
// known only at the end, but it adds the same to every total.
func streamPeak(s *snapshot.Snapshot, device int, segmentsView bool) uint64 {
	p := newPairing(0, 0, segmentsView)
	sizes := []uint64{}  // of live allocations, by the slot live maps to
	var free []int32     // slots of sizes freed
	var delta, top int64 // the first check is at delta >= 0
	var initial uint64
	initials, actions := 0, 0
	viz := vizEvents(s, device)
	for _, raw := range viz {
		e := &s.Traces[device].Events[raw]
		switch e.VizAction() {
		case p.allocAct:
			var slot int32
			if n := len(free); n > 0 {
				slot, free = free[n-1], free[:n-1]
				sizes[slot] = e.Size
			} else {
				slot = int32(len(sizes))
				sizes = append(sizes, e.Size)
			}
			p.live.put(e.Addr, slot)
			delta += int64(e.Size)
			top = max(top, delta)
			actions++
		case p.freeAct, p.freeAct2:
			size := e.Size
			if slot, ok := p.live.take(e.Addr); ok {
				size = sizes[slot]
				free = append(free, slot)
			} else {
				initial += size // freed before any allocation: in the initial stack
				initials++
			}
			top = max(top, delta)
			delta -= int64(size)
			actions++
		}
	}
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		if segmentsView {
			if _, ok := p.live.get(seg.Address); !ok {
				initial += seg.TotalSize
				initials++
			}
			continue
		}
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			if b.State != snapshot.BlockActiveAllocated {
				continue
			}
			if _, ok := p.live.get(b.Addr); !ok {
				initial += s.Requested(b)
				initials++
			}
		}
	}
	switch {
	case actions > 0:
		return uint64(int64(initial) + top)
	case initials > 0:
		// memory_viz moves the last initial element into the actions, so
		// that a flat graph is drawn: its free is the one check.
		return initial
	}
	return 0
}

// Frame is what one Query returns: everything visible in a window at one
// resolution. Coordinates are pixels of the requested window: x in
// [0, Width] from t0 to t1, y in [0, Height] with y = 0 at the top (y1 bytes)
// and y = Height at the bottom (y0 bytes), like a canvas.
type Frame struct {
	T0, T1        float64 // window in timesteps
	Y0, Y1        float64 // window in bytes
	Width, Height int     // pixels

	// IDs are the elements drawn as polygons: the largest Detail of those
	// that intersect the window, however thin, largest first. Element i's polygon is
	// Points[2*Starts[i] : 2*Starts[i+1]]: x,y pairs along the bottom edge
	// left to right, then the top edge right to left.
	IDs    []int32
	Starts []int32 // len(IDs)+1
	Points []float32

	// Per pixel column c (len Width), in bytes: the lowest and highest
	// stacked total of all elements during the column. Everything between
	// the drawn polygons and ColMax is the elements past Detail (and, at
	// a column's edges, the slides of the stack): draw the area under
	// ColMax as one band first.
	ColMin []float64
	ColMax []float64

	// Truncated says intersecting elements were left out (smallest
	// first) to respect Detail.
	Truncated bool
	// Summarized counts the elements that intersect the window but are
	// not drawn; SummaryExact is false when, to bound the work, it is an
	// upper bound (elements overlapping the window in time only).
	Summarized   int
	SummaryExact bool

	// Slides, when QueryOptions.Slides asked for it and the window came
	// from the sweep, replaces IDs, Starts and Points: what makes them
	// rather than the points themselves.
	Slides *Slides
}

// Slides is what a window's sweep reads to make its polygons' points:
// the drawn elements, the column edges it samples at, and the frees that
// slide the elements above them, grouped. A reader that runs the same
// sweep over them (the page's wincode.js) makes the same points, bit for
// bit: the slides' sums are of whole bytes, exact in any order, and the
// ramps of the frees that are sliding at a sample are summed in the
// sweep's order. A zoomed-out window of the 264 MB tile draws 15,000
// elements that slide down 36-72 times each under the frees below them:
// 2-4 M points (25-42 MB of answer) from 8,000-26,000 groups of slides.
type Slides struct {
	// Per drawn element, up the stack (the sweep's order k).
	IDs  []int32
	Rank []int32   // the element's place among the polygons, largest first
	Base []float64 // its bottom edge at its first sample, bytes
	Size []float64 // its size, bytes
	// Its first and last sample, timesteps (its start or t0, its end or t1).
	StartX, EndX []float64
	// ColX are the Width+1 column edges, timesteps, as the sweep samples them.
	ColX []float64
	// The completed frees: group g holds GroupN[g] of them (in SlideQ,
	// SlideBytes, one per first drawn element above the frees, with the
	// frees' bytes summed), completed when the sweep reached GroupX[g].
	GroupX     []float64
	GroupN     []int32
	SlideQ     []int32
	SlideBytes []float64
	// The frees that were sliding (ramping over 3 timesteps after their
	// end) at some sample, in the sweep's order: the first drawn element
	// above each, its bytes and its end. Each is also in a group once
	// completed.
	RampQ    []int32
	RampSize []float64
	RampEnd  []float64
}

// Release gives f's points back for later queries, once they are read:
// a zoomed-out window of the 264 MB tile has 4 M of them (35 MB), which
// fresh memory had to be faulted in and cleared for (see held). f's
// Points are nil after.
func (f *Frame) Release() {
	frames.Put(f.Points)
	f.Points = nil
}

// QueryOptions tunes Query; the zero value means the defaults.
type QueryOptions struct {
	// Detail is how many of the largest intersecting elements get their
	// own polygon, as memory_viz's max_entries (default 15000).
	Detail int
	// Slides asks for the frame's Slides instead of its points where the
	// window comes from the sweep (not a materialised timeline's) and its
	// slides are not few (slidesPerElement).
	Slides bool
}

// ElementInfo describes one timeline element for hover and click.
type ElementInfo struct {
	Index int
	// Addr is memory_viz's formatAddr: b'7f064c000000_0 (s'..._0 for the
	// segment timeline).
	Addr    string
	Address uint64
	Version int32
	// Size is the plotted size: requested bytes for allocations, total_size
	// for segments.
	Size uint64
	// TotalAfter is "Total memory used after allocation": the stacked total
	// right after this element was pushed.
	TotalAfter uint64
	Stream     snapshot.StreamID
	// PoolID is the segment_pool_id found by binary search over the
	// device's dump segments; PoolKnown is false for "pool_id unknown".
	PoolID    [2]int64
	PoolKnown bool
	TimeUS    int64
	HasTime   bool
	// CompileContext is "" when the trace entry had none ("None").
	CompileContext string
	UserMetadata   string
	// AllocEvent and FreeEvent are raw indices into Trace.Events, -1 when
	// not in the trace.
	AllocEvent, FreeEvent int
	// Start and End are the element's timesteps; End is the timestep its
	// polygon closes (the last timestep for elements alive at the end).
	Start, End int
	// PreTraceFree: the alloc was not recorded, this element comes from its
	// free ("alloc not recorded, stack trace for free:").
	PreTraceFree bool
	// Ghost: an active block of the dump with no alloc in the trace.
	Ghost bool
	// Stack is the element's stack; Frames is it formatted as memory_viz
	// (frame filter, "<repeats N times>").
	Stack  snapshot.StackID
	Frames []string
	// Envelope marks a private pool's envelope (KindActiveWithPools only;
	// ids Len() .. Len()+Envelopes()-1); PoolKey is memory_viz's
	// "id0,id1,sSTREAM" key and Size its final capacity.
	Envelope bool
	PoolKey  string
}

// Totals are a device's byte counters after one raw trace event.
type Totals struct {
	Allocated uint64 // rounded sizes of allocated blocks (alloc .. free_requested)
	Reserved  uint64 // segment bytes (segment_alloc/free/map/unmap)
	Active    uint64 // rounded sizes of active blocks (alloc .. free_completed)
	Requested uint64 // requested sizes of active blocks
}

// Downsampled is Curves over an event range reduced to buckets: for bucket
// b, the min and max of each counter over its events.
type Downsampled struct {
	I0, I1  int // event range [I0, I1)
	Buckets int
	// Event index range of bucket b is [Bounds[b], Bounds[b+1]).
	Bounds                     []int32
	AllocatedMin, AllocatedMax []uint64
	ReservedMin, ReservedMax   []uint64
	ActiveMin, ActiveMax       []uint64
	RequestedMin, RequestedMax []uint64
}

// EventInfo is one memory_viz event (Allocator State History list entry).
type EventInfo struct {
	Index  int // memory_viz idx
	Raw    int // index into Trace.Events
	Action snapshot.Action
	// Addr is formatAddr: b'hex_ver or s'hex_ver.
	Addr    string
	Size    uint64
	Stream  snapshot.StreamID
	TimeUS  int64
	HasTime bool
	// Text is memory_viz's formatEvent.
	Text         string
	UserMetadata string
	Stack        snapshot.StackID
	Frames       []string
}

// SegmentState is one segment in a State, with memory_viz's layout.
type SegmentState struct {
	Addr    uint64
	Size    uint64
	Stream  snapshot.StreamID
	Version int32
	PoolID  [2]int64
	Stack   snapshot.StackID
	// Blocks[FirstBlock : FirstBlock+NumBlocks] of the State lie in it.
	FirstBlock, NumBlocks int32
	// Occupied is the sum of requested sizes of its blocks; InternalFree the
	// rounding waste (size - requested) of its blocks.
	Occupied, InternalFree uint64
	// Layout as memory_viz draws it: Row, and X (bytes from the row start;
	// rows are as wide as the largest segment, segments are separated by
	// Padding bytes).
	Row int
	X   float64
}

// StateBlock is one active block in a State.
type StateBlock struct {
	Addr        uint64
	Size        uint64 // rounded block size
	Requested   uint64
	Version     int32
	PendingFree bool // freed but waiting for record_stream events
	Stack       snapshot.StackID
	Segment     int32 // index into State.Segments, -1 if outside all
}

// State is the allocator state of one device after one event.
type State struct {
	Event int // memory_viz idx; -1 = before the first event
	// Segments sorted by (size, addr) as memory_viz lays them out.
	Segments []SegmentState
	// Blocks sorted by address.
	Blocks []StateBlock
	// Padding and Rows describe the layout (see SegmentState).
	Padding float64
	Rows    int
	// Omitted counts the smallest segments left out of Segments (and
	// their blocks out of Blocks) by StateTop.
	Omitted int

	Allocated     uint64 // memory_viz "allocated": sum of requested sizes
	Reserved      uint64 // sum of segment sizes
	RealAllocated uint64 // sum of rounded block sizes
	RoundingWaste uint64 // sum of size - requested over blocks
	FreeBytes     uint64 // reserved bytes not covered by any block
	LargestFree   uint64 // largest free gap inside one segment
	PendingFree   int    // blocks waiting for record_stream events
}

// ComputeStats returns memory_viz's peak, element count and timestep count
// for one view at a detail of maxEntries (DefaultMaxEntries in memory_viz;
// <= 0 means all elements drawn). O(n log n); no Timeline is built.
func ComputeStats(s *snapshot.Snapshot, device int, kind Kind, maxEntries int) TimelineCounts {
	return computeStats(s, device, kind, maxEntries)
}

// NewTimeline builds the timeline of one device and kind, with every
// element drawn (memory_viz's detail slider at its maximum).
//
// Building is O(n log n) time and O(n) memory for n trace events: per
// element it stores its interval, size and stack position, never the
// per-timestep offsets memory_viz materializes (O(n²) in the worst case).
// Offsets are derived at query time: an element's bottom edge at timestep t
// is the sum of sizes of elements pushed before it and still alive at t
// (with memory_viz's 3-timestep slide after a free below it).
func NewTimeline(s *snapshot.Snapshot, device int, kind Kind) *Timeline {
	t := newTimeline(s, device, kind, nil)
	t.StartIndexes()
	return t
}

// Len returns the number of elements (memory_viz's elements_length).
func (t *Timeline) Len() int { return len(t.src) }

// Envelopes returns the number of private-pool envelopes
// (KindActiveWithPools with private pools; 0 otherwise). Their ids follow
// the elements: Len() .. Len()+Envelopes()-1.
func (t *Timeline) Envelopes() int { return len(t.poolKeys) }

// Timesteps returns len(max_at_time) with every element drawn.
func (t *Timeline) Timesteps() int { return t.timesteps }

// PeakBytes returns max(max_at_time).
func (t *Timeline) PeakBytes() uint64 { return t.peak }

// Query returns what is visible in the window [t0, t1] x [y0, y1]
// (timesteps x bytes) drawn at widthPx x heightPx: the largest Detail
// elements that intersect it as polygons, however thin, the rest as the
// band under ColMax. Cost is about O(B log n + C log C + F log V +
// V·widthPx + D) for B non-empty (size, duration) classes, C elements of
// the size classes needed to fill Detail, V drawn elements, F frees inside
// the window that slide the stack and D elements alive at t0 and t1 —
// never a pass over the whole trace. For KindActiveWithPools with private
// pools the polygons are memory_viz's own, sampled per column.
func (t *Timeline) Query(t0, t1 float64, widthPx, heightPx int, y0, y1 float64) *Frame {
	return t.QueryWith(t0, t1, widthPx, heightPx, y0, y1, QueryOptions{})
}

// QueryWith is Query with options.
func (t *Timeline) QueryWith(t0, t1 float64, widthPx, heightPx int, y0, y1 float64, o QueryOptions) *Frame {
	return t.query(t0, t1, widthPx, heightPx, y0, y1, o)
}

// IndexBuilt says how far the index of windows narrower than the whole
// trace is built (StartIndexes): "none", "blocks" (the stack's blocks,
// not yet the buckets) or "built" (a timeline that needs none, too).
// A window answered before it is built takes longer: the server reports
// which its answer had.
func (t *Timeline) IndexBuilt() string {
	switch {
	case t.bucketsReady():
		return "built"
	case t.blocksReady():
		return "blocks"
	}
	return "none"
}

// HitTest returns the element drawn at timestep x and byte offset y, if any.
// O(D + log n) for D elements alive at x.
func (t *Timeline) HitTest(x, y float64) (elem int, ok bool) { return t.hitTest(x, y) }

// Offset returns element i's bottom edge (bytes) at timestep x (clamped to
// the element's lifetime).
func (t *Timeline) Offset(i int, x float64) float64 { return t.offsetAt(i, x) }

// Element describes element i (0 <= i < Len()).
func (t *Timeline) Element(i int) ElementInfo { return t.element(i) }

// Context returns memory_viz's hover text for element i (context_for_id).
func (t *Timeline) Context(i int) string { return t.context(i) }

// Search returns the elements whose Context contains every non-empty query
// (case-insensitive substring, trimmed, as memory_viz's search boxes), in
// index order. memory_viz highlights address and frame matches separately:
// call Search(a, "") and Search("", f) for that.
func (t *Timeline) Search(addrQuery, frameQuery string) []int { return t.search(addrQuery, frameQuery) }

// NewCurves computes the totals after every raw trace event of a device.
// Initial values are the dump's totals with the whole trace undone.
// O(n) time; about 2 bytes per event (values are recomputed from the
// trace, at most 64 events per At).
func NewCurves(s *snapshot.Snapshot, device int) *Curves { return newCurves(s, device, nil) }

// NewCurvesPaused is NewCurves calling pause (when not nil) about every
// millisecond of work in its two passes over the trace, so that a server
// can park the build while it answers a request the user waits on: a
// build that runs on at low priority holds a processor, and the
// collector's stop-the-world phases wait for it to be preempted.
func NewCurvesPaused(s *snapshot.Snapshot, device int, pause func()) *Curves {
	return newCurves(s, device, pause)
}

// Len returns the number of raw trace events.
func (c *Curves) Len() int { return len(c.events) }

// At returns the totals after raw event i; i = -1 gives the totals before
// the first event.
func (c *Curves) At(i int) Totals { return c.at(i) }

// Downsample reduces events [i0, i1) to at most buckets min/max buckets.
// O(buckets · log n) with the curves' range-min/max index.
func (c *Curves) Downsample(i0, i1, buckets int) *Downsampled { return c.downsample(i0, i1, buckets) }

// NewHistory prepares the Allocator State History of a device: the dump
// state, the events in memory_viz order and a checkpoint every K events,
// built by undoing the trace from the end once. A checkpoint stores only
// how its state differs from the dump's. K is CheckpointEvery, doubled
// while the checkpoints pass about 64 MiB. Undoing one event is O(1)
// (segments are kept by start and end address, never in a shifted
// slice), so building is O(n + (n/K)·D) time for n events and checkpoints
// of D differences each; memory O(dump + (n/K)·D).
func NewHistory(s *snapshot.Snapshot, device int) *History {
	return newHistory(s, device, nil, nil, nil)
}

// StartHistory is NewHistory with the checkpoints built in the background:
// it returns once the dump's state is ready, so that the state at the end
// of the trace and the steps back from it are answered at once; StateAt
// further back waits until the build has passed that point. The build
// runs in spawn(build), or in a goroutine of its own when spawn is nil (a
// server runs it at low priority this way), and pauses while busy (when
// not nil) reports true, unless a StateAt waits for it.
func StartHistory(s *snapshot.Snapshot, device int, spawn func(func()), busy func() bool) *History {
	if spawn == nil {
		spawn = func(f func()) { go f() }
	}
	return newHistory(s, device, spawn, busy, nil)
}

// StartHistoryPaused is StartHistory calling pause (when not nil) about
// every 65,536 blocks and segments while it takes in the dump's state,
// before it returns (0.65 s in one run on a 1 GB snapshot): a server parks
// it so while it answers a window. The caller's pause must not block
// while a request waits for the history.
func StartHistoryPaused(s *snapshot.Snapshot, device int, spawn func(func()), busy func() bool, pause func()) *History {
	if spawn == nil {
		spawn = func(f func()) { go f() }
	}
	return newHistory(s, device, spawn, busy, pause)
}

// CheckpointEvery is the least distance in events between stored states.
const CheckpointEvery = 4096

// Len returns the number of memory_viz events (len(Trace.Viz)).
func (h *History) Len() int { return len(h.viz) }

// Event describes memory_viz event i.
func (h *History) Event(i int) EventInfo { return h.event(i) }

// StateAt returns the state after memory_viz event idx (idx = Len()-1 is
// the dump itself; idx = -1 is before the first event), exactly as
// memory_viz's simulate_memory(idx). It starts from the nearest checkpoint
// at or after idx and undoes fewer than K events, or from the state it
// returned last when that is nearer (a step back is one undo): O(S + K log S)
// for S blocks and segments (it merges the changes into sorted arrays).
//
// Blocks re-created by undoing a free have Size = round_size(requested)
// (memory_viz uses the requested size, so it shows no rounding waste for
// them); blocks from the dump keep their real size.
func (h *History) StateAt(idx int) *State { return h.stateAt(idx, 0) }

// StateTop is StateAt with only the n largest segments in Segments (the
// last n of StateAt's, with the same layout) and, when it leaves some out,
// only the blocks drawn in the kept ones in Blocks; the totals are
// StateAt's. A viewer that draws a bounded
// number of segments asks for this: materializing every segment of a big
// state is most of a step's cost.
func (h *History) StateTop(idx, n int) *State { return h.stateAt(idx, max(n, 1)) }

// FormatAddr is memory_viz's formatAddr: s'hex_ver for segment events,
// b'hex_ver otherwise.
func FormatAddr(segment bool, addr uint64, version int32) string {
	return formatAddr(segment, addr, version)
}

// FormatFrames returns a stack as memory_viz prints it: frames filtered
// with frameFilter, "filename:line:name", repeats of 3 or more collapsed to
// "frame, <repeats N times>". FX annotations are appended as memory_viz
// does.
func FormatFrames(s *snapshot.Snapshot, stack snapshot.StackID) []string {
	return formatFrames(s, stack)
}
