package analysis

import (
	"sort"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// FragmentationHeadline is gpumem's one fragmentation figure: the share of
// the cache's free bytes that lie outside its largest free block,
// 1 − largest free block / all free cached bytes (0 when nothing is free).
// 0 means all free cached memory is one block, so any request that fits
// the free total fits one block; near 1 means it is scattered in small
// pieces that a large request cannot use.
func FragmentationHeadline(largestFree, free uint64) float64 {
	if free == 0 {
		return 0
	}
	return 1 - float64(largestFree)/float64(free)
}

// Fragmentation describes how the reserved memory of a device is used at
// one moment. Sizes are bytes.
type Fragmentation struct {
	// Headline is FragmentationHeadline(LargestFreeBlock, Free).
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
		r := freeRange{stream: sg.Stream, pool: sg.PoolID, small: sg.Size == smallSegment}
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
	f.Headline = FragmentationHeadline(f.LargestFreeBlock, f.Free)
	f.LargestFreeShare = 1
	if f.Free > 0 {
		f.LargestFreeShare = float64(f.LargestFreeBlock) / float64(f.Free)
	}
	return f, free
}

// smallSegment is the size of a small-pool segment (kSmallBuffer).
const smallSegment = 2 << 20

// history returns the device's allocator state history, built once.
func (d *Device) history() *replay.History {
	if d.hist == nil {
		d.hist = replay.NewHistory(d.S, d.Index)
	}
	return d.hist
}

// StateAt returns the allocator state at moment m (after raw event
// m.Event).
func (d *Device) StateAt(m Moment) *replay.State {
	h := d.history()
	// The last memory_viz event at or before the raw event.
	idx := sort.Search(h.Len(), func(p int) bool { return h.Event(p).Raw > m.Event }) - 1
	return h.StateAt(idx)
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
			f.Requested += b.RequestedSize
		}
	}
	if f.Reserved > f.Allocated {
		f.ReservedUnallocated = f.Reserved - f.Allocated
	}
	if f.Allocated > f.Requested {
		f.RoundingWaste = f.Allocated - f.Requested
	}
	f.Headline = FragmentationHeadline(f.LargestFreeBlock, f.Free)
	f.LargestFreeShare = 1
	if f.Free > 0 {
		f.LargestFreeShare = float64(f.LargestFreeBlock) / float64(f.Free)
	}
	return f
}
