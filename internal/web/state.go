package web

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/gpumem/gpumem/snapshot"
)

// stSeg and stBlock are the allocator state memory_viz's simulate_memory
// keeps: segments and their active blocks.
type stSeg struct {
	Addr, Size uint64
	Stream     snapshot.StreamID
	Pool       [2]int64
	HasPool    bool
	Version    int32
}

type stBlock struct {
	Addr, Size, Req uint64
	Pending         bool
	Version         int32
	Stack           snapshot.StackID
}

type allocState struct {
	Segs   []stSeg // sorted by address
	Blocks map[uint64]stBlock
}

func (st *allocState) clone() *allocState {
	return &allocState{Segs: slices.Clone(st.Segs), Blocks: maps.Clone(st.Blocks)}
}

// stateHistory answers "what did the allocator hold after event i" from
// checkpoints taken while undoing the trace from the snapshot backwards.
type stateHistory struct {
	d     *deviceData
	every int
	// cps[k] holds the state with events [pos[k], n) undone.
	cps []*allocState
	pos []int
}

func (d *deviceData) stateHist() *stateHistory {
	d.stateOnce.Do(func() { d.history = newStateHistory(d) })
	return d.history
}

func newStateHistory(d *deviceData) *stateHistory {
	s := d.snap
	st := &allocState{Blocks: map[uint64]stBlock{}}
	for _, si := range deviceSegments(s, d.device) {
		sg := &s.Segments[si]
		st.Segs = append(st.Segs, stSeg{sg.Address, sg.TotalSize, sg.Stream, sg.PoolID, sg.HasPoolID, sg.Version})
		for _, b := range s.SegmentBlocks(si) {
			if b.State == snapshot.BlockInactive {
				continue
			}
			req := b.RequestedSize
			if !b.HasRequestedSize {
				req = b.Size
			}
			st.Blocks[b.Addr] = stBlock{b.Addr, b.Size, req, b.State == snapshot.BlockActivePendingFree, b.Version, b.Stack}
		}
	}
	n := len(d.viz)
	h := &stateHistory{d: d, every: max(256, n/200)}
	h.cps = append(h.cps, st.clone())
	h.pos = append(h.pos, n)
	for i := n - 1; i >= 0; i-- {
		h.undo(st, i)
		if i%h.every == 0 {
			h.cps = append(h.cps, st.clone())
			h.pos = append(h.pos, i)
		}
	}
	return h
}

// undo reverts viz event i on st.
func (h *stateHistory) undo(st *allocState, i int) {
	e := &h.d.events[h.d.viz[i]]
	switch e.VizAction() {
	case snapshot.ActionFree:
		st.Blocks[e.Addr] = stBlock{e.Addr, e.Size, e.Size, false, e.Version, e.Stack}
	case snapshot.ActionFreeRequested:
		if b, ok := st.Blocks[e.Addr]; ok {
			b.Pending = false
			st.Blocks[e.Addr] = b
		} else {
			st.Blocks[e.Addr] = stBlock{e.Addr, e.Size, e.Size, false, e.Version, e.Stack}
		}
	case snapshot.ActionFreeCompleted:
		st.Blocks[e.Addr] = stBlock{e.Addr, e.Size, e.Size, true, e.Version, e.Stack}
	case snapshot.ActionAlloc:
		delete(st.Blocks, e.Addr)
	case snapshot.ActionSegmentFree:
		st.insertSeg(stSeg{Addr: e.Addr, Size: e.Size, Stream: e.Stream, Version: e.Version})
	case snapshot.ActionSegmentUnmap:
		st.insertSeg(stSeg{Addr: e.Addr, Size: e.Size, Stream: e.Stream, Version: e.Version})
		st.mergeAround(e.Addr)
	case snapshot.ActionSegmentAlloc:
		for k := range st.Segs {
			if st.Segs[k].Addr == e.Addr {
				st.Segs = slices.Delete(st.Segs, k, k+1)
				break
			}
		}
	case snapshot.ActionSegmentMap:
		st.carve(e.Addr, e.Size)
	}
}

func (st *allocState) insertSeg(s stSeg) {
	k := sort.Search(len(st.Segs), func(i int) bool { return st.Segs[i].Addr >= s.Addr })
	st.Segs = slices.Insert(st.Segs, k, s)
}

// mergeAround joins the segment at addr with contiguous same-stream
// neighbours (an unmapped range that is re-inserted).
func (st *allocState) mergeAround(addr uint64) {
	k := sort.Search(len(st.Segs), func(i int) bool { return st.Segs[i].Addr >= addr })
	if k >= len(st.Segs) {
		return
	}
	if k+1 < len(st.Segs) && st.Segs[k].Addr+st.Segs[k].Size == st.Segs[k+1].Addr && st.Segs[k].Stream == st.Segs[k+1].Stream {
		st.Segs[k].Size += st.Segs[k+1].Size
		st.Segs = slices.Delete(st.Segs, k+1, k+2)
	}
	if k > 0 && st.Segs[k-1].Addr+st.Segs[k-1].Size == st.Segs[k].Addr && st.Segs[k-1].Stream == st.Segs[k].Stream {
		st.Segs[k-1].Size += st.Segs[k].Size
		st.Segs = slices.Delete(st.Segs, k, k+1)
	}
}

