// Package alloc simulates PyTorch's CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp) byte for byte: pools, rounding,
// splitting, expandable segments, releases and memory_stats counters.
//
// An Allocator models one device's DeviceCachingAllocator. Its methods are
// named after the C++ functions they follow, and comments cite them. It
// runs scripts (script.go), replays real snapshots (replay.go) and
// compares configurations (sweep.go).
package alloc

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// Options are the facts about the device the allocator cannot configure.
type Options struct {
	// Capacity is the device's total memory (cudaMemGetInfo total); 0
	// means unlimited (cudaMalloc never fails).
	Capacity uint64
	// External is device memory used outside the allocator (CUDA context,
	// NCCL, cuBLAS workspaces); it reduces what cudaMalloc can get.
	External uint64
	// MemoryFraction is torch.cuda.set_per_process_memory_fraction (0 =
	// not set). It needs Capacity. It enables garbage_collection_threshold.
	MemoryFraction float64
	// TotalMemory is the GPU's total memory (totalGlobalMem), which sizes
	// expandable reservations (1⅛ of it); 0 means Capacity, or 1 TiB when
	// that is 0 too. Replays set it large: the capacity a what-if gives is
	// what PyTorch could use, less than the GPU the trace ran on.
	TotalMemory uint64
	// AddressBase is where made-up device addresses (new segments and
	// reservations) start; 0 means 0x7f0000000000.
	AddressBase uint64
	// Device is the device ordinal (used in messages and snapshots).
	Device int
	// Record keeps a trace of allocator events (Trace).
	Record bool
}

// Event is one allocator trace entry, as torch.cuda.memory._snapshot()
// records it: Addr is the block or segment address (device_free for OOM),
// Size the requested size for alloc/free events, the segment or mapped
// size for segment events, the rounded size for OOM.
type Event struct {
	Action snapshot.Action
	Addr   uint64
	Size   uint64
	Stream int64
}

// OOMError is the allocator's torch.OutOfMemoryError.
type OOMError struct {
	Size       uint64 // rounded request (params.size())
	AllocSize  uint64 // the segment size it tried to cudaMalloc
	Device     int
	Capacity   uint64
	DeviceFree uint64
	Allowed    uint64 // set_per_process_memory_fraction limit, 0 if none
	Allocated  uint64
	Reserved   uint64
}

func (e *OOMError) Error() string {
	allowed := ""
	if e.Allowed > 0 {
		allowed = units.C10(e.Allowed) + " allowed; "
	}
	return fmt.Sprintf("CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. %s"+
		"Of the allocated memory %s is allocated by PyTorch, and %s is reserved by PyTorch but unallocated. "+
		"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "+
		"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
		units.C10(e.AllocSize), e.Device, units.C10(e.Capacity), units.C10(e.DeviceFree), allowed,
		units.C10(e.Allocated), units.C10(e.Reserved-e.Allocated))
}

// Allocator is one device's caching allocator.
type Allocator struct {
	cfg   Config
	opt   Options
	stats MemoryStats

	large, small blockPool
	// active holds allocated and pending-free blocks by address, for the
	// API that names blocks by address. A replay, which holds its blocks,
	// sets it nil: a million-entry map costs it more than the model.
	active map[uint64]*block
	// live lists the same blocks (block.liveAt is the index) for
	// Segments.
	live []*block
	// pending lists blocks waiting on stream-use events, oldest first
	// (cuda_events).
	pending []*block

	totalAllocated uint64 // total_allocated_memory (reserved bytes)
	allowed        uint64 // allowed_memory_maximum
	setFraction    bool

	expSegs []*expandableSegment
	va      vaSpace

	record bool
	trace  []Event

	// segmentAddr, when set, chooses the address of a new cudaMalloc
	// (replay takes it from the recorded trace); ok=false falls back to
	// the fake address space.
	segmentAddr func(size uint64) (addr uint64, ok bool)
	// reserveAddr likewise places a new expandable segment's reservation.
	reserveAddr func(size uint64) (addr uint64, ok bool)

	// off switches rules off, for the tests that show each one matters.
	off rule
	// spare holds blocks merged away, for reuse; nothing refers to them.
	spare []*block

	// last describes the most recent Malloc for the script runner.
	last opInfo
	seq  uint64
}

// opInfo records what the last Malloc did.
type opInfo struct {
	newSegment bool
	segSize    uint64
	small      bool
	mapped     uint64
}

// rule names an expandable-segment rule of the C++ code that tests can
// switch off (ablation) to show that a fixture depends on it.
type rule uint

const (
	ruleTraceBase       rule = 1 << iota // a new reservation starts where the trace maps
	ruleExpandableFit                    // best fit on size + unmapped space after
	ruleExpandableSplit                  // split when >= 512 bytes remain, both pools
	ruleMergeBeforeTail                  // map behind the free block before the unmapped tail
	ruleStreamReserve                    // one reservation per stream (and pool)
	ruleUnmapFreePages                   // release unmaps the whole free pages
)

