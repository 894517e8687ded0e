package web

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"github.com/gpumem/gpumem/snapshot"
)

// View names, as used in URLs and the --view flag.
const (
	ViewActive   = "active"   // Active Memory Timeline
	ViewPrivate  = "private"  // Allocated Memory (incl. Private Pools)
	ViewSegments = "segments" // Active Cached Segment Timeline
	ViewState    = "state"    // Allocator State History
	ViewSettings = "settings" // Allocator Settings
)

// DefaultDetail is memory_viz's default number of individually drawn
// allocations; smaller ones are summarised into one band.
const DefaultDetail = 15000

// elemKind says where a timeline element came from.
type elemKind uint8

const (
	kindAlloc    elemKind = iota // an alloc (or segment_alloc) event
	kindFreeOnly                 // a free whose alloc was not recorded
	kindGhost                    // a live snapshot block with no alloc event
	kindSegment                  // a snapshot segment with no segment_alloc event
)

// element is one allocation of a timeline: memory_viz's "elements" entry,
// kept as a compact struct that points back into the snapshot.
type element struct {
	Addr     uint64
	Size     uint64
	TimeUS   int64
	Event    int32 // raw event index, -1 for snapshot elements
	Version  int32
	Stream   snapshot.StreamID
	Stack    snapshot.StackID
	Ctx      snapshot.StringID
	Meta     snapshot.StringID
	Pool     [2]int64
	HasPool  bool
	HasTime  bool
	Kind     elemKind
	Segment  bool    // addresses are segment addresses (s' prefix)
	MaxAfter float64 // total memory right after it was allocated
}

// series is one drawn band: an element whose bottom edge moves over time
// (offsets only ever shrink as lower bands are freed).
type series struct {
	Elem  int32
	Color int32
	Size  float64
	// Pts is the bottom edge over time, in step order. A point with T < 0
	// is a ramp: the edge moves from the previous point's offset at step
	// -T-3 to Off at step -T (memory_viz's 3-step restacking animation).
	Pts    []cpoint
	Opaque uint8 // 0 normal, 1 pool stripe, 2 pool envelope
	// Sizes per point for envelopes (whose height changes); nil otherwise.
	SizeAt []float64
}

type point struct {
	T   int32
	Off float64
}

// cpoint is a finished band's point: float32 offsets are exact enough to
// draw (bands under half a pixel are never drawn) and halve the memory.
type cpoint struct {
	T   int32
	Off float32
}

// timeline is one trace view computed once: memory_viz's
// process_alloc_data result in columns.
type timeline struct {
	View      string
	Detail    int
	Elems     []element
	Series    []series
	MaxAtTime []float64 // total memory per timestep
	StepEvent []float64 // x in event-index units for each timestep (+1 closing)
	StepTime  []float64 // time_us per timestep, filled by stepTime
	timeOnce  sync.Once
	events    []snapshot.Event
	viz       []int32
	HasTime   bool
	MaxSize   float64
	// SumOff is the bottom of the summarised band per timestep (its top
	// is MaxAtTime).
	SumOff []float64
}

