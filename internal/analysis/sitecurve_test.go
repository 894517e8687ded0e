package analysis

import (
	"fmt"
	"testing"
)

// TestSiteCurve: on liveSnap, where each site's live bytes are known
// after every event, the curve has them, one event a bucket and fewer
// buckets than events (each bucket's highest).
func TestSiteCurve(t *testing.T) {
	d := liveSnap(t)
	for _, tt := range []struct {
		frames  []string
		depth   int
		buckets int
		want    []uint64 // MiB
		first   []int32
		allocs  int
	}{
		// b and c share their innermost user frame; c is freed by e3.
		{[]string{"model.py:5:forward"}, 1, 5, []uint64{2, 5, 5, 2, 2}, []int32{0, 1, 2, 3, 4}, 2},
		{[]string{"model.py:5:forward"}, 1, 2, []uint64{5, 5}, []int32{0, 2}, 2},
		{[]string{"model.py:5:forward"}, 1, 99, []uint64{2, 5, 5, 2, 2}, []int32{0, 1, 2, 3, 4}, 2},
		{[]string{"model.py:5:forward", "train.py:2:main"}, 2, 5, []uint64{0, 3, 3, 0, 0}, []int32{0, 1, 2, 3, 4}, 1},
		{[]string{"model.py:9:loss"}, 1, 5, []uint64{0, 0, 1, 1, 1}, []int32{0, 1, 2, 3, 4}, 1},
		// a, from before the trace, without a stack.
		{[]string{}, 3, 1, []uint64{4}, []int32{0}, 1},
		{[]string{"nowhere.py:1:f"}, 3, 5, []uint64{0, 0, 0, 0, 0}, []int32{0, 1, 2, 3, 4}, 0},
	} {
		c := d.SiteCurve(tt.frames, tt.depth, tt.buckets)
		want := make([]uint64, len(tt.want))
		for i, v := range tt.want {
			want[i] = v * mb
		}
		if fmt.Sprint(c.BytesMax) != fmt.Sprint(want) || fmt.Sprint(c.FirstEvent) != fmt.Sprint(tt.first) || c.Allocations != tt.allocs || c.Events != 5 {
			t.Errorf("%q depth %d in %d buckets: %v from %v, %d allocations; want %v from %v, %d", tt.frames, tt.depth, tt.buckets,
				c.BytesMax, c.FirstEvent, c.Allocations, want, tt.first, tt.allocs)
		}
	}
}

// TestCorpusSiteCurveMatchesDiff: on two real runs, each listed site's
// curve, one event a bucket, has at each run's moment the live bytes the
// diff gives it.
func TestCorpusSiteCurveMatchesDiff(t *testing.T) {
	a := NewDevice(openReal(t, "cs336-kkaitlyn111__memory_ctx128_forward.pickle"), 0)
	b := NewDevice(openReal(t, "cs336-kkaitlyn111__memory_ctx256_forward.pickle"), 0)
	for _, at := range []string{"peak", "end", "e1000"} {
		ra, err := a.RunAt(at)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := b.RunAt(at)
		if err != nil {
			t.Fatal(err)
		}
		diff := NewDiff(ra, rb, DefaultDiffDepth)
		for _, s := range diff.Sites[:min(len(diff.Sites), 25)] {
			for _, side := range []struct {
				d     *Device
				ev    int
				bytes uint64
			}{{a, ra.Moment.Event, s.ABytes}, {b, rb.Moment.Event, s.BBytes}} {
				c := side.d.SiteCurve(s.Frames, DefaultDiffDepth, 1<<30)
				if len(c.BytesMax) != c.Events || side.ev < 0 || c.BytesMax[side.ev] != side.bytes {
					t.Errorf("%s at %s, site %q: curve %d buckets of %d events; at event %d: %v, diff %d",
						side.d.S.Source.Name, at, s.Frames, len(c.BytesMax), c.Events, side.ev, c.BytesMax[min(max(side.ev, 0), len(c.BytesMax)-1)], side.bytes)
				}
			}
		}
	}
}