// maxRequest bounds a request so that rounding cannot overflow (1 EiB).
const maxRequest = 1 << 60

// fakeBase is where fake cudaMalloc addresses start (real ones on Linux
// look like 0x7f...).
const fakeBase = 0x7f0000000000

// New returns an empty allocator.
func New(cfg Config, opt Options) *Allocator {
	a := &Allocator{
		cfg:    cfg,
		opt:    opt,
		active: map[uint64]*block{},
		record: opt.Record,
		va:     vaSpace{base: fakeBase},
	}
	if opt.AddressBase != 0 {
		a.va.base = opt.AddressBase
	}
	a.large.small = false
	a.small.small = true
	frac := opt.MemoryFraction
	if frac == 0 {
		frac = cfg.MemoryFraction
	}
	if frac > 0 && opt.Capacity > 0 {
		a.allowed = uint64(frac * float64(opt.Capacity))
		a.setFraction = true
	}
	a.stats.MaxSplitSize = maxSplitStat(cfg.MaxSplitSize)
	return a
}

func maxSplitStat(v uint64) int64 {
	if v == Unlimited {
		return -1
	}
	return int64(v)
}

// Config returns the current configuration.
func (a *Allocator) Config() Config { return a.cfg }

// SetConfig changes the configuration mid-run, as
// torch.cuda.memory._set_allocator_settings does; existing blocks stay.
func (a *Allocator) SetConfig(c Config) {
	a.cfg = c
	if c.MemoryFraction > 0 && a.opt.MemoryFraction == 0 && a.opt.Capacity > 0 {
		a.allowed = uint64(c.MemoryFraction * float64(a.opt.Capacity))
		a.setFraction = true
	}
}

// Stats returns a copy of the memory_stats counters.
func (a *Allocator) Stats() MemoryStats { return a.stats }

// Trace returns the recorded events (Options.Record), oldest first.
func (a *Allocator) Trace() []Event { return a.trace }

// ResetPeakStats is torch.cuda.reset_peak_memory_stats.
func (a *Allocator) ResetPeakStats() {
	for _, arr := range []*StatArray{&a.stats.Allocation, &a.stats.Segment, &a.stats.Active,
		&a.stats.InactiveSplit, &a.stats.AllocatedBytes, &a.stats.ReservedBytes,
		&a.stats.ActiveBytes, &a.stats.InactiveSplitBytes, &a.stats.RequestedBytes} {
		for i := range arr {
			arr[i].Peak = arr[i].Current
		}
	}
	a.stats.OversizeAllocations.Peak = a.stats.OversizeAllocations.Current
	a.stats.OversizeSegments.Peak = a.stats.OversizeSegments.Current
}

func (a *Allocator) recordTrace(act snapshot.Action, addr, size, stream uint64) {
	if a.record {
		a.trace = append(a.trace, Event{Action: act, Addr: addr, Size: size, Stream: int64(stream)})
	}
}

// allocParams is AllocParams.
type allocParams struct {
	stream    uint64
	size      uint64
	pool      *blockPool
	allocSize uint64
	block     *block
}

// Malloc is DeviceCachingAllocator::malloc: it returns the block address
// for a request of size bytes on stream (a raw cudaStream_t value, 0 for
// the default stream), or an *OOMError. Size 0 returns 0 without
// touching the allocator, as PyTorch does.
func (a *Allocator) Malloc(size uint64, stream int64) (uint64, error) {
	b, err := a.malloc(size, stream)
	if b == nil {
		return 0, err
	}
	return b.ptr, nil
}

