package alloc

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestReplayCurveBuckets: every event lands in the bucket whose bounds
// hold it, for traces shorter and longer than the buckets asked for, and
// a bucket keeps the highest values marked in it.
func TestReplayCurveBuckets(t *testing.T) {
	for n := 0; n <= 40; n++ {
		for buckets := 1; buckets <= 45; buckets++ {
			c := newReplayCurve(n, buckets)
			if want := min(n, buckets); len(c.Reserved) != want || len(c.Recorded) != want || len(c.Bounds) != max(want+1, 1) {
				t.Fatalf("n %d, %d buckets: %d/%d values, %d bounds", n, buckets, len(c.Reserved), len(c.Recorded), len(c.Bounds))
			}
			if n == 0 {
				c.mark(0, 1, 1) // nothing to mark
				continue
			}
			if c.Bounds[0] != 0 || int(c.Bounds[len(c.Bounds)-1]) != n {
				t.Fatalf("n %d, %d buckets: bounds %v", n, buckets, c.Bounds)
			}
			for i := 0; i < n; i++ {
				c.mark(i, uint64(i+1), uint64(2*i+2))
			}
			for b := range c.Reserved {
				last := int(c.Bounds[b+1]) - 1 // values grow: the last event's
				if c.Bounds[b+1] <= c.Bounds[b] || c.Reserved[b] != uint64(last+1) || c.Recorded[b] != uint64(2*last+2) {
					t.Fatalf("n %d, %d buckets: bucket %d [%d, %d) holds %d/%d", n, buckets, b, c.Bounds[b], c.Bounds[b+1], c.Reserved[b], c.Recorded[b])
				}
			}
			c.mark(n, 1<<40, 1<<40) // past the trace: ignored
			c.mark(0, 0, 0)         // lower: kept higher
			if c.Reserved[len(c.Reserved)-1] == 1<<40 || c.Reserved[0] == 0 {
				t.Fatalf("n %d, %d buckets: %v", n, buckets, c.Reserved)
			}
		}
	}
}

// TestCorpusSweepCurves: on every real trace, each setting's curve of a
// sweep (from empty where the sweep chooses it) reaches the setting's
// peak reserved and never passes it, and the curves are the sweep's rows
// in their order.
func TestCorpusSweepCurves(t *testing.T) {
	rows := 0
	defer func() { t.Logf("%d settings' curves", rows) }()
	for _, f := range corpus.Files(t) {
		s, err := snapshot.Open(f, nil)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if len(Replayable(s)) == 0 || s.Unavailable("segments") != "" {
			continue
		}
		r, err := SimSnapshot(s, filepath.Base(f), SimOptions{Device: -1, Sweep: true, Curve: 64})
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		for _, d := range r.Devices {
			c := d.Curve
			if c == nil || len(c.Replayed) != len(d.Sweep) || len(c.FirstEvent) != min(64, d.Events) || len(c.RecordedMax) != len(c.FirstEvent) {
				t.Errorf("%s device %d: curve %+v for %d rows", filepath.Base(f), d.Device, c, len(d.Sweep))
				continue
			}
			for k, row := range d.Sweep {
				rows++
				got := c.Replayed[k]
				if got.Config != row.Config || len(got.ReservedMax) != len(c.FirstEvent) || slices.Max(got.ReservedMax) != row.PeakReservedBytes {
					t.Errorf("%s device %d row %d: curve %q highest %d, the row %q peak %d", filepath.Base(f), d.Device, k,
						got.Config, slices.Max(got.ReservedMax), row.Config, row.PeakReservedBytes)
				}
			}
		}
	}
}