// buildTimeline runs memory_viz's process_alloc_data for one device.
// view is ViewActive, ViewPrivate or ViewSegments.
func buildTimeline(s *snapshot.Snapshot, device int, view string, detail int) *timeline {
	plotSegments := view == ViewSegments
	privatePools := view == ViewPrivate
	tl := &timeline{View: view, Detail: detail}
	var events []snapshot.Event
	var viz []int32
	if device >= 0 && device < len(s.Traces) {
		events = s.Traces[device].Events
		viz = s.Traces[device].Viz
		if viz == nil {
			viz = make([]int32, len(events))
			for i := range viz {
				viz[i] = int32(i)
			}
		}
	}

	segs := deviceSegments(s, device)
	findPool := func(addr uint64) ([2]int64, bool) {
		i := sort.Search(len(segs), func(i int) bool { return s.Segments[segs[i]].Address+s.Segments[segs[i]].TotalSize > addr })
		if i < len(segs) {
			sg := &s.Segments[segs[i]]
			if addr >= sg.Address && sg.HasPoolID {
				return sg.PoolID, true
			}
		}
		return [2]int64{}, false
	}

	type action struct {
		elem  int32
		event int32 // viz index of the event
	}
	tl.Elems = make([]element, 0, len(viz)/2+16)
	var actions []action
	var initial []int32
	addrToAlloc := map[uint64]int32{}
	type poolSegEvent struct {
		pos   int
		delta float64
		key   poolKey
	}
	var poolSegEvents []poolSegEvent

	newElem := func(vi int, raw int32, e *snapshot.Event, kind elemKind) int32 {
		el := element{
			Addr: e.Addr, Size: e.Size, TimeUS: e.TimeUS, Event: raw, Version: e.Version,
			Stream: e.Stream, Stack: e.Stack, Ctx: e.CompileContext, Meta: e.UserMetadata,
			HasTime: e.Flags&snapshot.FlagHasTime != 0, Kind: kind, Segment: plotSegments,
		}
		tl.Elems = append(tl.Elems, el)
		return int32(len(tl.Elems) - 1)
	}
	for vi, raw := range viz {
		e := &events[raw]
		a := e.VizAction()
		isAlloc, isFree := false, false
		if plotSegments {
			isAlloc = a == snapshot.ActionSegmentAlloc
			isFree = a == snapshot.ActionSegmentFree
		} else {
			isAlloc = a == snapshot.ActionAlloc
			isFree = a == snapshot.ActionFree || a == snapshot.ActionFreeCompleted
		}
		switch {
		case isAlloc:
			id := newElem(vi, raw, e, kindAlloc)
			addrToAlloc[e.Addr] = id
			actions = append(actions, action{id, int32(vi)})
		case isFree:
			if id, ok := addrToAlloc[e.Addr]; ok {
				actions = append(actions, action{id, int32(vi)})
				delete(addrToAlloc, e.Addr)
			} else {
				id := newElem(vi, raw, e, kindFreeOnly)
				initial = append(initial, id)
				actions = append(actions, action{id, int32(vi)})
			}
		}
		if privatePools && a.IsSegmentAction() {
			if pid, ok := findPool(e.Addr); ok && isPrivatePool(pid) {
				d := float64(e.Size)
				if a == snapshot.ActionSegmentFree || a == snapshot.ActionSegmentUnmap {
					d = -d
				}
				poolSegEvents = append(poolSegEvents, poolSegEvent{len(actions), d, poolKey{pid, e.Stream}})
			}
		}
	}
	for _, si := range segs {
		sg := &s.Segments[si]
		if plotSegments {
			if _, ok := addrToAlloc[sg.Address]; !ok {
				tl.Elems = append(tl.Elems, element{Addr: sg.Address, Size: sg.TotalSize, Event: -1,
					Version: sg.Version, Stream: sg.Stream, Stack: sg.Stack, Kind: kindSegment, Segment: true,
					Pool: sg.PoolID, HasPool: sg.HasPoolID})
				initial = append(initial, int32(len(tl.Elems)-1))
			}
			continue
		}
		for bi := range s.SegmentBlocks(si) {
			b := &s.Blocks[int(sg.FirstBlock)+bi]
			if b.State != snapshot.BlockActiveAllocated {
				continue
			}
			if _, ok := addrToAlloc[b.Addr]; ok {
				continue
			}
			req := b.RequestedSize
			if !b.HasRequestedSize {
				req = b.Size
				if b.NumHistory > 0 {
					req = s.History[b.FirstHistory].RealSize
				}
			}
			stack := b.Stack
			if stack == snapshot.NoStack && b.NumHistory > 0 {
				stack = s.History[b.FirstHistory].Stack
			}
			tl.Elems = append(tl.Elems, element{Addr: b.Addr, Size: req, Event: -1, Version: b.Version,
				Stream: sg.Stream, Stack: stack, Kind: kindGhost, Pool: sg.PoolID, HasPool: sg.HasPoolID})
			initial = append(initial, int32(len(tl.Elems)-1))
		}
	}
	// memory_viz resolves segment_pool_id for every element by address.
	for i := range tl.Elems {
		if !tl.Elems[i].HasPool {
			tl.Elems[i].Pool, tl.Elems[i].HasPool = findPool(tl.Elems[i].Addr)
		}
	}
	for i, j := 0, len(initial)-1; i < j; i, j = i+1, j-1 {
		initial[i], initial[j] = initial[j], initial[i]
	}
	if len(actions) == 0 && len(initial) > 0 {
		actions = append(actions, action{initial[len(initial)-1], 0})
		initial = initial[:len(initial)-1]
	}

	// Detail: the largest `detail` elements are drawn (stable by size desc,
	// as JS's sort is stable).
	order := make([]int32, len(tl.Elems))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(tl.Elems[b].Size, tl.Elems[a].Size); c != 0 {
			return c
		}
		return cmp.Compare(a, b) // ties keep element order, like JS's stable sort
	})
	draw := make([]bool, len(tl.Elems))
	for i, id := range order {
		if i >= detail {
			break
		}
		draw[id] = true
	}

	// Steps: one per action, plus three per restack; start with room for
	// the common case.
	nSteps := len(actions) + len(actions)/2 + 8
	tl.MaxAtTime = make([]float64, 0, nSteps)
	tl.StepEvent = make([]float64, 0, nSteps+1)
	tl.SumOff = make([]float64, 0, nSteps+1)
	b := &stacker{tl: tl, draw: draw, privatePools: privatePools}
	b.pools = map[poolKey]*poolState{}
	b.inSummary = make([]bool, len(tl.Elems))
	b.liveIdx = make([]int32, len(tl.Elems))
	for i := range b.liveIdx {
		b.liveIdx[i] = -1
	}
	b.poolActive = make([]bool, len(tl.Elems))
	curEvent := float64(0)
	b.curEvent = &curEvent

	for _, id := range initial {
		b.initial(id)
	}
	if privatePools {
		b.initPoolReserved(s, segs, func() map[poolKey]float64 {
			net := map[poolKey]float64{}
			for _, pe := range poolSegEvents {
				net[pe.key] += pe.delta
			}
			return net
		}())
	}
	pe := 0
	for ai, ac := range actions {
		curEvent = float64(ac.event)
		for pe < len(poolSegEvents) && poolSegEvents[pe].pos <= ai {
			b.poolSegment(poolSegEvents[pe].key, poolSegEvents[pe].delta)
			pe++
		}
		b.action(ac.elem)
		if t := b.totalMem + b.summarized; t > tl.MaxSize {
			tl.MaxSize = t
		}
	}
	for ; pe < len(poolSegEvents); pe++ {
		b.poolSegment(poolSegEvents[pe].key, poolSegEvents[pe].delta)
		if t := b.totalMem + b.summarized; t > tl.MaxSize {
			tl.MaxSize = t
		}
	}
	b.finish()

	// Closing x positions: one past the last step.
	// (At least 1, so that a trace-less view still spans x = 0..1.)
	last := float64(max(len(viz), 1))
	tl.StepEvent = append(tl.StepEvent, last)
	tl.HasTime = len(events) > 0
	for _, raw := range viz {
		if events[raw].Flags&snapshot.FlagHasTime == 0 {
			tl.HasTime = false
			break
		}
	}
	tl.events, tl.viz = events, viz
	return tl
}