// malloc is Malloc returning the block (nil for size 0 or an OOM).
func (a *Allocator) malloc(size uint64, stream int64) (*block, error) {
	a.last = opInfo{}
	if size == 0 {
		return nil, nil
	}
	s := uint64(stream)
	if size > maxRequest {
		// Larger than any device; rounding would overflow size_t.
		a.stats.NumOOMs++
		a.recordTrace(snapshot.ActionOOM, a.deviceFree(), size, s)
		return nil, &OOMError{Size: size, AllocSize: size, Device: a.opt.Device, Capacity: a.opt.Capacity,
			DeviceFree: a.deviceFree(), Allowed: a.allowedIfSet(),
			Allocated: uint64(a.stats.AllocatedBytes[PoolAll].Current),
			Reserved:  uint64(a.stats.ReservedBytes[PoolAll].Current)}
	}
	rounded := a.cfg.RoundSize(size)
	pool := &a.large
	if rounded <= kSmallSize { // get_pool
		pool = &a.small
	}
	p := &allocParams{stream: s, size: rounded, pool: pool, allocSize: a.cfg.AllocationSize(rounded)}

	found := a.getFreeBlock(p)
	if !found {
		if a.setFraction && a.cfg.GCThreshold > 0 {
			a.garbageCollectCachedBlocks()
		}
		found = a.allocBlock(p, false) ||
			(a.releaseAvailableCachedBlocks(p) && a.allocBlock(p, false)) ||
			(a.releaseCachedBlocks() && a.allocBlock(p, true))
	}
	if !found {
		free := a.deviceFree()
		a.recordTrace(snapshot.ActionOOM, free, p.size, s)
		a.stats.NumOOMs++
		capacity := a.opt.Capacity
		return nil, &OOMError{
			Size: p.size, AllocSize: p.allocSize, Device: a.opt.Device, Capacity: capacity,
			DeviceFree: free, Allowed: a.allowedIfSet(),
			Allocated: uint64(a.stats.AllocatedBytes[PoolAll].Current),
			Reserved:  uint64(a.stats.ReservedBytes[PoolAll].Current),
		}
	}
	split := a.shouldSplit(p.block, p.size)
	b := a.allocFoundBlock(p, size, split)
	return b, nil
}

func (a *Allocator) allowedIfSet() uint64 {
	if a.setFraction {
		return a.allowed
	}
	return 0
}

// deviceFree is what cudaMemGetInfo would report as free.
func (a *Allocator) deviceFree() uint64 {
	if a.opt.Capacity == 0 {
		return 0
	}
	used := a.totalAllocated + a.opt.External
	if used >= a.opt.Capacity {
		return 0
	}
	return a.opt.Capacity - used
}

// shouldSplit is should_split.
func (a *Allocator) shouldSplit(b *block, size uint64) bool {
	remaining := b.size - size
	if b.pool.small || (a.cfg.ExpandableSegments && a.off&ruleExpandableSplit == 0) {
		return remaining >= kMinBlockSize
	}
	return size < a.cfg.MaxSplitSize && remaining > kSmallSize
}

// getFreeBlock is get_free_block: best fit by (stream, size, address).
func (a *Allocator) getFreeBlock(p *allocParams) bool {
	pool := p.pool
	if a.setFraction && a.cfg.GCThreshold > 0 {
		pool.gcCalls++
	}
	set := &pool.blocks
	i := set.lowerBound(p.stream, p.size, 0)
	if set.isEnd(i) || set.at(i).stream != p.stream {
		return false
	}
	if set.at(i).exp != nil {
		if a.cfg.ExpandableSegments && a.off&ruleExpandableFit == 0 {
			// Best fit counts the unmapped space after a block as part of it.
			expSize := func(b *block) uint64 {
				if b.next != nil && !b.next.mapped {
					return b.size + b.next.size
				}
				return b.size
			}
			next := set.next(i)
			for set.at(i).exp != nil && !set.isEnd(next) && set.at(next).stream == p.stream &&
				expSize(set.at(next)) < expSize(set.at(i)) {
				i = next
				next = set.next(next)
			}
		} else if !a.cfg.ExpandableSegments {
			// Expandable segments were switched off: skip their blocks.
			i = set.next(i)
			for !set.isEnd(i) && set.at(i).exp != nil && set.at(i).stream == p.stream {
				i = set.next(i)
			}
			if set.isEnd(i) || set.at(i).stream != p.stream {
				return false
			}
		}
	}
	b := set.at(i)
	// Do not return an oversized block for a small request.
	if p.size < a.cfg.MaxSplitSize && b.size >= a.cfg.MaxSplitSize {
		return false
	}
	// Allow an oversized block to be rounded up, within a limit.
	if p.size >= a.cfg.MaxSplitSize && b.size >= p.size+a.cfg.MaxNonSplitRounding {
		return false
	}
	p.block = b
	pool.eraseAt(i)
	return true
}

