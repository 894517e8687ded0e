package replay

import (
	"math/rand"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/snapshot"
)

func TestCurves(t *testing.T) {
	evs := []ev{
		{snapshot.ActionSegmentAlloc, 0x100000, 2 << 20},
		{aAlloc, 0x100000, 1000},
		{aAlloc, 0x100400, 3000},
		{aFreeR, 0x100400, 3000},
		{aFreeC, 0x100400, 3000},
	}
	segs := []snapshot.Segment{{Address: 0x100000, TotalSize: 2 << 20, FirstBlock: 0, NumBlocks: 2}}
	blocks := []snapshot.Block{
		{Addr: 0x100000, Size: 1024, RequestedSize: 1000, State: snapshot.BlockActiveAllocated},
		{Addr: 0x100400, Size: 2<<20 - 1024, State: snapshot.BlockInactive},
	}
	c := NewCurves(mkSnapshot(evs, segs, blocks), 0)
	const mib2 = 2 << 20
	cases := []struct {
		i    int
		want Totals
	}{
		{-1, Totals{}},
		{0, Totals{0, mib2, 0, 0}},
		{2, Totals{4096, mib2, 4096, 4000}},
		{3, Totals{1024, mib2, 4096, 4000}},
		{4, Totals{1024, mib2, 1024, 1000}},
	}
	for _, cs := range cases {
		if got := c.At(cs.i); got != cs.want {
			t.Errorf("At(%d) = %+v, want %+v", cs.i, got, cs.want)
		}
	}
	d := c.Downsample(0, 5, 2)
	if !reflect.DeepEqual(d.Bounds, []int32{0, 2, 5}) ||
		!reflect.DeepEqual(d.AllocatedMin, []uint64{0, 1024}) || !reflect.DeepEqual(d.AllocatedMax, []uint64{1024, 4096}) ||
		!reflect.DeepEqual(d.ReservedMin, []uint64{mib2, mib2}) || !reflect.DeepEqual(d.RequestedMax, []uint64{1000, 4000}) {
		t.Errorf("Downsample = %+v", d)
	}
}

// TestRangeMinMax checks the block index against a scan.
func TestRangeMinMax(t *testing.T) {
	vals := make([]uint64, 1000)
	for i := range vals {
		vals[i] = uint64((i * 7919) % 1013)
	}
	r := newRangeMinMax(vals)
	for i0 := 0; i0 < len(vals); i0 += 37 {
		for i1 := i0 + 1; i1 <= len(vals); i1 += 53 {
			mn, mx := ^uint64(0), uint64(0)
			for _, v := range vals[i0:i1] {
				mn, mx = min(mn, v), max(mx, v)
			}
			if gmn, gmx := r.query(i0, i1); gmn != mn || gmx != mx {
				t.Fatalf("query(%d,%d) = %d,%d want %d,%d", i0, i1, gmn, gmx, mn, mx)
			}
		}
	}
}

// naiveCurves is the totals after every event, one array per counter, as
// the curves were first computed: the reference for the compact Curves.
func naiveCurves(s *snapshot.Snapshot, device int) *naiveCurveArrays {
	c := &naiveCurveArrays{}
	var events []snapshot.Event
	if device >= 0 && device < len(s.Traces) {
		events = s.Traces[device].Events
	}
	n := len(events)
	divs := s.AllocatorSettings.Divisions()

	// Rounded size of each alloc: the dump block's size when the
	// allocation is still live at the dump, else round_size(requested).
	dumpSize := map[uint64]uint64{}
	var end Totals
	for si := range s.Segments {
		seg := &s.Segments[si]
		if int(seg.Device) != device {
			continue
		}
		end.Reserved += seg.TotalSize
		for bi := seg.FirstBlock; bi < seg.FirstBlock+seg.NumBlocks; bi++ {
			b := &s.Blocks[bi]
			if b.State == snapshot.BlockInactive {
				continue
			}
			req := s.Requested(b)
			end.Active += b.Size
			end.Requested += req
			if b.State == snapshot.BlockActiveAllocated {
				end.Allocated += b.Size
			}
			dumpSize[b.Addr] = b.Size
		}
	}
	rounded := make([]uint64, n) // per alloc event
	liveAt := map[uint64]int{}   // addr -> last alloc event index still live
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			rounded[i] = rules.RoundSize(e.Size, divs)
			liveAt[e.Addr] = i
		case snapshot.ActionFreeCompleted:
			delete(liveAt, e.Addr)
		}
	}
	for addr, i := range liveAt {
		if sz, ok := dumpSize[addr]; ok {
			rounded[i] = sz
		}
	}
	// Totals forward from zero (as two's complement, since the start is
	// not known yet); the rounded size of a free is that of the alloc it
	// ends (or round_size of its size when the alloc is not in the trace).
	c.allocated = make([]uint64, n)
	c.reserved = make([]uint64, n)
	c.active = make([]uint64, n)
	c.requested = make([]uint64, n)
	allocSize := make(map[uint64]uint64, len(liveAt))
	var cur [4]int64 // allocated, reserved, active, requested
	for i := range events {
		e := &events[i]
		switch e.Action {
		case snapshot.ActionAlloc:
			allocSize[e.Addr] = rounded[i]
			cur[0] += int64(rounded[i])
			cur[2] += int64(rounded[i])
			cur[3] += int64(e.Size)
		case snapshot.ActionFreeRequested:
			r, ok := allocSize[e.Addr]
			if !ok {
				r = rules.RoundSize(e.Size, divs)
			}
			cur[0] -= int64(r)
		case snapshot.ActionFreeCompleted:
			r, ok := allocSize[e.Addr]
			if !ok {
				r = rules.RoundSize(e.Size, divs)
			}
			delete(allocSize, e.Addr)
			cur[2] -= int64(r)
			cur[3] -= int64(e.Size)
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			cur[1] += int64(e.Size)
		case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
			cur[1] -= int64(e.Size)
		}
		c.allocated[i], c.reserved[i] = uint64(cur[0]), uint64(cur[1])
		c.active[i], c.requested[i] = uint64(cur[2]), uint64(cur[3])
	}
	// The start is the dump's totals minus the trace's net change.
	start := [4]int64{
		int64(end.Allocated) - cur[0], int64(end.Reserved) - cur[1],
		int64(end.Active) - cur[2], int64(end.Requested) - cur[3],
	}
	c.init = Totals{clamp(start[0]), clamp(start[1]), clamp(start[2]), clamp(start[3])}
	for k, arr := range [4][]uint64{c.allocated, c.reserved, c.active, c.requested} {
		for i, v := range arr {
			arr[i] = clamp(int64(v) + start[k])
		}
	}
	return c
}