// stepTime returns time_us for each step, computed on first use (only the
// wall-clock axis needs it).
func (tl *timeline) stepTime() []float64 {
	tl.timeOnce.Do(func() {
		if !tl.HasTime {
			return
		}
		st := make([]float64, len(tl.StepEvent))
		for i, x := range tl.StepEvent {
			vi := min(int(x), len(tl.viz)-1)
			st[i] = float64(tl.events[tl.viz[vi]].TimeUS)
		}
		tl.StepTime = st
	})
	return tl.StepTime
}

func deviceSegments(s *snapshot.Snapshot, device int) []int {
	var segs []int
	for i := range s.Segments {
		if int(s.Segments[i].Device) == device {
			segs = append(segs, i)
		}
	}
	sort.SliceStable(segs, func(a, b int) bool { return s.Segments[segs[a]].Address < s.Segments[segs[b]].Address })
	return segs
}

func isPrivatePool(p [2]int64) bool { return p != [2]int64{} }

type poolKey struct {
	ID     [2]int64
	Stream snapshot.StreamID
}

type poolBlock struct {
	elem   int32
	size   float64
	inner  float64
	series int32
}

type poolState struct {
	max, active, reserved     float64
	drawnActive, sumActive    float64
	envelope                  int32 // series index, -1 when none yet
	summary                   int32 // series index of the summarised stripe, -1
	blocks                    []poolBlock
	envelopeIdx               int32
	summaryOffs, summarySizes []float64
}