// allocFoundBlock is alloc_found_block.
func (a *Allocator) allocFoundBlock(p *allocParams, origSize uint64, split bool) *block {
	b := p.block
	small := p.pool.small
	alreadySplit := b.isSplit()
	if split {
		remaining := b
		b = a.newBlock()
		*b = block{stream: p.stream, size: p.size, ptr: remaining.ptr, pool: p.pool,
			mapped: true, exp: remaining.exp, prev: remaining.prev, next: remaining}
		if b.prev != nil {
			b.prev.next = b
		}
		remaining.prev = b
		remaining.ptr += p.size
		remaining.size -= p.size
		p.pool.insert(remaining)
		if alreadySplit && b.exp == nil {
			// An already-split inactive block is shrunk by size bytes.
			a.stats.InactiveSplitBytes.dec(small, b.size)
		} else if b.exp == nil {
			// A new split inactive block is created from an unsplit one.
			a.stats.InactiveSplitBytes.inc(small, remaining.size)
			a.stats.InactiveSplit.inc(small, 1)
		}
	} else if alreadySplit && b.exp == nil {
		// An already-split block becomes active.
		a.stats.InactiveSplitBytes.dec(small, b.size)
		a.stats.InactiveSplit.dec(small, 1)
	}
	b.allocated = true
	b.requested = origSize
	a.seq++
	b.seq = a.seq
	a.recordTrace(snapshot.ActionAlloc, b.ptr, origSize, b.stream)
	a.addActive(b)
	a.stats.Allocation.inc(small, 1)
	a.stats.AllocatedBytes.inc(small, b.size)
	a.stats.Active.inc(small, 1)
	a.stats.ActiveBytes.inc(small, b.size)
	a.stats.RequestedBytes.inc(small, b.requested)
	if b.size >= a.cfg.MaxSplitSize {
		a.stats.OversizeAllocations.inc(1)
	}
	return b
}

// Free is DeviceCachingAllocator::free for a block with no uses on other
// streams: free_requested and free_completed at once.
func (a *Allocator) Free(addr uint64) error {
	b, err := a.lookup(addr)
	if err != nil {
		return err
	}
	a.free(b, false)
	return nil
}

// FreeRequested frees a block that was used on other streams
// (record_stream): it stays active_pending_free until FreeCompleted, or
// until EmptyCache or an OOM retry synchronizes all streams.
func (a *Allocator) FreeRequested(addr uint64) error {
	b, err := a.lookup(addr)
	if err != nil {
		return err
	}
	a.free(b, true)
	return nil
}

// FreeCompleted ends the wait of a FreeRequested block, as process_events
// does when its CUDA events complete.
func (a *Allocator) FreeCompleted(addr uint64) error {
	b := a.active[addr]
	if b == nil || b.allocated || b.eventCount == 0 {
		return fmt.Errorf("free_completed: no block waiting to be freed at %#x", addr)
	}
	a.completeEvent(b)
	return nil
}

func (a *Allocator) completeEvent(b *block) {
	for i, q := range a.pending {
		if q == b {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
			break
		}
	}
	b.eventCount--
	if b.eventCount == 0 {
		a.freeBlock(b)
	}
}

func (a *Allocator) lookup(addr uint64) (*block, error) {
	b := a.active[addr]
	if b == nil || !b.allocated {
		return nil, fmt.Errorf("free of %#x: no allocated block at that address", addr)
	}
	return b, nil
}

// free is DeviceCachingAllocator::free.
func (a *Allocator) free(b *block, deferred bool) {
	b.allocated = false
	small := b.pool.small
	a.stats.Allocation.dec(small, 1)
	a.stats.AllocatedBytes.dec(small, b.size)
	a.recordTrace(snapshot.ActionFreeRequested, b.ptr, b.requested, b.stream)
	if b.size >= a.cfg.MaxSplitSize {
		a.stats.OversizeAllocations.dec(1)
	}
	if deferred {
		// insert_events: one event per stream use.
		b.eventCount++
		a.pending = append(a.pending, b)
		return
	}
	a.freeBlock(b)
}

// freeBlock is free_block: merge with free neighbours and return to the pool.
func (a *Allocator) freeBlock(b *block) {
	a.recordTrace(snapshot.ActionFreeCompleted, b.ptr, b.requested, b.stream)
	origSize := b.size
	requested := b.requested
	pool := b.pool
	var netBlocks, netSize int64
	a.removeActive(b)
	for _, c := range [2]*block{b.prev, b.next} {
		if sub := a.tryMergeBlocks(b, c, pool); sub > 0 {
			netBlocks--
			netSize -= int64(sub)
		}
	}
	pool.insert(b)
	if b.isSplit() {
		netBlocks++
		netSize += int64(b.size)
	}
	small := pool.small
	// inactive_split excludes expandable segments (see free_block).
	if b.exp == nil {
		if netBlocks > 0 {
			a.stats.InactiveSplit.inc(small, uint64(netBlocks))
		} else if netBlocks < 0 {
			a.stats.InactiveSplit.dec(small, uint64(-netBlocks))
		}
		if netSize > 0 {
			a.stats.InactiveSplitBytes.inc(small, uint64(netSize))
		} else if netSize < 0 {
			a.stats.InactiveSplitBytes.dec(small, uint64(-netSize))
		}
	}
	a.stats.Active.dec(small, 1)
	a.stats.ActiveBytes.dec(small, origSize)
	a.stats.RequestedBytes.dec(small, requested)
}

// addActive indexes an allocated or pending-free block.
func (a *Allocator) addActive(b *block) {
	if a.active != nil {
		a.active[b.ptr] = b
	}
	b.liveAt = len(a.live)
	a.live = append(a.live, b)
}

