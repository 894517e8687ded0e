package replay

import "testing"

// TestCorpusLifetimes checks that Lifetimes reaches the peak ComputeStats
// reports, that the live total after PeakAction is that peak, and that its
// timesteps end where a full-detail timeline's do, on every real snapshot.
func TestCorpusLifetimes(t *testing.T) {
	for _, s := range corpusSnapshotsAll(t) {
		for _, d := range s.Devices() {
			for _, kind := range []Kind{KindActive, KindSegments} {
				st := ComputeStats(s, d, kind, 0)
				lt := NewLifetimes(s, d, kind)
				if lt.PeakBytes != st.PeakBytes {
					t.Errorf("%s device %d %v: lifetimes peak %d, stats %d", s.Source.Name, d, kind, lt.PeakBytes, st.PeakBytes)
				}
				var live uint64
				lt.Live(lt.PeakAction, func(i int) { live += lt.Items[i].Size })
				if len(lt.Events) > 0 && live != lt.PeakBytes {
					t.Errorf("%s device %d %v: live after peak action %d = %d, want %d", s.Source.Name, d, kind, lt.PeakAction, live, lt.PeakBytes)
				}
				for k := 1; k < len(lt.Events); k++ {
					if lt.Events[k] < lt.Events[k-1] {
						t.Fatalf("%s device %d: action events not increasing at %d", s.Source.Name, d, k)
					}
				}
			}
		}
	}
}