// stacker replays actions into stacked series (process_alloc_data phase 3).
type stacker struct {
	tl           *timeline
	draw         []bool
	privatePools bool
	curEvent     *float64

	totalMem, summarized float64
	timestep             int32
	// live stack, bottom to top: series indices; elem -1-… marks envelopes.
	stack      []int32 // series index
	stackElem  []int32 // element id, or -(pool number+1) for envelopes
	liveIdx    []int32
	inSummary  []bool
	poolActive []bool
	pools      map[poolKey]*poolState
	poolOrder  []poolKey
	// open holds the points of live series (moved to Pts at close),
	// indexed by series.
	open [][]point
}

func (b *stacker) newSeries(elem int32, color int32, size float64, opaque uint8) int32 {
	b.tl.Series = append(b.tl.Series, series{Elem: elem, Color: color, Size: size, Opaque: opaque})
	b.open = append(b.open, make([]point, 0, 4))
	return int32(len(b.tl.Series) - 1)
}

func (b *stacker) push(si int32, t int32, off float64) {
	b.open[si] = append(b.open[si], point{t, off})
}

// pushRamp records the edge moving from its last offset to off over steps
// t..t+3.
func (b *stacker) pushRamp(si int32, t int32, off float64) {
	b.open[si] = append(b.open[si], point{-(t + 3), off})
}

func (b *stacker) lastOff(si int32) float64 {
	p := b.open[si]
	return p[len(p)-1].Off
}

func (b *stacker) advance(n int) {
	b.tl.SumOff = append(b.tl.SumOff, b.totalMem)
	for i := 0; i < n; i++ {
		b.tl.MaxAtTime = append(b.tl.MaxAtTime, b.totalMem+b.summarized)
		b.tl.StepEvent = append(b.tl.StepEvent, *b.curEvent+float64(i)/float64(n))
	}
	b.timestep += int32(n)
	// The summarised band is stored per advance; pad to per-step arrays.
	for i := 1; i < n; i++ {
		b.tl.SumOff = append(b.tl.SumOff, b.totalMem)
	}
}

func (b *stacker) poolKeyOf(id int32) (poolKey, bool) {
	if !b.privatePools {
		return poolKey{}, false
	}
	e := &b.tl.Elems[id]
	if !e.HasPool || !isPrivatePool(e.Pool) {
		return poolKey{}, false
	}
	return poolKey{e.Pool, e.Stream}, true
}

func (b *stacker) addAllocation(id int32) {
	e := &b.tl.Elems[id]
	si := b.newSeries(id, id, float64(e.Size), 0)
	b.push(si, b.timestep, b.totalMem)
	b.stack = append(b.stack, si)
	b.stackElem = append(b.stackElem, id)
	b.liveIdx[id] = si
	b.totalMem += float64(e.Size)
	e.MaxAfter = b.totalMem + b.summarized
}

