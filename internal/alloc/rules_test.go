package alloc

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// Each test pins one rule of c10/cuda/CUDACachingAllocator.cpp with exact
// byte counts; the comment names the function it follows.

// round_size / roundup_power2_next_division / roundup_power2_divisions.
func TestRoundSize(t *testing.T) {
	tests := []struct {
		conf string
		in   uint64
		want uint64
	}{
		{"", 1, 512},                 // size < kMinBlockSize -> kMinBlockSize
		{"", 512, 512},               // multiple of 512 stays
		{"", 513, 1024},              // else ceil to 512
		{"", 1200, 1536},             // no divisions: ceil to 512
		{"", 3*MiB + 1, 3*MiB + 512}, // large sizes also only ceil to 512
		{"roundup_power2_divisions:4", 1200, 1536},                 // 1200 <= 512*4: plain 512 rounding
		{"roundup_power2_divisions:4", 2049, 2560},                 // floor 2048, step 512
		{"roundup_power2_divisions:4", 3*MiB + 1, 3*MiB + 512*KiB}, // floor 2 MiB, step 512 KiB
		{"roundup_power2_divisions:4", 5 * MiB, 5 * MiB},           // already on a division
		{"roundup_power2_divisions:4", 4 * MiB, 4 * MiB},           // power of two
		{"roundup_power2_divisions:4", MiB + 1, MiB + 256*KiB},     // floor 1 MiB, step 256 KiB
		{"roundup_power2_divisions:8", 84 * MiB, 88 * MiB},         // floor 64 MiB, step 8 MiB
		{"roundup_power2_divisions:1", 1200, 1536},                 // 1 division = off (divisions > 1 only)
		// List form: the first key (256 MiB, index 8) also fills indices
		// 0..7; '>' fills the indices after the last key (1024 MiB, index 10).
		{"roundup_power2_divisions:[256:2,512:4,1024:8,>:16]", 3*MiB + 1, 4 * MiB},
		{"roundup_power2_divisions:[256:2,512:4,1024:8,>:16]", 600 * MiB, 640 * MiB},
		{"roundup_power2_divisions:[256:2,512:4,1024:8,>:16]", 1100 * MiB, 1152 * MiB},
		{"roundup_power2_divisions:[256:2,512:4,1024:8,>:16]", 2100 * MiB, 2176 * MiB},
		{"roundup_power2_divisions:[256:0,>:4]", 3*MiB + 1, 3*MiB + 512}, // 0 disables
	}
	for _, tt := range tests {
		cfg, err := ParseConfig(tt.conf)
		if err != nil {
			t.Fatalf("%q: %v", tt.conf, err)
		}
		if got := cfg.RoundSize(tt.in); got != tt.want {
			t.Errorf("%q RoundSize(%d) = %d, want %d", tt.conf, tt.in, got, tt.want)
		}
	}
}