// removeActive drops a block that became free; the last live block takes
// its place in the list.
func (a *Allocator) removeActive(b *block) {
	if a.active != nil {
		delete(a.active, b.ptr)
	}
	last := a.live[len(a.live)-1]
	a.live[b.liveAt] = last
	last.liveAt = b.liveAt
	a.live[len(a.live)-1] = nil
	a.live = a.live[:len(a.live)-1]
}

// tryMergeBlocks is try_merge_blocks: it returns the size of the subsumed
// block, or 0.
func (a *Allocator) tryMergeBlocks(dst, src *block, pool *blockPool) uint64 {
	if src == nil || src.allocated || src.eventCount > 0 || src.streamUses || dst.mapped != src.mapped {
		return 0
	}
	if src.mapped {
		pool.erase(src)
	} else {
		pool.unmapped.erase(src)
	}
	if dst.prev == src { // [src dst]
		dst.ptr = src.ptr
		dst.prev = src.prev
		if dst.prev != nil {
			dst.prev.next = dst
		}
	} else { // [dst src]
		dst.next = src.next
		if dst.next != nil {
			dst.next.prev = dst
		}
	}
	dst.size += src.size
	n := src.size
	a.spare = append(a.spare, src)
	return n
}

// newBlock reuses a block merged away earlier (replays of millions of
// events would otherwise keep the garbage collector busy).
func (a *Allocator) newBlock() *block {
	if n := len(a.spare); n > 0 {
		b := a.spare[n-1]
		a.spare = a.spare[:n-1]
		return b
	}
	return new(block)
}

// allocBlock is alloc_block: a new segment by cudaMalloc, or mapped pages
// of an expandable segment.
func (a *Allocator) allocBlock(p *allocParams, isRetry bool) bool {
	size := p.allocSize
	if isRetry {
		a.stats.NumAllocRetries++
	}
	if a.setFraction && a.totalAllocated+size > a.allowed {
		return false
	}
	if a.cfg.ExpandableSegments {
		p.block = a.tryAllocateExpandableBlock(p.stream, p.pool, p.size)
		return p.block != nil
	}
	if !a.deviceHas(size) {
		return false
	}
	ptr := a.newSegmentAddr(size)
	a.totalAllocated += size
	p.block = &block{stream: p.stream, size: size, ptr: ptr, pool: p.pool, mapped: true}
	a.stats.Segment.inc(p.pool.small, 1)
	a.stats.ReservedBytes.inc(p.pool.small, size)
	if size >= a.cfg.MaxSplitSize {
		a.stats.OversizeSegments.inc(1)
	}
	a.stats.NumDeviceAlloc++
	a.recordTrace(snapshot.ActionSegmentAlloc, ptr, size, p.stream)
	a.last.newSegment = true
	a.last.segSize = size
	a.last.small = p.pool.small
	return true
}

// deviceHas reports whether cudaMalloc of size bytes would succeed.
func (a *Allocator) deviceHas(size uint64) bool {
	if a.opt.Capacity == 0 {
		return true
	}
	return a.totalAllocated+a.opt.External+size <= a.opt.Capacity
}

// newReservationAddr places a new expandable segment's address range
// (cuMemAddressReserve) of size bytes in pages of page bytes and returns
// its base and size. A base the trace gives is kept; the reservations
// around it, sized from a guess of the GPU's memory, are made to end
// where the trace shows the next one begins.
func (a *Allocator) newReservationAddr(size, page uint64) (uint64, uint64) {
	if a.reserveAddr != nil && a.off&ruleTraceBase == 0 {
		if addr, ok := a.reserveAddr(size); ok {
			if got, ok := a.placeReservation(addr, size, page); ok {
				return addr, got
			}
		}
	}
	return a.va.alloc(size), size
}

// placeReservation fits a reservation at addr: an earlier reservation
// whose unmapped tail covers addr ends there, and the new one ends where
// the next range in use begins. It fails when addr lies in mapped pages or
// a cudaMalloc'd segment, or when less than one page is left.
func (a *Allocator) placeReservation(addr, size, page uint64) (uint64, bool) {
	end := addr + size
	for _, es := range a.expSegs {
		esEnd := es.base + es.size()
		switch {
		case es.base <= addr && addr < esEnd:
			keep := (addr - es.base) / es.pageSize
			if keep == 0 || keep < uint64(len(es.mapped)) {
				return 0, false
			}
			a.truncateReservation(es, keep)
		case addr < es.base && es.base < end:
			end = es.base
		}
	}
	if p := a.va.after(addr); !a.va.spans.isEnd(p) {
		next := a.va.spans.at(p)
		if next.start <= addr {
			return 0, false
		}
		end = min(end, next.start)
	}
	size = (end - addr) / page * page
	if size == 0 {
		return 0, false
	}
	a.va.take(addr, size)
	return size, true
}