func (b *stacker) getPool(k poolKey) *poolState {
	p := b.pools[k]
	if p == nil {
		p = &poolState{envelope: -1, summary: -1}
		b.pools[k] = p
		b.poolOrder = append(b.poolOrder, k)
	}
	return p
}

func (b *stacker) ensureEnvelope(p *poolState, k poolKey) {
	if p.envelope >= 0 {
		return
	}
	si := b.newSeries(-1, 9, 0, 2)
	b.tl.Series[si].SizeAt = []float64{}
	b.push(si, b.timestep, b.totalMem)
	b.tl.Series[si].SizeAt = append(b.tl.Series[si].SizeAt, 0)
	p.envelope = si
	b.stack = append(b.stack, si)
	b.stackElem = append(b.stackElem, -1)
}

func (b *stacker) envOff(p *poolState) float64 { return b.lastOff(p.envelope) }

func (b *stacker) setEnvSize(p *poolState, size float64) {
	s := &b.tl.Series[p.envelope]
	s.SizeAt[len(s.SizeAt)-1] = size
}

// shiftNoAnim moves everything above the pool envelope up by delta at the
// current (initial) point, as memory_viz does before the first step.
func (b *stacker) shiftNoAnim(p *poolState, delta float64) {
	for j := len(b.stack) - 1; j >= 0; j-- {
		if b.stack[j] == p.envelope {
			for k := j + 1; k < len(b.stack); k++ {
				pts := b.open[b.stack[k]]
				pts[len(pts)-1].Off += delta
			}
			return
		}
	}
}

func (b *stacker) initial(id int32) {
	if k, ok := b.poolKeyOf(id); ok {
		size := float64(b.tl.Elems[id].Size)
		p := b.getPool(k)
		b.poolActive[id] = true
		b.ensureEnvelope(p, k)
		p.active += size
		if t := max(p.active, p.reserved); t > p.max {
			d := t - p.max
			p.max = t
			b.setEnvSize(p, p.max)
			b.totalMem += d
			b.shiftNoAnim(p, d)
		}
		if b.draw[id] {
			inner := p.drawnActive
			p.drawnActive += size
			si := b.newSeries(id, id, size, 1)
			b.push(si, 0, b.envOff(p)+inner)
			p.blocks = append(p.blocks, poolBlock{id, size, inner, si})
		} else {
			p.sumActive += size
		}
		return
	}
	if b.draw[id] {
		b.addAllocation(id)
	} else {
		b.summarized += float64(b.tl.Elems[id].Size)
		b.inSummary[id] = true
	}
}

func (b *stacker) fixStripes() {
	for _, k := range b.poolOrder {
		p := b.pools[k]
		if p.envelope < 0 {
			continue
		}
		off := b.envOff(p)
		for _, bl := range p.blocks {
			for i := range b.open[bl.series] {
				b.open[bl.series][i].Off = off + bl.inner
			}
		}
	}
}

func (b *stacker) initPoolReserved(s *snapshot.Snapshot, segs []int, net map[poolKey]float64) {
	b.fixStripes()
	for _, k := range b.poolOrder {
		p := b.pools[k]
		if p.envelope >= 0 && p.sumActive > 0 {
			p.summary = b.newSeries(-2, 0, 0, 3)
			b.tl.Series[p.summary].SizeAt = []float64{p.sumActive}
			b.push(p.summary, 0, b.envOff(p)+p.drawnActive)
		}
	}
	reserved := map[poolKey]float64{}
	var order []poolKey
	for _, si := range segs {
		sg := &s.Segments[si]
		if sg.HasPoolID && isPrivatePool(sg.PoolID) {
			k := poolKey{sg.PoolID, sg.Stream}
			if _, ok := reserved[k]; !ok {
				order = append(order, k)
			}
			reserved[k] += float64(sg.TotalSize)
		}
	}
	for _, k := range order {
		p := b.getPool(k)
		p.reserved = reserved[k] - net[k]
		if p.reserved > p.max && p.envelope >= 0 {
			d := p.reserved - p.max
			p.max = p.reserved
			b.setEnvSize(p, p.max)
			b.totalMem += d
			b.shiftNoAnim(p, d)
		}
	}
	b.fixStripes()
}

