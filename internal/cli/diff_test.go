package cli

import (
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
)

// TestDiffContextLengths pins the diff of the same model's full training
// step at context lengths 128, 256 and 512: at the dump parameters and
// optimizer state do not change (within 1%); at the peaks the longer
// context has the higher peak and more activations.
func TestDiffContextLengths(t *testing.T) {
	file := func(ctx string) string {
		return corpus.File(t, "cs336-kkaitlyn111__memory_files_memory_"+ctx+"_fullstep_.pickle")
	}
	env := &Env{}
	for _, pair := range [][2]string{{"ctx128", "ctx256"}, {"ctx256", "ctx512"}, {"ctx128", "ctx512"}} {
		for _, at := range []string{"end", "peak"} {
			a, err := liveProfile(env, file(pair[0]), -1, at)
			if err != nil {
				t.Fatal(err)
			}
			b, err := liveProfile(env, file(pair[1]), -1, at)
			if err != nil {
				t.Fatal(err)
			}
			r := analysis.NewDiff(a, b, 2)
			name := pair[0] + "->" + pair[1] + " at " + at
			// The sites split each run's live bytes and allocations.
			var liveA, liveB uint64
			var allocsA, allocsB int
			for _, st := range r.Sites {
				liveA, liveB, allocsA, allocsB = liveA+st.ABytes, liveB+st.BBytes, allocsA+st.AAllocs, allocsB+st.BAllocs
			}
			if liveA != r.A.LiveBytes || liveB != r.B.LiveBytes || allocsA != r.A.Allocations || allocsB != r.B.Allocations {
				t.Errorf("%s: sites sum to %d/%d bytes and %d/%d allocations, runs have %d/%d and %d/%d", name,
					liveA, liveB, allocsA, allocsB, r.A.LiveBytes, r.B.LiveBytes, r.A.Allocations, r.B.Allocations)
			}
			if at == "end" {
				for _, c := range []string{"parameter", "optimizer_state"} {
					d, base := r.CategoriesDelta[c], r.A.Categories[c]
					if base == 0 || abs(d)*100 > int64(base) {
						t.Errorf("%s: %s %d -> %d bytes, delta %d is not within 1%% of zero", name, c, base, r.B.Categories[c], d)
					}
				}
				continue
			}
			if r.B.PeakAllocatedBytes <= r.A.PeakAllocatedBytes || r.CategoriesDelta["activation"] <= 0 {
				t.Errorf("%s: peak %d -> %d, activation delta %d; want both to grow", name,
					r.A.PeakAllocatedBytes, r.B.PeakAllocatedBytes, r.CategoriesDelta["activation"])
			}
			sum := int64(0)
			for _, v := range r.CategoriesDelta {
				sum += v
			}
			if sum != int64(r.B.LiveBytes)-int64(r.A.LiveBytes) {
				t.Errorf("%s: category deltas sum to %d, live delta %d", name, sum, int64(r.B.LiveBytes)-int64(r.A.LiveBytes))
			}
		}
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