// truncateReservation shrinks es to its first keep pages (all mapped pages
// lie below them): its unmapped tail block ends at the new end.
func (a *Allocator) truncateReservation(es *expandableSegment, keep uint64) {
	oldEnd := es.base + es.size()
	es.maxPages = keep
	newEnd := es.base + es.size()
	for _, p := range []*blockPool{&a.large, &a.small} {
		for _, b := range p.unmapped.items {
			if b.exp == es && b.ptr+b.size == oldEnd {
				b.size = newEnd - b.ptr
			}
		}
	}
	a.va.resize(es.base, newEnd)
}

func (a *Allocator) newSegmentAddr(size uint64) uint64 {
	if a.segmentAddr != nil {
		if addr, ok := a.segmentAddr(size); ok && !a.va.overlaps(addr, size) {
			a.va.take(addr, size)
			return addr
		}
	}
	return a.va.alloc(size)
}

// releaseAvailableCachedBlocks is release_available_cached_blocks: with
// max_split_size set, free one cached oversize block big enough, or
// several oversize blocks from the largest down.
func (a *Allocator) releaseAvailableCachedBlocks(p *allocParams) bool {
	if a.cfg.MaxSplitSize == Unlimited {
		return false
	}
	pool := p.pool
	key := max(p.size, a.cfg.MaxSplitSize)
	set := &pool.blocks
	it := set.lowerBound(p.stream, key, 0)
	// An expandable block is never cudaFree'd here (release_block would
	// free its segment); PyTorch skips it and unmaps its pages later, in
	// release_cached_blocks.
	if set.isEnd(it) || set.at(it).stream != p.stream || set.at(it).exp != nil {
		it, ok := set.prev(it)
		if !ok {
			return false
		}
		// Release from the largest down; erasing cur keeps it valid.
		var released uint64
		for released < key && set.at(it).size >= a.cfg.MaxSplitSize && set.at(it).stream == p.stream {
			cur := set.at(it)
			prev, more := set.prev(it)
			if cur.exp == nil {
				released += cur.size
				a.releaseBlock(cur)
			}
			if !more {
				break
			}
			it = prev
		}
		return released >= key
	}
	a.releaseBlock(set.at(it))
	return true
}

// releaseCachedBlocks is release_cached_blocks (torch.cuda.empty_cache).
func (a *Allocator) releaseCachedBlocks() bool {
	a.synchronizeAndFreeEvents()
	a.releaseBlocks(&a.large)
	a.releaseBlocks(&a.small)
	return true
}

// EmptyCache is torch.cuda.empty_cache(): wait for pending frees, then
// return every entirely free segment (and free expandable pages).
func (a *Allocator) EmptyCache() { a.releaseCachedBlocks() }

// synchronizeAndFreeEvents is synchronize_and_free_events.
func (a *Allocator) synchronizeAndFreeEvents() {
	a.stats.NumSyncAllStreams++
	pend := a.pending
	a.pending = nil
	for _, b := range pend {
		b.eventCount--
		if b.eventCount == 0 {
			a.freeBlock(b)
		}
	}
}

// releaseBlock is release_block: cudaFree of an entirely free segment.
func (a *Allocator) releaseBlock(b *block) {
	a.stats.NumDeviceFree++
	a.recordTrace(snapshot.ActionSegmentFree, b.ptr, b.size, b.stream)
	a.va.free(b.ptr)
	a.totalAllocated -= b.size
	a.stats.Segment.dec(b.pool.small, 1)
	a.stats.ReservedBytes.dec(b.pool.small, b.size)
	if b.size >= a.cfg.MaxSplitSize {
		a.stats.OversizeSegments.dec(1)
	}
	b.pool.erase(b)
}

// releaseBlocks is release_blocks: free unsplit blocks, unmap free pages
// of expandable segments.
func (a *Allocator) releaseBlocks(pool *blockPool) {
	var toUnmap []*block
	for _, b := range pool.releasable.all() {
		if b.exp != nil {
			toUnmap = append(toUnmap, b)
		} else if b.prev == nil && b.next == nil {
			a.releaseBlock(b)
		}
	}
	for _, b := range toUnmap {
		a.unmapBlock(b)
		if b.prev == nil && b.next == nil {
			a.releaseExpandableSegment(b)
		}
	}
}

