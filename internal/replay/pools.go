package replay

import (
	"fmt"

	"github.com/gpumem/gpumem/snapshot"
)

// series is one polygon of a materialized timeline, as memory_viz stores
// it: points (ts[i], offs[i]) and, for pool envelopes, a size per point.
type series struct {
	ts   []int32
	offs []int64
	size []int64 // nil: constant size
}

func (s *series) push(t int32, off int64) {
	s.ts = append(s.ts, t)
	s.offs = append(s.offs, off)
	if s.size != nil {
		s.size = append(s.size, s.size[len(s.size)-1])
	}
}

func (s *series) lastOff() int64 { return s.offs[len(s.offs)-1] }

// poolState is one private pool of memory_viz's pool-envelope replay.
type poolState struct {
	key                           string
	max, active, reserved         int64
	drawnActive, summarizedActive int64
	env                           int32 // envelope item id, -1 before it exists
	hasSummary                    bool
	stack                         []poolBlock
}

type poolBlock struct {
	elem  int32
	size  int64
	inner int64
}

// poolReplay is process_alloc_data with include_private_inactive: the
// "Allocated Memory (incl. Private Pools)" view. It follows memory_viz step
// by step and materializes every polygon (O(points) memory, O(n·depth)
// time in the worst case), which is why it is only used when the device has
// private pools.
type poolReplay struct {
	l          *elementList
	elemPool   []int32 // pool index per element, -1 for the default pool
	pools      []*poolState
	ser        []series // elements, then one envelope per pool
	totalAfter []uint64
	runStart   []int32 // max_at_time as runs (when recording)
	runVal     []uint64
	timesteps  int
	peak       uint64
}

// segmentPoolKey is memory_viz's format_pool_key.
func segmentPoolKey(pid [2]int64, stream snapshot.StreamID) string {
	return fmt.Sprintf("%d,%d,s%d", pid[0], pid[1], stream)
}

// hasPrivatePools reports whether any dump segment of the device belongs
// to a private pool.
func hasPrivatePools(s *snapshot.Snapshot, device int) bool {
	for i := range s.Segments {
		if int(s.Segments[i].Device) == device && s.Segments[i].InPrivatePool() {
			return true
		}
	}
	return false
}

