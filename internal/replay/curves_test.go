package replay

import (
	"reflect"
	"testing"

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

func TestRoundSize(t *testing.T) {
	four := make([]int64, 16)
	for i := range four {
		four[i] = 4
	}
	cases := []struct {
		n    uint64
		divs []int64
		want uint64
	}{
		{1, nil, 512}, {512, nil, 512}, {1200, nil, 1536}, {1200, four, 1536}, {5000, four, 5120},
		{1 << 20, four, 1 << 20}, {(1 << 20) + 1, four, 1<<20 + 1<<18},
	}
	for _, c := range cases {
		if got := roundSize(c.n, c.divs); got != c.want {
			t.Errorf("roundSize(%d) = %d, want %d", c.n, got, c.want)
		}
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