// garbageCollectCachedBlocks is garbage_collect_cached_blocks.
func (a *Allocator) garbageCollectCachedBlocks() {
	threshold := uint64(a.cfg.GCThreshold * float64(a.allowed))
	if a.totalAllocated <= threshold {
		return
	}
	target := a.totalAllocated - threshold
	var reclaimed uint64
	var totalAge int64
	count := 0
	// The average age counts unsplit expandable blocks too, as PyTorch
	// does; only cudaMalloc'd segments are released.
	for _, b := range a.large.releasable.all() {
		if !b.isSplit() {
			totalAge += b.gcCount()
			count++
		}
	}
	if count == 0 {
		return
	}
	freed := true
	for reclaimed < target && freed && count > 0 {
		ageThreshold := float64(totalAge) / float64(count)
		freed = false
		for _, b := range a.large.releasable.all() {
			if !b.isSplit() && b.exp == nil && float64(b.gcCount()) >= ageThreshold {
				freed = true
				reclaimed += b.size
				totalAge -= b.gcCount()
				count--
				a.releaseBlock(b)
			}
		}
	}
}

// tryAllocateExpandableBlock is try_allocate_expandable_block.
func (a *Allocator) tryAllocateExpandableBlock(stream uint64, pool *blockPool, size uint64) *block {
	c := a.findExpandableBlock(stream, pool, size)
	if !c.mapped && !a.mapBlock(c, min(c.size, size)) {
		return nil
	}
	for c.size < size {
		remaining := size - c.size
		nc := c.next
		if !a.mapBlock(nc, min(remaining, nc.size)) {
			return nil
		}
		c = nc
	}
	pool.erase(c)
	return c
}

// findExpandableBlock is find_expandable_block: the lowest address of a
// stream's expandable segments with room for size bytes, or a new
// segment.
func (a *Allocator) findExpandableBlock(stream uint64, pool *blockPool, size uint64) *block {
	allocatable := func(b *block) bool {
		return b != nil && !b.allocated && b.eventCount == 0 && !b.streamUses
	}
	hasSpace := func(b *block) bool {
		var n uint64
		for n < size && allocatable(b) {
			n += b.size
			b = b.next
		}
		return n >= size
	}
	first, sameStream := pool.unmapped.lowerBound(stream, 0), func(b *block) bool { return b.stream == stream }
	if a.off&ruleStreamReserve != 0 {
		first, sameStream = 0, func(*block) bool { return true }
	}
	for i := first; i < len(pool.unmapped.items) && sameStream(pool.unmapped.items[i]); i++ {
		c := pool.unmapped.items[i]
		if allocatable(c.prev) && a.off&ruleMergeBeforeTail == 0 {
			c = c.prev
		}
		if hasSpace(c) {
			return c
		}
	}
	page := uint64(kSmallBuffer)
	if !pool.small {
		page = a.cfg.LargeSegmentSize
	}
	base, size := a.newReservationAddr(a.reservationSize(page), page)
	es := &expandableSegment{base: base, pageSize: page, maxPages: size / page, stream: stream}
	a.expSegs = append(a.expSegs, es)
	c := &block{stream: stream, size: es.size(), ptr: es.base, pool: pool, exp: es}
	pool.unmapped.insert(c)
	return c
}

// reservationSize is the address space of a new expandable segment:
// 1⅛ of the GPU's memory in whole pages.
func (a *Allocator) reservationSize(page uint64) uint64 {
	total := a.opt.TotalMemory
	if total == 0 {
		total = a.opt.Capacity
	}
	if total == 0 {
		total = 1 << 40 // unlimited: reserve 1⅛ TiB of address space
	}
	space := total + total/8
	return (space + page - 1) / page * page
}

// mapBlock is map_block: map whole pages covering size bytes at the start
// of an unmapped block.
func (a *Allocator) mapBlock(b *block, size uint64) bool {
	es := b.exp
	begin := es.pageLeft(b.ptr)
	end := es.pageRight(b.ptr + size)
	if begin == end {
		return false
	}
	mappedSize := (end - begin) * es.pageSize
	if !a.deviceHas(mappedSize) { // cuMemCreate fails
		return false
	}
	for uint64(len(es.mapped)) < end {
		es.mapped = append(es.mapped, false)
	}
	for i := begin; i < end; i++ {
		es.mapped[i] = true
	}
	pool := b.pool
	pool.unmapped.erase(b)
	b.mapped = true
	if mappedSize < b.size {
		rest := &block{stream: b.stream, size: b.size - mappedSize, ptr: b.ptr + mappedSize,
			pool: pool, exp: es}
		rest.prev = b
		rest.next = b.next
		if b.next != nil {
			b.next.prev = rest
		}
		b.next = rest
		pool.unmapped.insert(rest)
		b.size = mappedSize
	}
	a.tryMergeBlocks(b, b.prev, pool)
	a.tryMergeBlocks(b, b.next, pool)
	pool.insert(b)
	a.totalAllocated += mappedSize
	a.stats.ReservedBytes.inc(pool.small, mappedSize)
	a.stats.NumDeviceAlloc++
	a.recordTrace(snapshot.ActionSegmentMap, es.base+begin*es.pageSize, mappedSize, b.stream)
	a.last.mapped += mappedSize
	a.last.small = pool.small
	return true
}

