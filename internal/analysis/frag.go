package analysis

import (
	"cmp"
	"slices"
	"sort"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/snapshot"
)

// Fragmentation describes how the reserved memory of a device is used at
// one moment. Sizes are bytes.
type Fragmentation struct {
	// Headline is rules.Fragmentation(LargestFreeBlock, Free), gpumem's one
	// fragmentation figure.
	Headline float64 `json:"headline"`
	// Reserved is the segments' total (cudaMalloc'd or mapped).
	Reserved uint64 `json:"reserved_bytes"`
	// Allocated is the blocks' total (rounded sizes); Requested what the
	// program asked for.
	Allocated uint64 `json:"allocated_bytes"`
	Requested uint64 `json:"requested_bytes"`
	// ReservedUnallocated = Reserved − Allocated: cached, not in use.
	ReservedUnallocated uint64 `json:"reserved_unallocated_bytes"`
	// Free is every free byte of the cache (ReservedUnallocated less the
	// parts of pending frees); InactiveSplit the free bytes in segments
	// that also hold a block (PyTorch's inactive_split_bytes: free memory
	// that cannot be returned to CUDA).
	Free          uint64 `json:"free_bytes"`
	InactiveSplit uint64 `json:"inactive_split_bytes"`
	// RoundingWaste = Allocated − Requested.
	RoundingWaste uint64 `json:"rounding_waste_bytes"`
	// LargestFreeBlock is the largest free range inside one segment.
	LargestFreeBlock uint64 `json:"largest_free_block_bytes"`
	// LargestFreeShare = LargestFreeBlock / Free (1 when nothing is free).
	LargestFreeShare float64 `json:"largest_free_share"`
}

// freeRange is a free range of a segment.
type freeRange struct {
	size   uint64
	stream snapshot.StreamID
	pool   [2]int64
	small  bool // the segment is a small-pool (2 MiB) segment
}

// fragmentationOf measures a replayed allocator state; it also returns
// the free ranges, for per-stream questions.
func fragmentationOf(st *replay.State) (Fragmentation, []freeRange) {
	var f Fragmentation
	var free []freeRange
	f.Reserved, f.Allocated, f.Requested = st.Reserved, st.RealAllocated, st.Allocated
	if f.Reserved > f.Allocated {
		f.ReservedUnallocated = f.Reserved - f.Allocated
	}
	if f.Allocated > f.Requested {
		f.RoundingWaste = f.Allocated - f.Requested
	}
	for i := range st.Segments {
		sg := &st.Segments[i]
		blocks := st.Blocks[sg.FirstBlock : sg.FirstBlock+sg.NumBlocks]
		r := freeRange{stream: sg.Stream, pool: sg.PoolID, small: sg.Size == rules.SmallBuffer}
		add := func(n uint64) {
			if n == 0 {
				return
			}
			f.Free += n
			if len(blocks) > 0 {
				f.InactiveSplit += n
			}
			f.LargestFreeBlock = max(f.LargestFreeBlock, n)
			r.size = n
			free = append(free, r)
		}
		at := sg.Addr
		for _, b := range blocks {
			if b.Addr > at {
				add(b.Addr - at)
			}
			at = max(at, b.Addr+b.Size)
		}
		if end := sg.Addr + sg.Size; end > at {
			add(end - at)
		}
	}
	f.Headline = rules.Fragmentation(f.LargestFreeBlock, f.Free)
	f.LargestFreeShare = 1
	if f.Free > 0 {
		f.LargestFreeShare = float64(f.LargestFreeBlock) / float64(f.Free)
	}
	return f, free
}

// StateAt rebuilds the allocator's segments and blocks at moment m from
// the two timelines' lifetimes: the segments live then (their dump
// entries or segment_alloc events) and the allocations live then, each a
// block of round_size(requested) bytes at its address (the dump's own size
// for blocks made before the trace), as memory_viz's state history does
// for blocks it re-creates; blocks the dump holds as pending free that the
// trace never allocated are added. O(live log live); no replay of the
// trace. It equals replay.History's state (tested on the real corpus).
func (d *Device) StateAt(m Moment) *replay.State {
	return d.stateOf(m.Event, liveItems(d.Segments, d.Segments.ActionAtEvent(m.Event)), liveItems(d.Active, m.Action))
}

// liveItems lists the elements of lt live after action k, counted first:
// at a 1 GB snapshot's peak they are a million, and the list grown by
// appends held up to twice that.
func liveItems(lt *replay.Lifetimes, k int) []int32 {
	n := 0
	lt.Live(k, func(int) { n++ })
	out := make([]int32, 0, n)
	lt.Live(k, func(i int) { out = append(out, int32(i)) })
	return out
}