// get_pool (<= kSmallSize is small) and get_allocation_size.
func TestPoolAndSegmentSize(t *testing.T) {
	tests := []struct {
		req     uint64
		small   bool
		segment uint64
		block   uint64
	}{
		{1, true, 2 * MiB, 512},
		{MiB, true, 2 * MiB, MiB},                     // kSmallSize itself is small
		{MiB + 1, false, 20 * MiB, MiB + 512},         // just above: large pool, kLargeBuffer segment
		{3 * MiB, false, 20 * MiB, 3 * MiB},           // 20 MiB segment, 17 MiB split off
		{10*MiB - 512, false, 20 * MiB, 10*MiB - 512}, // < kMinLargeAlloc: 20 MiB segment
		{10 * MiB, false, 10 * MiB, 10 * MiB},         // >= kMinLargeAlloc: rounded to 2 MiB
		{11 * MiB, false, 12 * MiB, 12 * MiB},         // remainder exactly 1 MiB: not split (needs > kSmallSize)
		{11*MiB - 512, false, 12 * MiB, 11*MiB - 512}, // remainder 1 MiB + 512: split
		{13*MiB + 1, false, 14 * MiB, 14 * MiB},       // remainder 1 MiB - 512: the block is the whole segment
		{19 * MiB, false, 20 * MiB, 20 * MiB},         // remainder 1 MiB: not split
		{100*MiB + 1, false, 102 * MiB, 100*MiB + 512},
	}
	for _, tt := range tests {
		a := New(DefaultConfig(), Options{Record: true})
		if _, err := a.Malloc(tt.req, 0); err != nil {
			t.Fatal(err)
		}
		st := a.Stats()
		p := PoolLarge
		if tt.small {
			p = PoolSmall
		}
		if got := uint64(st.ReservedBytes[p].Current); got != tt.segment {
			t.Errorf("malloc(%d): reserved in %s = %d, want %d", tt.req, poolNames[p], got, tt.segment)
		}
		if got := uint64(st.AllocatedBytes[p].Current); got != tt.block {
			t.Errorf("malloc(%d): block size = %d, want %d", tt.req, got, tt.block)
		}
		if got := uint64(st.RequestedBytes[PoolAll].Current); got != tt.req {
			t.Errorf("malloc(%d): requested = %d", tt.req, got)
		}
		wantSplit := tt.block < tt.segment
		if got := st.InactiveSplit[PoolAll].Current == 1; got != wantSplit {
			t.Errorf("malloc(%d): inactive_split = %d, want split %v", tt.req, st.InactiveSplit[PoolAll].Current, wantSplit)
		}
		if wantSplit && uint64(st.InactiveSplitBytes[PoolAll].Current) != tt.segment-tt.block {
			t.Errorf("malloc(%d): inactive_split_bytes = %d, want %d", tt.req, st.InactiveSplitBytes[PoolAll].Current, tt.segment-tt.block)
		}
	}
}

// get_free_block: best fit by (stream, size, address); alloc_found_block
// hands out the front of a split block.
func TestBestFitAndStreams(t *testing.T) {
	a := New(DefaultConfig(), Options{})
	big, _ := a.Malloc(40*MiB, 0)  // 40 MiB segment
	mid, _ := a.Malloc(30*MiB, 0)  // 30 MiB segment
	keep, _ := a.Malloc(12*MiB, 0) // 12 MiB segment
	_ = keep
	a.Free(big)
	a.Free(mid)
	// 25 MiB fits both; best fit is the 30 MiB block, split at its front.
	p, _ := a.Malloc(25*MiB, 0)
	if p != mid {
		t.Errorf("25 MiB went to %#x, want the 30 MiB block at %#x", p, mid)
	}
	// Another stream never reuses stream 0's blocks.
	q, _ := a.Malloc(5*MiB, 7)
	if q == mid+25*MiB || q == big {
		t.Errorf("stream 7 reused a stream 0 block at %#x", q)
	}
	if n := a.Stats().Segment[PoolAll].Current; n != 4 {
		t.Errorf("segments = %d, want 4 (stream 7 needs its own)", n)
	}
	// The 5 MiB remainder of the 30 MiB block (after 25 MiB) serves 4 MiB
	// on stream 0 at its front.
	r, _ := a.Malloc(4*MiB, 0)
	if r != mid+25*MiB {
		t.Errorf("4 MiB at %#x, want %#x", r, mid+25*MiB)
	}
}

// free_block / try_merge_blocks: neighbours merge on free.
func TestMergeOnFree(t *testing.T) {
	a := New(DefaultConfig(), Options{})
	x, _ := a.Malloc(3*MiB, 0) // 20 MiB segment: [x 3][y 4][z 5][free 8]
	y, _ := a.Malloc(4*MiB, 0)
	z, _ := a.Malloc(5*MiB, 0)
	a.Free(x)
	a.Free(z) // merges with the 8 MiB tail -> 13 MiB
	st := a.Stats()
	if st.InactiveSplit[PoolAll].Current != 2 || st.InactiveSplitBytes[PoolAll].Current != 16*MiB {
		t.Errorf("after two frees: inactive_split %d / %d bytes, want 2 / %d",
			st.InactiveSplit[PoolAll].Current, st.InactiveSplitBytes[PoolAll].Current, 16*MiB)
	}
	a.Free(y) // everything merges into one unsplit 20 MiB block
	st = a.Stats()
	if st.InactiveSplit[PoolAll].Current != 0 || st.InactiveSplitBytes[PoolAll].Current != 0 {
		t.Errorf("after merging all: inactive_split %d / %d, want 0 / 0", st.InactiveSplit[PoolAll].Current, st.InactiveSplitBytes[PoolAll].Current)
	}
	segs := a.Segments()
	if len(segs) != 1 || len(segs[0].Blocks) != 1 || segs[0].Blocks[0].Size != 20*MiB {
		t.Errorf("segments after merge: %+v", segs)
	}
}