func runPoolReplay(s *snapshot.Snapshot, device int, maxEntries int, record bool) *poolReplay {
	l := buildElements(s, device, false, nil, nil)
	n := len(l.elems)
	segs := l.segs
	drawn := drawSet(l.elems, maxEntries)
	r := &poolReplay{l: l, elemPool: make([]int32, n), totalAfter: make([]uint64, n)}
	poolIdx := map[string]int32{}
	getPool := func(key string) *poolState {
		if i, ok := poolIdx[key]; ok {
			return r.pools[i]
		}
		poolIdx[key] = int32(len(r.pools))
		p := &poolState{key: key, env: -1}
		r.pools = append(r.pools, p)
		return p
	}
	var events []snapshot.Event
	if device >= 0 && device < len(s.Traces) {
		events = s.Traces[device].Events
	}

	// Pool of each element: the ghost's own segment, else the dump segment
	// containing its address.
	for id := range l.elems {
		e := &l.elems[id]
		seg := int32(-1)
		var stream snapshot.StreamID
		var addr uint64
		switch e.kind() {
		case srcAlloc, srcFree:
			ev := &events[e.ref]
			addr, stream = ev.Addr, ev.Stream
			seg = findSegment(s, segs, addr)
		case srcGhostBlock:
			addr = s.Blocks[e.ref].Addr
			seg = findSegment(s, segs, addr)
			if seg >= 0 {
				stream = s.Segments[seg].Stream
			}
		}
		r.elemPool[id] = -1
		if seg >= 0 && s.Segments[seg].InPrivatePool() {
			getPool(segmentPoolKey(s.Segments[seg].PoolID, stream))
			r.elemPool[id] = poolIdx[segmentPoolKey(s.Segments[seg].PoolID, stream)]
		}
	}
	// Segment events of private pools, by position in the actions.
	type segEvent struct {
		position int
		delta    int64
		key      string
	}
	var segEvents []segEvent
	nActions := 0
	for _, raw := range vizEvents(s, device) {
		e := &events[raw]
		switch e.VizAction() {
		case snapshot.ActionAlloc, snapshot.ActionFree, snapshot.ActionFreeCompleted:
			nActions++
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap, snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			seg := findSegment(s, segs, e.Addr)
			if seg >= 0 && s.Segments[seg].InPrivatePool() {
				d := int64(e.Size)
				if a := e.Action; a == snapshot.ActionSegmentFree || a == snapshot.ActionSegmentUnmap {
					d = -d
				}
				segEvents = append(segEvents, segEvent{nActions, d, segmentPoolKey(s.Segments[seg].PoolID, e.Stream)})
			}
		}
	}
	// Element series are kept only when recording; envelopes always (their
	// sizes drive the totals).
	r.ser = make([]series, n)
	var current []int32 // stack of items: elements < n, envelopes >= n
	var total, band int64
	timestep := int32(0)
	summarized := make([]uint8, n)
	poolActive := make([]bool, n)
	advance := func(k int32) {
		v := total + band
		if v > int64(r.peak) {
			r.peak = uint64(v)
		}
		if record {
			r.runStart = append(r.runStart, timestep)
			r.runVal = append(r.runVal, uint64(max(v, 0)))
		}
		timestep += k
	}
	envSeries := func(p *poolState) *series { return &r.ser[p.env] }
	newEnvelope := func(p *poolState) {
		r.ser = append(r.ser, series{ts: []int32{timestep}, offs: []int64{total}, size: []int64{0}})
		p.env = int32(len(r.ser) - 1)
		current = append(current, p.env)
	}
	addAllocation := func(id int32) {
		current = append(current, id)
		if record {
			r.ser[id] = series{ts: []int32{timestep}, offs: []int64{total}}
		}
		total += int64(l.elems[id].size)
		r.totalAfter[id] = uint64(total + band)
	}
	var shiftAbove func(idx int, delta int64)
	shiftStripes := func(p *poolState, delta int64) {
		if !record {
			return
		}
		for _, b := range p.stack {
			sr := &r.ser[b.elem]
			last := sr.lastOff()
			sr.push(timestep, last)
			sr.push(timestep+3, last+delta)
		}
	}
	envPool := map[int32]*poolState{}
	shiftAbove = func(idx int, delta int64) {
		for j := idx; j < len(current); j++ {
			item := current[j]
			if record || int(item) >= n {
				sr := &r.ser[item]
				last := sr.lastOff()
				if record {
					sr.push(timestep, last)
					sr.push(timestep+3, last+delta)
				} else {
					sr.offs[len(sr.offs)-1] = last + delta
				}
			}
			if p, ok := envPool[item]; ok {
				shiftStripes(p, delta)
			}
		}
	}
	indexOf := func(item int32) int {
		for j := len(current) - 1; j >= 0; j-- {
			if current[j] == item {
				return j
			}
		}
		return -1
	}
	shiftAboveNoAnim := func(p *poolState, delta int64) {
		pidx := indexOf(p.env)
		if pidx < 0 {
			return
		}
		for _, item := range current[pidx+1:] {
			if record || int(item) >= n {
				sr := &r.ser[item]
				sr.offs[len(sr.offs)-1] += delta
			}
		}
	}
	growEnvelope := func(p *poolState, newSize int64) {
		if newSize <= p.max {
			return
		}
		delta := newSize - p.max
		p.max = newSize
		env := envSeries(p)
		if record {
			last := env.lastOff()
			env.push(timestep, last)
			env.ts = append(env.ts, timestep+3)
			env.offs = append(env.offs, last)
			env.size = append(env.size, p.max)
		} else {
			env.size[len(env.size)-1] = p.max
		}
		if pidx := indexOf(p.env); pidx >= 0 {
			shiftAbove(pidx+1, delta)
		}
		total += delta
		advance(3)
	}
	stripeStart := func(p *poolState, id int32, inner int64) {
		if record {
			r.ser[id] = series{ts: []int32{timestep}, offs: []int64{envSeries(p).lastOff() + inner}}
		}
	}
	fixStripes := func() {
		if !record {
			return
		}
		for _, p := range r.pools {
			if p.env < 0 {
				continue
			}
			envOff := envSeries(p).lastOff()
			for _, b := range p.stack {
				sr := &r.ser[b.elem]
				for i := range sr.offs {
					sr.offs[i] = envOff + b.inner
				}
			}
		}
	}

	for _, id := range l.initial {
		size := int64(l.elems[id].size)
		if pi := r.elemPool[id]; pi >= 0 {
			p := r.pools[pi]
			poolActive[id] = true
			if p.env < 0 {
				newEnvelope(p)
				envPool[p.env] = p
			}
			p.active += size
			if target := max(p.active, p.reserved); target > p.max {
				delta := target - p.max
				p.max = target
				env := envSeries(p)
				env.size[len(env.size)-1] = p.max
				total += delta
				shiftAboveNoAnim(p, delta)
			}
			if drawn[id] {
				inner := p.drawnActive
				p.drawnActive += size
				stripeStart(p, id, inner)
				p.stack = append(p.stack, poolBlock{id, size, inner})
			} else {
				p.summarizedActive += size
			}
			continue
		}
		if drawn[id] {
			addAllocation(id)
		} else {
			band += size
			summarized[id] = 1
		}
	}
	fixStripes()
	for _, p := range r.pools {
		if p.env >= 0 && p.summarizedActive > 0 {
			p.hasSummary = true
		}
	}
	// Initial reserved bytes per pool: the dump's minus the trace's net.
	snapReserved := map[string]int64{}
	var order []string
	for _, si := range segs {
		seg := &s.Segments[si]
		if seg.InPrivatePool() {
			k := segmentPoolKey(seg.PoolID, seg.Stream)
			if _, ok := snapReserved[k]; !ok {
				order = append(order, k)
			}
			snapReserved[k] += int64(seg.TotalSize)
		}
	}
	net := map[string]int64{}
	for _, se := range segEvents {
		net[se.key] += se.delta
	}
	for _, k := range order {
		p := getPool(k)
		p.reserved = snapReserved[k] - net[k]
		if p.reserved > p.max && p.env >= 0 {
			delta := p.reserved - p.max
			p.max = p.reserved
			env := envSeries(p)
			env.size[len(env.size)-1] = p.max
			total += delta
			shiftAboveNoAnim(p, delta)
		}
	}
	fixStripes()

	segIdx := 0
	applySegEvent := func() {
		se := segEvents[segIdx]
		p := getPool(se.key)
		p.reserved += se.delta
		if p.reserved > p.max && p.env >= 0 {
			growEnvelope(p, p.reserved)
		}
		segIdx++
	}
	for ai, id := range l.actions {
		for segIdx < len(segEvents) && segEvents[segIdx].position <= ai {
			applySegEvent()
		}
		size := int64(l.elems[id].size)
		if pi := r.elemPool[id]; pi >= 0 {
			p := r.pools[pi]
			if !poolActive[id] {
				poolActive[id] = true
				if p.env < 0 {
					newEnvelope(p)
					envPool[p.env] = p
				}
				p.active += size
				if target := max(p.active, p.reserved); target > p.max {
					growEnvelope(p, target)
				}
				if drawn[id] {
					inner := p.drawnActive
					p.drawnActive += size
					stripeStart(p, id, inner)
					p.stack = append(p.stack, poolBlock{id, size, inner})
				} else {
					p.summarizedActive += size
					p.hasSummary = true
				}
				advance(1)
				r.totalAfter[id] = uint64(total + band)
			} else {
				bi := -1
				for k := range p.stack {
					if p.stack[k].elem == id {
						bi = k
						break
					}
				}
				if bi >= 0 {
					advance(1)
					if record {
						sr := &r.ser[id]
						sr.push(timestep, sr.lastOff())
					}
					p.stack = append(p.stack[:bi], p.stack[bi+1:]...)
					p.active -= size
					p.drawnActive -= size
					if bi < len(p.stack) || p.hasSummary {
						envOff := envSeries(p).lastOff()
						for k := bi; k < len(p.stack); k++ {
							b := &p.stack[k]
							b.inner -= size
							if record {
								sr := &r.ser[b.elem]
								sr.push(timestep, sr.lastOff())
								sr.push(timestep+3, envOff+b.inner)
							}
						}
						advance(3)
					}
				} else {
					p.active -= size
					p.summarizedActive -= size
					advance(1)
				}
				poolActive[id] = false
			}
			continue
		}
		if !drawn[id] {
			if summarized[id] != 0 {
				advance(1)
				band -= size
				summarized[id] = 2
			} else {
				band += size
				summarized[id] = 1
				advance(1)
			}
			continue
		}
		idx := indexOf(id)
		if idx < 0 {
			addAllocation(id)
			advance(1)
			continue
		}
		advance(1)
		if record {
			sr := &r.ser[id]
			sr.push(timestep, sr.lastOff())
		}
		current = append(current[:idx], current[idx+1:]...)
		if idx < len(current) {
			shiftAbove(idx, -size)
			advance(3)
		}
		total -= size
	}
	for segIdx < len(segEvents) {
		applySegEvent()
	}
	if record {
		for _, item := range current {
			sr := &r.ser[item]
			sr.push(timestep, sr.lastOff())
		}
		for _, p := range r.pools {
			for _, b := range p.stack {
				sr := &r.ser[b.elem]
				sr.push(timestep, sr.lastOff())
			}
		}
	}
	r.timesteps = int(timestep)
	return r
}

// poolStats computes Stats for KindActiveWithPools.
func poolStats(s *snapshot.Snapshot, device int, maxEntries int) TimelineCounts {
	if !hasPrivatePools(s, device) {
		return computeStats(s, device, KindActive, maxEntries)
	}
	r := runPoolReplay(s, device, maxEntries, false)
	return TimelineCounts{PeakBytes: r.peak, Elements: len(r.l.elems), Timesteps: r.timesteps}
}