// shiftAbove animates every live band from stack position idx up by delta.
func (b *stacker) shiftAbove(idx int, delta float64) {
	for j := idx; j < len(b.stack); j++ {
		si := b.stack[j]
		o := b.lastOff(si)
		if sz := b.tl.Series[si].SizeAt; sz != nil {
			b.push(si, b.timestep, o)
			b.push(si, b.timestep+3, o+delta)
			l := sz[len(sz)-1]
			b.tl.Series[si].SizeAt = append(sz, l, l)
		} else {
			b.pushRamp(si, b.timestep, o+delta)
		}
		if b.stackElem[j] == -1 {
			for _, k := range b.poolOrder {
				p := b.pools[k]
				if p.envelope == si {
					b.shiftStripes(p, delta)
				}
			}
		}
	}
}

func (b *stacker) shiftStripes(p *poolState, delta float64) {
	for _, bl := range p.blocks {
		b.pushRamp(bl.series, b.timestep, b.lastOff(bl.series)+delta)
	}
	if p.summary >= 0 {
		o := b.lastOff(p.summary)
		sz := b.tl.Series[p.summary].SizeAt
		l := sz[len(sz)-1]
		b.push(p.summary, b.timestep, o)
		b.push(p.summary, b.timestep+3, o+delta)
		b.tl.Series[p.summary].SizeAt = append(sz, l, l)
	}
}

func (b *stacker) growEnvelope(p *poolState, size float64) {
	if size <= p.max {
		return
	}
	d := size - p.max
	p.max = size
	si := p.envelope
	o := b.lastOff(si)
	sz := b.tl.Series[si].SizeAt
	b.push(si, b.timestep, o)
	b.push(si, b.timestep+3, o)
	b.tl.Series[si].SizeAt = append(sz, sz[len(sz)-1], p.max)
	for j := range b.stack {
		if b.stack[j] == si {
			b.shiftAbove(j+1, d)
			break
		}
	}
	b.totalMem += d
	b.advance(3)
}

func (b *stacker) updatePoolSummary(p *poolState) {
	if p.envelope < 0 {
		return
	}
	base := b.envOff(p) + p.drawnActive
	if p.summary < 0 {
		p.summary = b.newSeries(-2, 0, 0, 3)
		b.tl.Series[p.summary].SizeAt = []float64{p.sumActive}
		b.push(p.summary, b.timestep, base)
		return
	}
	b.push(p.summary, b.timestep, base)
	b.tl.Series[p.summary].SizeAt = append(b.tl.Series[p.summary].SizeAt, p.sumActive)
}

func (b *stacker) poolSegment(k poolKey, delta float64) {
	p := b.getPool(k)
	p.reserved += delta
	if p.reserved > p.max && p.envelope >= 0 {
		b.growEnvelope(p, p.reserved)
	}
}