// get_free_block's max_split_size rules and should_split's size < max_split.
func TestMaxSplitSize(t *testing.T) {
	cfg, err := ParseConfig("max_split_size_mb:20")
	if err != nil {
		t.Fatal(err)
	}
	a := New(cfg, Options{})
	big, _ := a.Malloc(30*MiB, 0) // oversize segment 30 MiB
	a.Free(big)
	// A request below max_split_size may not take an oversize block.
	small, _ := a.Malloc(10*MiB, 0)
	if small == big {
		t.Error("10 MiB took the 30 MiB oversize block")
	}
	// An oversize request takes an oversize block < size + 20 MiB, unsplit.
	p, _ := a.Malloc(25*MiB, 0)
	if p != big {
		t.Errorf("25 MiB at %#x, want the cached 30 MiB block %#x", p, big)
	}
	st := a.Stats()
	if got := st.AllocatedBytes[PoolAll].Current; got != 40*MiB {
		t.Errorf("allocated = %d, want 40 MiB (30 unsplit + 10)", got)
	}
	if st.OversizeAllocations.Current != 1 || st.OversizeSegments.Current != 1 {
		t.Errorf("oversize allocations/segments = %d/%d, want 1/1", st.OversizeAllocations.Current, st.OversizeSegments.Current)
	}
	if st.MaxSplitSize != 20*MiB {
		t.Errorf("max_split_size stat = %d", st.MaxSplitSize)
	}
	// max_non_split_rounding: 5 MiB cannot... a 20 MiB request may not take
	// a cached block >= 40 MiB.
	a2 := New(cfg, Options{})
	b40, _ := a2.Malloc(40*MiB, 0)
	a2.Free(b40)
	q, _ := a2.Malloc(20*MiB, 0)
	if q == b40 {
		t.Error("20 MiB took a 40 MiB oversize block (limit is size + 20 MiB)")
	}
	cfg2, _ := ParseConfig("max_split_size_mb:20,max_non_split_rounding_mb:40")
	a3 := New(cfg2, Options{})
	b40, _ = a3.Malloc(40*MiB, 0)
	a3.Free(b40)
	if q, _ := a3.Malloc(20*MiB, 0); q != b40 {
		t.Error("with max_non_split_rounding_mb:40, 20 MiB should take the 40 MiB block")
	}
}

// release_cached_blocks / release_blocks: empty_cache frees only entirely
// free segments.
func TestEmptyCache(t *testing.T) {
	a := New(DefaultConfig(), Options{Record: true})
	x, _ := a.Malloc(3*MiB, 0) // segment A 20 MiB
	y, _ := a.Malloc(30*MiB, 0)
	_, _ = a.Malloc(100, 0) // small segment 2 MiB, kept live
	a.Free(y)
	a.Free(x)
	z, _ := a.Malloc(3*MiB, 0) // reuses segment A
	_ = z
	a.EmptyCache()
	st := a.Stats()
	if got := st.ReservedBytes[PoolAll].Current; got != 22*MiB {
		t.Errorf("reserved after empty_cache = %d, want %d (20 MiB split segment + 2 MiB small)", got, 22*MiB)
	}
	var frees []uint64
	for _, e := range a.Trace() {
		if e.Action == snapshot.ActionSegmentFree {
			frees = append(frees, e.Size)
		}
	}
	if fmt.Sprint(frees) != fmt.Sprint([]uint64{30 * MiB}) {
		t.Errorf("segment_free sizes = %v, want [30 MiB]", frees)
	}
	if st.NumSyncAllStreams != 1 || st.NumDeviceFree != 1 || st.NumDeviceAlloc != 3 {
		t.Errorf("num_sync_all_streams %d num_device_free %d num_device_alloc %d",
			st.NumSyncAllStreams, st.NumDeviceFree, st.NumDeviceAlloc)
	}
}