// carve removes [addr, addr+size) from whichever segment holds it.
func (st *allocState) carve(addr, size uint64) {
	end := addr + size
	for k := 0; k < len(st.Segs); k++ {
		s := st.Segs[k]
		sEnd := s.Addr + s.Size
		if addr >= sEnd || end <= s.Addr {
			continue
		}
		var parts []stSeg
		if s.Addr < addr {
			p := s
			p.Size = addr - s.Addr
			parts = append(parts, p)
		}
		if end < sEnd {
			p := s
			p.Addr, p.Size = end, sEnd-end
			parts = append(parts, p)
		}
		st.Segs = slices.Replace(st.Segs, k, k+1, parts...)
		k += len(parts) - 1
	}
}

// at returns the state right after viz event idx (idx = -1: before the
// first event).
func (h *stateHistory) at(idx int) *allocState {
	want := idx + 1 // events [want, n) undone
	// checkpoints are in decreasing pos; find the smallest pos >= want
	k := sort.Search(len(h.pos), func(i int) bool { return h.pos[i] < want }) - 1
	if k < 0 {
		k = 0
	}
	st := h.cps[k].clone()
	for i := h.pos[k] - 1; i >= want; i-- {
		h.undo(st, i)
	}
	return st
}

// stateJSON is the /api/state answer.
type stateJSON struct {
	Index       int       `json:"index"`
	Event       string    `json:"event"`
	Stack       string    `json:"stack"`
	Allocated   float64   `json:"allocated"` // sum of requested sizes of live blocks
	Reserved    float64   `json:"reserved"`  // sum of segment sizes
	BlockBytes  float64   `json:"blockBytes"`
	Rounding    float64   `json:"rounding"` // size - requested over live blocks
	FreeBytes   float64   `json:"free"`     // reserved - block bytes
	LargestFree float64   `json:"largestFree"`
	Frag        float64   `json:"fragmentation"` // 1 - largest free / free
	Segments    []segJSON `json:"segments"`
	Text        string    `json:"text"` // the totals line as memory_viz prints it
}

type segJSON struct {
	Addr    string   `json:"addr"`
	Size    float64  `json:"size"`
	Stream  int32    `json:"stream"`
	Pool    []int64  `json:"pool,omitempty"`
	Version int32    `json:"version"`
	Blocks  [][5]any `json:"blocks"` // offset, size, requested, pending, version
}

func (h *stateHistory) stateJSON(idx int) *stateJSON {
	st := h.at(idx)
	d := h.d
	out := &stateJSON{Index: idx, Segments: []segJSON{}}
	if idx >= 0 && idx < len(d.viz) {
		e := &d.events[d.viz[idx]]
		out.Event = eventText(d.snap, e)
		out.Stack = ""
		if m := d.snap.String(e.UserMetadata); m != "" {
			out.Stack = "User Metadata:\n  " + m + "\n"
		}
		if e.Action != snapshot.ActionSnapshot {
			out.Stack += stackText(d.snap, e.Stack)
		}
	}
	addrs := slices.Sorted(maps.Keys(st.Blocks))
	bi := 0
	for _, s := range st.Segs {
		sj := segJSON{Addr: fmt.Sprintf("s'%x_%d", s.Addr, s.Version), Size: float64(s.Size), Stream: int32(s.Stream), Version: s.Version, Blocks: [][5]any{}}
		if s.HasPool {
			sj.Pool = []int64{s.Pool[0], s.Pool[1]}
		}
		out.Reserved += float64(s.Size)
		for bi < len(addrs) && addrs[bi] < s.Addr {
			bi++
		}
		cursor := s.Addr
		for ; bi < len(addrs) && addrs[bi] < s.Addr+s.Size; bi++ {
			b := st.Blocks[addrs[bi]]
			sj.Blocks = append(sj.Blocks, [5]any{float64(b.Addr - s.Addr), float64(b.Size), float64(b.Req), b.Pending, b.Version})
			out.Allocated += float64(b.Req)
			out.BlockBytes += float64(b.Size)
			if b.Size > b.Req {
				out.Rounding += float64(b.Size - b.Req)
			}
			if b.Addr > cursor {
				out.LargestFree = max(out.LargestFree, float64(b.Addr-cursor))
			}
			cursor = max(cursor, b.Addr+b.Size)
		}
		if end := s.Addr + s.Size; end > cursor {
			out.LargestFree = max(out.LargestFree, float64(end-cursor))
		}
		out.Segments = append(out.Segments, sj)
	}
	out.FreeBytes = max(0, out.Reserved-out.BlockBytes)
	if out.FreeBytes > 0 {
		out.Frag = 1 - out.LargestFree/out.FreeBytes
	}
	out.Text = fmt.Sprintf("(%s allocated / %s reserved)", formatSize(out.Allocated, true), formatSize(out.Reserved, true))
	return out
}
