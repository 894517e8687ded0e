package report

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// statsPageSize is _memory_viz's PAGE_SIZE: one character of the page map.
const statsPageSize = 20 << 20

// statsMaxPages bounds the page map of one segment (1.25 TiB).
const statsMaxPages = 1 << 16

const statsLegend = `
Legend:
    [a     ] - a segment in the allocator
     ^-- a page 20.0MiB of memory in the segment
    a-z: pages filled with a single block's content
    ' ': page is completely free
    *: page if completely full with multiple blocks
    0-9: page is partially full with tensors of multiple blocks (9 == 90% full)
    (X% internal) - of the free memory, X% is free because we rounded the size of the allocation.
`

// floorDiv is Python's // for int64.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// OnlyDevice is s with only device dev's segments (dev < 0: s itself):
// their blocks stay where the kept segments find theirs.
func OnlyDevice(s *snapshot.Snapshot, dev int) *snapshot.Snapshot {
	if dev < 0 {
		return s
	}
	only := *s
	only.Segments = slices.DeleteFunc(slices.Clone(s.Segments), func(sg snapshot.Segment) bool { return int(sg.Device) != dev })
	return &only
}

// Stats writes, byte for byte, what "python -m torch.cuda._memory_viz stats"
// prints (segsum's text plus print's newline): a page map of every segment
// of at least 20 MiB, then totals and the legend. Unlike PyTorch it does
// not stop on snapshots whose block sizes do not add up to the segment
// size; it prints what the numbers say.
func Stats(w io.Writer, s *snapshot.Snapshot) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("Summary of segments >= 20.0MiB in size\n")

	// Python sorts by (total_size, size of active_allocated blocks); its
	// sort is stable, so ties keep file order.
	// Sorted by those keys and then the index (the stable order), on a
	// compact array: a stable sort reaching into the segments was a fifth
	// of stats' time on a 1 GB snapshot.
	type segKey struct {
		total, active uint64
		i             int
	}
	keys := make([]segKey, len(s.Segments))
	for i := range s.Segments {
		keys[i] = segKey{total: s.Segments[i].TotalSize, i: i}
		for _, b := range s.SegmentBlocks(i) {
			if b.State == snapshot.BlockActiveAllocated {
				keys[i].active += b.Size
			}
		}
	}
	slices.SortFunc(keys, func(a, b segKey) int {
		if c := cmp.Compare(a.total, b.total); c != 0 {
			return c
		}
		if c := cmp.Compare(a.active, b.active); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	order := make([]int, len(keys))
	for k := range keys {
		order[k] = keys[k].i
	}

	var totalReserved, totalAllocated, freeExternal, freeInternal int64
	type blockRange struct{ start, size int64 }
	var ranges []blockRange
	var occupied []byte
	var frac []float64
	for _, si := range order {
		seg := &s.Segments[si]
		total := int64(seg.TotalSize)
		totalReserved += total

		var segExternal, segInternal, segAllocated, boffset int64
		ranges = ranges[:0]
		blocks := s.SegmentBlocks(si)
		for bi := range blocks {
			b := &blocks[bi]
			if b.State == snapshot.BlockActiveAllocated {
				acc := int64(s.Requested(b))
				ranges = append(ranges, blockRange{boffset, acc})
				segAllocated += acc
				segInternal += int64(b.Size) - acc
			} else {
				segExternal += int64(b.Size)
			}
			boffset += int64(b.Size)
		}
		totalAllocated += segAllocated
		freeExternal += segExternal
		freeInternal += segInternal

		if total < statsPageSize {
			continue // the page map is drawn only for big segments
		}
		npages := floorDiv(total-1, statsPageSize) + 1
		// No GPU has a 1.25 TiB segment; a size that big is corrupt data, and
		// drawing all its pages would exhaust memory.
		npages = min(npages, statsMaxPages)
		occupied = occupied[:0]
		frac = frac[:0]
		for j := int64(0); j < npages; j++ {
			occupied = append(occupied, ' ')
			frac = append(frac, 0)
		}
		for i, r := range ranges {
			finishOff := r.start + r.size
			start := floorDiv(r.start, statsPageSize)
			finish := floorDiv(finishOff-1, statsPageSize) + 1
			m := byte('a' + i%26)
			// Ranges lie inside the segment unless the sizes are corrupt
			// (or overflow); clamp so that such data cannot stall us.
			for j := max(start, 0); j < finish && j < npages; j++ {
				lo := max(r.start, j*statsPageSize)
				hi := min(finishOff, (j+1)*statsPageSize)
				frac[j] += float64(hi-lo) / statsPageSize
				if occupied[j] != ' ' {
					d := int(frac[j] * 10)
					d = max(0, min(d, 10))
					occupied[j] = "0123456789*"[d]
				} else {
					occupied[j] = m
				}
			}
		}
		bw.WriteByte('[')
		bw.Write(occupied)
		bw.WriteString("] ")
		bw.WriteString(units.Python(total))
		bw.WriteString(" allocated, ")
		bw.WriteString(reportFree(segExternal, segInternal))
		bw.WriteString(" free")
		if raw := s.RawStream(seg.Stream); raw != 0 {
			bw.WriteString(" stream_")
			bw.WriteString(strconv.FormatInt(raw, 10))
		}
		bw.WriteByte('\n')
	}
	bw.WriteString("segments: " + strconv.Itoa(len(s.Segments)) + "\n")
	bw.WriteString("total_reserved: " + units.Python(totalReserved) + "\n")
	bw.WriteString("total_allocated: " + units.Python(totalAllocated) + "\n")
	bw.WriteString("total_free: " + reportFree(freeExternal, freeInternal) + "\n")
	bw.WriteString(statsLegend)
	// The CLI print()s segsum's string, which already ends in a newline.
	bw.WriteString("\n")
	return bw.Flush()
}

// reportFree is _memory_viz._report_free.
func reportFree(external, internal int64) string {
	total := external + internal
	out := units.Python(total)
	if total != 0 {
		pct := float64(internal) / float64(total) * 100
		out += " (" + strconv.FormatFloat(pct, 'f', 1, 64) + "% internal)"
	}
	return out
}