// free with stream uses: the block stays active_pending_free until its
// events complete (process_events) or empty_cache synchronizes.
func TestDeferredFree(t *testing.T) {
	a := New(DefaultConfig(), Options{Record: true})
	p, _ := a.Malloc(3*MiB, 0)
	a.FreeRequested(p)
	st := a.Stats()
	if st.AllocatedBytes[PoolAll].Current != 0 || st.ActiveBytes[PoolAll].Current != 3*MiB {
		t.Errorf("pending: allocated %d active %d", st.AllocatedBytes[PoolAll].Current, st.ActiveBytes[PoolAll].Current)
	}
	// The pending block cannot be reused.
	q, _ := a.Malloc(3*MiB, 0)
	if q == p {
		t.Error("pending-free block was reused")
	}
	if s := a.Segments()[0].Blocks[0].State; s != snapshot.BlockActivePendingFree {
		t.Errorf("state = %v", s)
	}
	if err := a.FreeCompleted(p); err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().ActiveBytes[PoolAll].Current; got != 3*MiB {
		t.Errorf("active after completion = %d, want 3 MiB (q)", got)
	}
	a.FreeRequested(q)
	a.EmptyCache() // synchronizes: q completes, and the segment is released
	if got := a.Stats().ReservedBytes[PoolAll].Current; got != 0 {
		t.Errorf("reserved after empty_cache = %d", got)
	}
}

// try_allocate_expandable_block / map_block / unmap_block with 2 MiB and
// 20 MiB pages.
func TestExpandableSegments(t *testing.T) {
	cfg, _ := ParseConfig("expandable_segments:True")
	a := New(cfg, Options{Record: true, Capacity: 8 * GiB})
	x, _ := a.Malloc(3*MiB, 0) // maps one 20 MiB page
	s, _ := a.Malloc(1000, 0)  // small pool: one 2 MiB page
	_ = s
	st := a.Stats()
	if st.ReservedBytes[PoolLarge].Current != 20*MiB || st.ReservedBytes[PoolSmall].Current != 2*MiB {
		t.Errorf("reserved large/small = %d/%d", st.ReservedBytes[PoolLarge].Current, st.ReservedBytes[PoolSmall].Current)
	}
	if st.Segment[PoolAll].Current != 0 {
		t.Errorf("segment count = %d, want 0 (maps do not count)", st.Segment[PoolAll].Current)
	}
	// 25 MiB does not fit the 17 MiB free tail: one more page is mapped
	// right after it and merged, so the block starts at x + 3 MiB.
	y, _ := a.Malloc(25*MiB, 0)
	if y != x+3*MiB {
		t.Errorf("25 MiB at %#x, want %#x", y, x+3*MiB)
	}
	if got := a.Stats().ReservedBytes[PoolLarge].Current; got != 40*MiB {
		t.Errorf("reserved large = %d, want 40 MiB", got)
	}
	var maps []string
	for _, e := range a.Trace() {
		if e.Action == snapshot.ActionSegmentMap && e.Size == 20*MiB {
			maps = append(maps, fmt.Sprintf("+%d", (e.Addr-x)/MiB))
		}
	}
	if fmt.Sprint(maps) != "[+0 +20]" {
		t.Errorf("large segment_map offsets (MiB) = %v, want [+0 +20]", maps)
	}
	// Free y: 37 MiB free from x+3 MiB; empty_cache unmaps only the whole
	// free page (the second one); the first page keeps x.
	a.Free(y)
	a.EmptyCache()
	if got := a.Stats().ReservedBytes[PoolLarge].Current; got != 20*MiB {
		t.Errorf("reserved large after empty_cache = %d, want 20 MiB", got)
	}
	last := a.Trace()[len(a.Trace())-1]
	if last.Action != snapshot.ActionSegmentUnmap || last.Addr != x+20*MiB || last.Size != 20*MiB {
		t.Errorf("last event %v %#x %d, want segment_unmap of the second page", last.Action, last.Addr, last.Size)
	}
	// Expandable mode splits large blocks down to 512-byte remainders.
	if got := a.Segments(); len(got) != 2 {
		t.Errorf("segments = %d, want 2 mapped runs (small and large)", len(got))
	}
}

