package replay

import (
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestPeaksMatchComputeStats: Peaks, which keeps only the totals, gives
// computeStats' peak on every real snapshot and device, for both views.
func TestPeaksMatchComputeStats(t *testing.T) {
	checked := 0
	for _, f := range corpus.Files(t) {
		s, err := snapshot.Open(f, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range s.Devices() {
			active, segs := Peaks(s, d)
			wa := ComputeStats(s, d, KindActive, DefaultMaxEntries).PeakBytes
			ws := ComputeStats(s, d, KindSegments, DefaultMaxEntries).PeakBytes
			if active != wa || segs != ws {
				t.Errorf("%s device %d: Peaks %d, %d; ComputeStats %d, %d", filepath.Base(f), d, active, segs, wa, ws)
			}
			if wa > 0 {
				checked++
			}
		}
	}
	if checked == 0 {
		t.Error("no device with a peak: nothing compared")
	}
}