// stateOf builds the state after raw event ev from the live segments
// (items of d.Segments) and allocations (items of d.Active).
func (d *Device) stateOf(event int, segs, allocs []int32) *replay.State {
	s, ev := d.S, d.Events()
	// Sized once: at a 1 GB snapshot's peak these are hundreds of
	// thousands of entries, and growing them was 4% of gpumem peak.
	st := &replay.State{Event: event, Segments: make([]replay.SegmentState, 0, len(segs)), Blocks: make([]replay.StateBlock, 0, len(allocs))}
	for k, i := range segs {
		d.pauseAt(k)
		it := d.Segments.Item(int(i))
		var sg replay.SegmentState
		switch {
		case it.Dump() >= 0:
			ds := &s.Segments[it.Dump()]
			sg = replay.SegmentState{Addr: ds.Address, Size: ds.TotalSize, Stream: ds.Stream, PoolID: ds.PoolID, Stack: ds.Stack}
		case it.Alloc >= 0:
			e := &ev[it.Alloc]
			sg = replay.SegmentState{Addr: e.Addr, Size: e.Size, Stream: e.Stream, Stack: e.Stack}
		default:
			e := &ev[it.Free]
			sg = replay.SegmentState{Addr: e.Addr, Size: e.Size, Stream: e.Stream, Stack: e.Stack}
		}
		if si := d.segmentAt(sg.Addr); si >= 0 && s.Segments[si].Address == sg.Addr {
			sg.PoolID = s.Segments[si].PoolID
		}
		st.Segments = append(st.Segments, sg)
		st.Reserved += sg.Size
	}
	round := replay.Rounder(s)
	last := int32(len(d.Active.Events))
	for k, i := range allocs {
		d.pauseAt(k)
		it := d.Active.Item(int(i))
		stack, _, addr := d.itemSource(int(i))
		b := replay.StateBlock{Addr: addr, Requested: it.Size, Size: round(it.Size), Stack: stack, Segment: -1}
		if it.Died == last {
			// Live at the dump: the dump has its real size (a remainder
			// too small to split off stays in the block).
			if sz, ok := d.dumpBlockSize(addr); ok {
				b.Size = sz
			}
		}
		st.Blocks = append(st.Blocks, b)
	}
	// Blocks the dump holds as active_pending_free are not on the
	// timeline (memory_viz draws allocated blocks only) but occupy their
	// memory until the stream events complete.
	var pending []replay.StateBlock
	for _, si := range d.segs {
		blocks := s.SegmentBlocks(int(si))
		for k := range blocks {
			if b := &blocks[k]; b.State == snapshot.BlockActivePendingFree {
				pending = append(pending, replay.StateBlock{Addr: b.Addr, Size: b.Size, Requested: s.Requested(b), PendingFree: true, Stack: b.Stack, Segment: -1})
			}
		}
	}
	if len(pending) > 0 {
		live := make(map[uint64]bool, len(st.Blocks))
		for _, b := range st.Blocks {
			live[b.Addr] = true
		}
		for _, b := range pending {
			if !live[b.Addr] {
				st.Blocks = append(st.Blocks, b)
				st.PendingFree++
			}
		}
	}
	for _, b := range st.Blocks {
		st.Allocated += b.Requested
		st.RealAllocated += b.Size
		if b.Size > b.Requested {
			st.RoundingWaste += b.Size - b.Requested
		}
	}
	d.pauseAt(0)
	// Addresses are unique in each list, so any sort gives one order.
	slices.SortFunc(st.Segments, func(a, b replay.SegmentState) int { return cmp.Compare(a.Addr, b.Addr) })
	d.pauseAt(0)
	slices.SortFunc(st.Blocks, func(a, b replay.StateBlock) int { return cmp.Compare(a.Addr, b.Addr) })
	// Place the blocks in their segments (both are sorted by address).
	k := 0
	for si := range st.Segments {
		sg := &st.Segments[si]
		for k < len(st.Blocks) && st.Blocks[k].Addr < sg.Addr {
			k++
		}
		sg.FirstBlock = int32(k)
		for k < len(st.Blocks) && st.Blocks[k].Addr < sg.Addr+sg.Size {
			st.Blocks[k].Segment = int32(si)
			sg.NumBlocks++
			k++
		}
	}
	return st
}