// malloc's retry: release_cached_blocks then alloc_block(isRetry).
func TestOOMRetryAndMessage(t *testing.T) {
	a := New(DefaultConfig(), Options{Record: true, Capacity: 100 * MiB})
	p, _ := a.Malloc(60*MiB, 0)
	a.Free(p)
	// 70 MiB does not fit next to the cached 60 MiB: release it and retry.
	if _, err := a.Malloc(70*MiB, 0); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if st.NumAllocRetries != 1 || st.NumDeviceFree != 1 {
		t.Errorf("retries %d device frees %d, want 1 1", st.NumAllocRetries, st.NumDeviceFree)
	}
	_, err := a.Malloc(40*MiB, 0)
	oom, ok := err.(*OOMError)
	if !ok {
		t.Fatalf("want *OOMError, got %v", err)
	}
	want := "CUDA out of memory. Tried to allocate 40.00 MiB. GPU 0 has a total capacity of 100.00 MiB of which 30.00 MiB is free. " +
		"Of the allocated memory 70.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated."
	if !strings.HasPrefix(oom.Error(), want) {
		t.Errorf("message:\n%s\nwant prefix\n%s", oom.Error(), want)
	}
	last := a.Trace()[len(a.Trace())-1]
	if last.Action != snapshot.ActionOOM || last.Addr != 30*MiB || last.Size != 40*MiB {
		t.Errorf("oom event %v device_free %d size %d", last.Action, last.Addr, last.Size)
	}
	if a.Stats().NumOOMs != 1 {
		t.Error("num_ooms != 1")
	}
}

// garbage_collect_cached_blocks with a memory fraction.
func TestGarbageCollection(t *testing.T) {
	cfg, _ := ParseConfig("garbage_collection_threshold:0.5")
	a := New(cfg, Options{Record: true, Capacity: 1 * GiB, MemoryFraction: 0.5})
	x, _ := a.Malloc(200*MiB, 0)
	a.Free(x)
	y, _ := a.Malloc(300*MiB, 0) // 500 MiB reserved, allowed 512 MiB
	a.Free(y)
	// 400 MiB: no cached block fits; 500 MiB > 0.5*512 MiB so GC frees the
	// unsplit cached blocks, oldest first, until 244 MiB are reclaimed
	// (both go: the first pass frees the 200 MiB one only).
	if _, err := a.Malloc(400*MiB, 0); err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, e := range a.Trace() {
		if e.Action.IsSegmentAction() {
			evs = append(evs, fmt.Sprintf("%v:%d", e.Action, e.Size/MiB))
		}
	}
	want := "[segment_alloc:200 segment_alloc:300 segment_free:200 segment_free:300 segment_alloc:400]"
	if fmt.Sprint(evs) != want {
		t.Errorf("segment events %v, want %s", evs, want)
	}
	// Without a fraction the threshold does nothing.
	b := New(cfg, Options{Capacity: 1 * GiB})
	x, _ = b.Malloc(200*MiB, 0)
	b.Free(x)
	b.Malloc(300*MiB, 0)
	if got := b.Stats().NumDeviceFree; got != 0 {
		t.Errorf("GC ran without a memory fraction: %d frees", got)
	}
	// alloc_block refuses to exceed the fraction even with free device memory.
	c := New(DefaultConfig(), Options{Capacity: 1 * GiB, MemoryFraction: 0.25})
	if _, err := c.Malloc(300*MiB, 0); err == nil {
		t.Error("300 MiB succeeded with a 256 MiB allowance")
	} else if !strings.Contains(err.Error(), "256.00 MiB allowed; ") {
		t.Errorf("message lacks the allowance: %v", err)
	}
}

func TestStatKeys(t *testing.T) {
	keys := StatKeys()
	if len(keys) != 122 {
		t.Fatalf("%d keys, want 122", len(keys))
	}
	for _, k := range []string{"allocated_bytes.all.current", "active.small_pool.peak", "inactive_split_bytes.large_pool.freed",
		"requested_bytes.all.allocated", "oversize_allocations.peak", "oversize_segments.current", "num_alloc_retries",
		"num_ooms", "max_split_size", "num_sync_all_streams", "num_device_alloc", "num_device_free", "segment.large_pool.current"} {
		found := false
		for _, have := range keys {
			found = found || have == k
		}
		if !found {
			t.Errorf("missing key %s", k)
		}
	}
	a := New(DefaultConfig(), Options{})
	st := a.Stats()
	if st.Map()["max_split_size"] != -1 {
		t.Error("max_split_size must be -1 when unlimited")
	}
}