func (b *stacker) action(id int32) {
	size := float64(b.tl.Elems[id].Size)
	if k, ok := b.poolKeyOf(id); ok {
		p := b.getPool(k)
		if !b.poolActive[id] {
			b.poolActive[id] = true
			b.ensureEnvelope(p, k)
			p.active += size
			if t := max(p.active, p.reserved); t > p.max {
				b.growEnvelope(p, t)
			}
			if b.draw[id] {
				inner := p.drawnActive
				p.drawnActive += size
				si := b.newSeries(id, id, size, 1)
				b.push(si, b.timestep, b.envOff(p)+inner)
				p.blocks = append(p.blocks, poolBlock{id, size, inner, si})
				if p.summary >= 0 {
					b.updatePoolSummary(p)
				}
			} else {
				p.sumActive += size
				b.updatePoolSummary(p)
			}
			b.advance(1)
			b.tl.Elems[id].MaxAfter = b.totalMem + b.summarized
		} else {
			bi := -1
			for i := range p.blocks {
				if p.blocks[i].elem == id {
					bi = i
					break
				}
			}
			if bi >= 0 {
				b.advance(1)
				bl := p.blocks[bi]
				b.push(bl.series, b.timestep, b.lastOff(bl.series))
				b.closeSeries(bl.series)
				p.blocks = append(p.blocks[:bi], p.blocks[bi+1:]...)
				p.active -= size
				p.drawnActive -= size
				if bi < len(p.blocks) || p.summary >= 0 {
					for j := bi; j < len(p.blocks); j++ {
						pb := &p.blocks[j]
						pb.inner -= size
						b.pushRamp(pb.series, b.timestep, b.envOff(p)+pb.inner)
					}
					if p.summary >= 0 {
						b.updatePoolSummary(p)
					}
					b.advance(3)
				}
			} else {
				p.active -= size
				p.sumActive -= size
				b.updatePoolSummary(p)
				b.advance(1)
			}
			b.poolActive[id] = false
		}
		return
	}
	if !b.draw[id] {
		if b.inSummary[id] {
			b.advance(1)
			b.summarized -= size
			b.inSummary[id] = false
		} else {
			b.summarized += size
			b.inSummary[id] = true
			b.advance(1)
		}
		return
	}
	if b.liveIdx[id] < 0 {
		b.addAllocation(id)
		b.advance(1)
		return
	}
	b.advance(1)
	si := b.liveIdx[id]
	b.liveIdx[id] = -2 // a third appearance starts a new band, as in memory_viz
	idx := -1
	for j := len(b.stack) - 1; j >= 0; j-- {
		if b.stack[j] == si {
			idx = j
			break
		}
	}
	b.push(si, b.timestep, b.lastOff(si))
	b.closeSeries(si)
	b.stack = append(b.stack[:idx], b.stack[idx+1:]...)
	b.stackElem = append(b.stackElem[:idx], b.stackElem[idx+1:]...)
	if idx < len(b.stack) {
		b.shiftAbove(idx, -size)
		b.advance(3)
	}
	b.totalMem -= size
	if b.liveIdx[id] == -2 {
		b.liveIdx[id] = -1
	}
}

// closeSeries hands a finished band's points to its series.
func (b *stacker) closeSeries(si int32) {
	pts := b.open[si]
	out := make([]cpoint, len(pts))
	for i, p := range pts {
		out[i] = cpoint{p.T, float32(p.Off)}
	}
	b.tl.Series[si].Pts = out
	b.open[si] = nil
}

func (b *stacker) finish() {
	for _, si := range b.stack {
		b.push(si, b.timestep, b.lastOff(si))
		if sz := b.tl.Series[si].SizeAt; sz != nil {
			b.tl.Series[si].SizeAt = append(sz, sz[len(sz)-1])
		}
		b.closeSeries(si)
	}
	for _, k := range b.poolOrder {
		p := b.pools[k]
		for _, bl := range p.blocks {
			b.push(bl.series, b.timestep, b.lastOff(bl.series))
			b.closeSeries(bl.series)
		}
		if p.summary >= 0 {
			sz := b.tl.Series[p.summary].SizeAt
			b.push(p.summary, b.timestep, b.lastOff(p.summary))
			b.tl.Series[p.summary].SizeAt = append(sz, sz[len(sz)-1])
			b.closeSeries(p.summary)
		}
	}
	// Any band still open (should not happen) is closed where it is.
	for si := range b.open {
		if b.open[si] != nil {
			b.closeSeries(int32(si))
		}
	}
	b.tl.SumOff = append(b.tl.SumOff, b.totalMem)
}

// Peak is the highest total of the timeline (memory_viz's max of
// max_at_time).
func (tl *timeline) Peak() float64 {
	m := 0.0
	for _, v := range tl.MaxAtTime {
		m = max(m, v)
	}
	return m
}