// dumpBlockSize is the size of the dump's active block at addr.
func (d *Device) dumpBlockSize(addr uint64) (uint64, bool) {
	si := d.segmentAt(addr)
	if si < 0 {
		return 0, false
	}
	blocks := d.S.SegmentBlocks(int(si))
	k := sort.Search(len(blocks), func(k int) bool { return blocks[k].Addr >= addr })
	if k < len(blocks) && blocks[k].Addr == addr && blocks[k].State != snapshot.BlockInactive {
		return blocks[k].Size, true
	}
	return 0, false
}

// FragmentationCurve measures the cache after each of actions (Active
// Memory Timeline action indices, ascending; -1 is before the first) in
// one sweep over the trace: O(n) plus O(live log live) per point.
func (d *Device) FragmentationCurve(actions []int) []Fragmentation {
	n := len(d.Active.Events)
	// The item each action pushes or pops, per timeline.
	who := func(lt *replay.Lifetimes) []int32 {
		w := make([]int32, len(lt.Events))
		for i := range lt.Len() {
			if b := lt.Born(i); b >= 0 {
				w[b] = int32(i)
			}
			if e := lt.Died(i); int(e) < len(lt.Events) {
				w[e] = int32(i)
			}
		}
		return w
	}
	type liveSet struct {
		lt   *replay.Lifetimes
		who  []int32
		pos  []int32 // position in ids + 1, 0 when not live
		ids  []int32
		next int // the next action to apply
	}
	newSet := func(lt *replay.Lifetimes) *liveSet {
		ls := &liveSet{lt: lt, who: who(lt), pos: make([]int32, lt.Len())}
		for i := range lt.Len() {
			if lt.Born(i) < 0 {
				ls.ids = append(ls.ids, int32(i))
				ls.pos[i] = int32(len(ls.ids))
			}
		}
		return ls
	}
	// advance applies the actions up to and including k.
	advance := func(ls *liveSet, k int) {
		for ; ls.next <= k && ls.next < len(ls.who); ls.next++ {
			i := ls.who[ls.next]
			if ls.pos[i] == 0 { // born
				ls.ids = append(ls.ids, i)
				ls.pos[i] = int32(len(ls.ids))
				continue
			}
			p := ls.pos[i] - 1 // died: move the last into its place
			last := ls.ids[len(ls.ids)-1]
			ls.ids[p] = last
			ls.pos[last] = p + 1
			ls.ids = ls.ids[:len(ls.ids)-1]
			ls.pos[i] = 0
		}
	}
	allocs, segs := newSet(d.Active), newSet(d.Segments)
	out := make([]Fragmentation, len(actions))
	for j, k := range actions {
		k = min(max(k, -1), n-1)
		event := d.eventOfAction(d.Active, k)
		advance(allocs, k)
		advance(segs, d.Segments.ActionAtEvent(event))
		out[j], _ = fragmentationOf(d.stateOf(event, segs.ids, allocs.ids))
	}
	return out
}

// FragmentationAt measures the cache at moment m.
func (d *Device) FragmentationAt(m Moment) Fragmentation {
	f, _ := fragmentationOf(d.StateAt(m))
	return f
}

// DumpFragmentation measures device d's cache at dump time from the
// snapshot's segments and blocks (no replay): free ranges are its inactive
// blocks.
func DumpFragmentation(s *snapshot.Snapshot, d int) Fragmentation {
	var f Fragmentation
	for i := range s.Segments {
		seg := &s.Segments[i]
		if int(seg.Device) != d {
			continue
		}
		f.Reserved += seg.TotalSize
		blocks := s.SegmentBlocks(i)
		split := len(blocks) > 1 && !seg.IsExpandable
		for k := range blocks {
			b := &blocks[k]
			if b.State == snapshot.BlockInactive {
				f.Free += b.Size
				f.LargestFreeBlock = max(f.LargestFreeBlock, b.Size)
				if split {
					f.InactiveSplit += b.Size
				}
				continue
			}
			f.Allocated += b.Size
			f.Requested += s.Requested(b)
		}
	}
	if f.Reserved > f.Allocated {
		f.ReservedUnallocated = f.Reserved - f.Allocated
	}
	if f.Allocated > f.Requested {
		f.RoundingWaste = f.Allocated - f.Requested
	}
	f.Headline = rules.Fragmentation(f.LargestFreeBlock, f.Free)
	f.LargestFreeShare = 1
	if f.Free > 0 {
		f.LargestFreeShare = float64(f.LargestFreeBlock) / float64(f.Free)
	}
	return f
}