type naiveCurveArrays struct {
	init                                   Totals
	allocated, reserved, active, requested []uint64
}

// checkCurvesAgainstNaive compares At and Downsample of the compact curves
// with per-event arrays over every event and random ranges.
func checkCurvesAgainstNaive(t *testing.T, name string, s *snapshot.Snapshot, dev int, r *rand.Rand) {
	t.Helper()
	c, want := NewCurves(s, dev), naiveCurves(s, dev)
	n := len(want.allocated)
	if c.Len() != n || c.At(-1) != want.init {
		t.Fatalf("%s dev %d: Len %d At(-1) %+v, want %d %+v", name, dev, c.Len(), c.At(-1), n, want.init)
	}
	for i := 0; i < n; i++ {
		w := Totals{want.allocated[i], want.reserved[i], want.active[i], want.requested[i]}
		if got := c.At(i); got != w {
			t.Fatalf("%s dev %d: At(%d) = %+v, want %+v", name, dev, i, got, w)
		}
	}
	arrays := [4][]uint64{want.allocated, want.reserved, want.active, want.requested}
	for k := 0; k < 20 && n > 0; k++ {
		i0 := r.Intn(n)
		i1 := i0 + 1 + r.Intn(n-i0)
		d := c.Downsample(i0, i1, 1+r.Intn(50))
		mins := [4][]uint64{d.AllocatedMin, d.ReservedMin, d.ActiveMin, d.RequestedMin}
		maxs := [4][]uint64{d.AllocatedMax, d.ReservedMax, d.ActiveMax, d.RequestedMax}
		for b := 0; b < d.Buckets; b++ {
			for q := range 4 {
				mn, mx := ^uint64(0), uint64(0)
				for _, v := range arrays[q][d.Bounds[b]:d.Bounds[b+1]] {
					mn, mx = min(mn, v), max(mx, v)
				}
				if mins[q][b] != mn || maxs[q][b] != mx {
					t.Fatalf("%s dev %d: Downsample(%d,%d) bucket %d counter %d = %d..%d, want %d..%d",
						name, dev, i0, i1, b, q, mins[q][b], maxs[q][b], mn, mx)
				}
			}
		}
	}
}

func TestCurvesMatchNaive(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for iter := 0; iter < 10; iter++ {
		s := randomSnapshot(r, 500+r.Intn(5000))
		checkCurvesAgainstNaive(t, "random", s, 0, r)
	}
}

func TestCorpusCurvesMatchNaive(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	for name, s := range corpusSnapshots(t, 100) {
		for _, d := range s.Devices() {
			checkCurvesAgainstNaive(t, name, s, d, r)
		}
	}
}

// TestCurvesPause checks that NewCurvesPaused calls its pause about every
// 65,536 events of both passes over the trace and does not go on while it
// blocks (a server parks the build so while it answers a zoom), and that
// the curves are NewCurves's.
func TestCurvesPause(t *testing.T) {
	s := trainingTrace(300_000, 7)
	n := len(s.Traces[0].Events)
	var calls atomic.Int32
	hold := make(chan struct{})
	done := make(chan *Curves)
	go func() {
		done <- NewCurvesPaused(s, 0, func() {
			calls.Add(1)
			<-hold
		})
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("the build went on while its pause blocked")
	default:
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("%d pauses while held, want 1", c)
	}
	close(hold)
	got := <-done
	if want := 2 * ((n + pauseEvery) / (pauseEvery + 1)); int(calls.Load()) < want {
		t.Fatalf("%d pauses over %d events, want at least %d (one every %d, each pass)", calls.Load(), n, want, pauseEvery+1)
	}
	if want := NewCurves(s, 0); !reflect.DeepEqual(got, want) {
		t.Fatal("the paused build's curves differ from NewCurves's")
	}
}