// unmapBlock is unmap_block: unmap the whole free pages inside a free
// expandable block.
func (a *Allocator) unmapBlock(b *block) {
	es := b.exp
	begin := es.pageRight(b.ptr)
	end := es.pageLeft(b.ptr + b.size)
	if begin >= end || a.off&ruleUnmapFreePages != 0 {
		return
	}
	for i := begin; i < end; i++ {
		es.mapped[i] = false
	}
	es.trim()
	uptr := es.base + begin*es.pageSize
	usize := (end - begin) * es.pageSize
	pool := b.pool
	pool.erase(b)
	if before := uptr - b.ptr; before > 0 {
		bf := &block{stream: b.stream, size: before, ptr: b.ptr, pool: pool, mapped: true, exp: es}
		bf.prev = b.prev
		if b.prev != nil {
			b.prev.next = bf
		}
		bf.next = b
		b.prev = bf
		pool.insert(bf)
	}
	if after := b.size - (uptr - b.ptr) - usize; after > 0 {
		af := &block{stream: b.stream, size: after, ptr: uptr + usize, pool: pool, mapped: true, exp: es}
		af.next = b.next
		if b.next != nil {
			b.next.prev = af
		}
		af.prev = b
		b.next = af
		pool.insert(af)
	}
	b.ptr = uptr
	b.size = usize
	b.mapped = false
	a.tryMergeBlocks(b, b.prev, pool)
	a.tryMergeBlocks(b, b.next, pool)
	pool.unmapped.insert(b)
	a.totalAllocated -= usize
	a.stats.ReservedBytes.dec(pool.small, usize)
	a.stats.NumDeviceFree++
	a.recordTrace(snapshot.ActionSegmentUnmap, uptr, usize, b.stream)
}

// releaseExpandableSegment is release_expandable_segment.
func (a *Allocator) releaseExpandableSegment(b *block) {
	for i, es := range a.expSegs {
		if es == b.exp {
			a.expSegs = append(a.expSegs[:i], a.expSegs[i+1:]...)
			break
		}
	}
	b.pool.unmapped.erase(b)
	a.va.free(b.exp.base)
}

// BlockInfo is one block of a segment as a snapshot reports it.
type BlockInfo struct {
	Addr      uint64
	Size      uint64
	Requested uint64 // requested size of the last malloc (0 if never used)
	State     snapshot.BlockState
}

// SegmentInfo is one segment (one cudaMalloc, or one contiguous mapped run
// of an expandable segment) as torch.cuda.memory_snapshot() reports it.
type SegmentInfo struct {
	Addr       uint64
	Size       uint64
	Stream     int64
	Small      bool // segment_type "small"
	Expandable bool
	Blocks     []BlockInfo
}

// Segments returns the current segments sorted by address, with their
// blocks, like DeviceCachingAllocator::snapshot.
func (a *Allocator) Segments() []SegmentInfo {
	// Every block is in a pool or active, so every segment's first mapped
	// block is met exactly once. The heads are sorted by a copy of their
	// address (not by reading a block per comparison).
	type head struct {
		addr uint64
		b    *block
	}
	var heads []head
	add := func(b *block) {
		if b.mapped && (b.prev == nil || !b.prev.mapped) {
			heads = append(heads, head{b.ptr, b})
		}
	}
	n := len(a.live)
	for _, p := range []*blockPool{&a.small, &a.large} {
		n += p.blocks.len()
		for _, ch := range p.blocks.chunks {
			for _, e := range ch {
				add(e.b)
			}
		}
	}
	for _, b := range a.live {
		add(b)
	}
	slices.SortFunc(heads, func(x, y head) int { return cmp.Compare(x.addr, y.addr) })
	// One array holds every segment's blocks.
	all := make([]BlockInfo, 0, n)
	out := make([]SegmentInfo, 0, len(heads))
	for _, h := range heads {
		s := SegmentInfo{Addr: h.addr, Stream: int64(h.b.stream), Small: h.b.pool.small, Expandable: h.b.exp != nil}
		first := len(all)
		for b := h.b; b != nil && b.mapped; b = b.next {
			st := snapshot.BlockInactive
			if b.allocated {
				st = snapshot.BlockActiveAllocated
			} else if b.eventCount > 0 || b.streamUses {
				st = snapshot.BlockActivePendingFree
			}
			all = append(all, BlockInfo{Addr: b.ptr, Size: b.size, Requested: b.requested, State: st})
			s.Size += b.size
		}
		s.Blocks = all[first:len(all):len(all)]
		out = append(out, s)
	}
	return out
}
