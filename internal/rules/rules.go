// Package rules holds the rules that more than one part of gpumem applies
// (PyTorch caching-allocator rules such as the block size a request gets
// and the fragmentation figure, and the buckets every curve over a trace
// is reduced to), written once; it depends on nothing else in gpumem.
package rules

import "math/bits"

// MinBlockSize is kMinBlockSize: every block size is a multiple of it.
const MinBlockSize = 512

// Intervals is kRoundUpPowerOfTwoIntervals: roundup_power2_divisions has
// one setting per power-of-two size interval from 1 MiB ([1, 2) MiB, index
// 0; below 1 MiB too) to 32 GiB and up (index 15).
const Intervals = 16

// Divisions is the roundup_power2_divisions table (0 or 1: off).
type Divisions [Intervals]uint64

// Index is the table index of an interval given by its start in MiB, as
// PyTorch's parser computes it: log2, clamped to the table (so 65536 MiB
// counts as 32768 MiB). ok is false for a start that is not a power of two
// (PyTorch rejects it).
func Index(startMiB uint64) (i int, ok bool) {
	if startMiB == 0 || startMiB&(startMiB-1) != 0 {
		return 0, false
	}
	return min(bits.Len64(startMiB)-1, Intervals-1), true
}

// For is AllocatorConfig::roundup_power2_divisions(size): the divisions
// of the interval holding size.
func (d *Divisions) For(size uint64) uint64 {
	if d == nil {
		return 0
	}
	idx := bits.Len64(size) - 1 - 20
	return d[max(0, min(idx, Intervals-1))]
}

// RoundSize is DeviceCachingAllocator::round_size: the block size a
// request of n bytes gets; divs may be nil (no roundup_power2_divisions).
func RoundSize(n uint64, divs *Divisions) uint64 {
	if n < MinBlockSize {
		return MinBlockSize
	}
	if d := divs.For(n); d > 1 && n > MinBlockSize*d {
		return RoundupPower2NextDivision(n, d)
	}
	return MinBlockSize * ((n + MinBlockSize - 1) / MinBlockSize)
}

// RoundupPower2NextDivision is roundup_power2_next_division: size rounded
// up to the next of the divisions equal steps between the powers of two
// around it (a power of two stays).
func RoundupPower2NextDivision(size, divisions uint64) uint64 {
	if size&(size-1) == 0 {
		return size
	}
	floor := uint64(1) << (bits.Len64(size) - 1)
	step := floor >> (bits.Len64(divisions) - 1)
	if step == 0 {
		return floor << 1
	}
	rounded := size &^ (step - 1)
	if rounded == size {
		return size
	}
	return rounded + step
}

// Fragmentation is gpumem's one fragmentation figure: the share of the
// cache's free bytes outside its largest free block,
// 1 − largest free block / all free cached bytes (0 when nothing is free).
// 0 means any request that fits the free total fits one block; near 1,
// the free memory is scattered in pieces a large request cannot use.
func Fragmentation(largestFree, free uint64) float64 {
	if free == 0 {
		return 0
	}
	return 1 - float64(largestFree)/float64(free)
}

// The caching allocator's pool and segment sizes (CUDACachingAllocator.cpp,
// top of the file).
const (
	// SmallSize is kSmallSize: requests of at most 1 MiB (rounded) go to
	// the small pool.
	SmallSize = 1 << 20
	// SmallBuffer is kSmallBuffer: the size of a small-pool segment.
	SmallBuffer = 2 << 20
	// LargeBuffer is kLargeBuffer: the default large-pool segment size for
	// requests below MinLargeAlloc (large_segment_size_mb's default).
	LargeBuffer = 20 << 20
	// MinLargeAlloc is kMinLargeAlloc: requests from it up get a segment of
	// their own.
	MinLargeAlloc = 10 << 20
	// RoundLarge is kRoundLarge: such segments are rounded up to 2 MiB.
	RoundLarge = 2 << 20
)

// SmallPool is get_pool's test: a rounded request of size bytes is served
// from the small pool.
func SmallPool(size uint64) bool { return size <= SmallSize }

// AllocationSize is get_allocation_size: the cudaMalloc size for a rounded
// request, given the large-pool segment size (LargeBuffer unless
// large_segment_size_mb says otherwise).
func AllocationSize(size, largeSegment uint64) uint64 {
	switch {
	case SmallPool(size):
		return SmallBuffer
	case size < MinLargeAlloc:
		return largeSegment
	}
	return RoundLarge * ((size + RoundLarge - 1) / RoundLarge)
}

// Buckets splits events [i0, i1) into n buckets of nearly equal size, as
// every curve over a trace does (the timeline's totals, sim's reserved
// curves, the Compare view's site curves), so that curves of one trace
// share their buckets: bucket b holds events [bounds[b], bounds[b+1]),
// bounds[b] = i0 + b·(i1−i0)/n. n must be at most i1−i0 and above 0.
func Buckets(i0, i1, n int) []int32 {
	bounds := make([]int32, n+1)
	span := uint64(i1 - i0)
	for b := range bounds {
		bounds[b] = int32(i0 + int(span*uint64(b)/uint64(n)))
	}
	return bounds
}

// BucketOf is the bucket of Buckets(i0, i1, n) that holds event i
// (i0 <= i < i1): the last b with b·span/n <= i−i0.
func BucketOf(i, i0, i1, n int) int {
	return int((uint64(i-i0+1)*uint64(n) - 1) / uint64(i1-i0))
}
