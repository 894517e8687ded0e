package replay

import (
	"math"
	"math/rand"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

func TestPoolEnvelope(t *testing.T) {
	evs := []ev{{aAlloc, 0x100000, 100}, {aAlloc, 0x5000, 50}, {aAlloc, 0x100200, 300}}
	evs = append(evs, free(0x100000, 100)...)
	segs := []snapshot.Segment{
		{Address: 0x1000, TotalSize: 4096, FirstBlock: 0, NumBlocks: 1, HasPoolID: true},
		{Address: 0x100000, TotalSize: 2 << 20, FirstBlock: 1, NumBlocks: 1, HasPoolID: true, PoolID: [2]int64{1, 5}},
	}
	blocks := []snapshot.Block{
		{Addr: 0x1000, Size: 4096, RequestedSize: 1000, State: snapshot.BlockActiveAllocated},
		{Addr: 0x100000, Size: 2 << 20, State: snapshot.BlockInactive},
	}
	s := mkSnapshot(evs, segs, blocks)
	st := ComputeStats(s, 0, KindActiveWithPools, DefaultMaxEntries)
	if st != (TimelineCounts{PeakBytes: 2098202, Elements: 4, Timesteps: 10}) {
		t.Fatalf("stats %+v", st)
	}
	tl := NewTimeline(s, 0, KindActiveWithPools)
	if tl.Len() != 4 || tl.Envelopes() != 1 || tl.Timesteps() != 10 || tl.PeakBytes() != 2098202 {
		t.Fatalf("len %d envelopes %d timesteps %d peak %d", tl.Len(), tl.Envelopes(), tl.Timesteps(), tl.PeakBytes())
	}
	if got := tl.Offset(2, 8.5); got != 1050 {
		t.Errorf("stripe offset during slide %v, want 1050", got)
	}
	env := tl.Element(4)
	if !env.Envelope || env.Addr != "pool:1,5,s0" || env.Size != 2<<20 {
		t.Errorf("envelope %+v", env)
	}
	if got := tl.Context(4); got != "Private Pool (1,5,s0): capacity 2.0MiB (2097152 bytes)" {
		t.Errorf("envelope context %q", got)
	}
	for _, c := range []struct {
		x, y float64
		want int
	}{{5.5, 1050, 0}, {5.5, 1150, 2}, {5.5, 5000, 4}, {5.5, 2098160, 1}, {5.5, 500, 3}} {
		if got, ok := tl.HitTest(c.x, c.y); !ok || got != c.want {
			t.Errorf("HitTest(%v, %v) = %d %v, want %d", c.x, c.y, got, ok, c.want)
		}
	}
	f := tl.Query(0, 10, 100, 100, 0, 2098202)
	found := map[int32]bool{}
	for _, id := range f.IDs {
		found[id] = true
	}
	if !found[4] {
		t.Errorf("envelope not drawn: %v", f.IDs)
	}
}

// TestPoolReplayWithoutPools runs the step-by-step pool replay on traces
// without private pools: it must reproduce the default view's polygons.
func TestPoolReplayWithoutPools(t *testing.T) {
	r := rand.New(rand.NewSource(6))
	for iter := 0; iter < 20; iter++ {
		s := randomSnapshot(r, 50+r.Intn(300))
		pr := runPoolReplay(s, 0, 0, true)
		nv := naiveTimeline(s, 0, false)
		for i := range nv.ts {
			got := pr.ser[i]
			if len(got.ts) != len(nv.ts[i]) {
				t.Fatalf("iter %d elem %d: %d points, naive %d", iter, i, len(got.ts), len(nv.ts[i]))
			}
			for k := range got.ts {
				if float64(got.ts[k]) != nv.ts[i][k] || float64(got.offs[k]) != nv.offs[i][k] {
					t.Fatalf("iter %d elem %d point %d differs", iter, i, k)
				}
			}
		}
		for _, me := range []int{0, 10, 50} {
			a := runPoolReplay(s, 0, me, false)
			b := computeStats(s, 0, KindActive, me)
			if got := (TimelineCounts{a.peak, len(a.l.elems), a.timesteps}); got != b {
				t.Fatalf("iter %d max_entries %d: pool replay %+v, default %+v", iter, me, got, b)
			}
		}
	}
}

// TestCorpusPools builds the pools view of the real snapshots that have
// private pools and checks it against the default view where they must
// agree.
func TestCorpusPools(t *testing.T) {
	found := false
	for _, s := range corpusSnapshotsAll(t) {
		for _, d := range s.Devices() {
			if !hasPrivatePools(s, d) {
				continue
			}
			found = true
			tl := NewTimeline(s, d, KindActiveWithPools)
			st := ComputeStats(s, d, KindActiveWithPools, DefaultMaxEntries)
			act := ComputeStats(s, d, KindActive, DefaultMaxEntries)
			if tl.PeakBytes() != st.PeakBytes || tl.Len() != act.Elements || tl.Envelopes() == 0 {
				t.Errorf("dev %d: timeline peak %d len %d envelopes %d, stats %+v", d, tl.PeakBytes(), tl.Len(), tl.Envelopes(), st)
			}
			if st.PeakBytes < act.PeakBytes {
				t.Errorf("dev %d: pool view peak %d below active peak %d", d, st.PeakBytes, act.PeakBytes)
			}
			f := tl.Query(0, math.Max(1, float64(tl.Timesteps())), 200, 100, 0, float64(tl.PeakBytes()))
			if len(f.IDs) == 0 {
				t.Errorf("dev %d: nothing drawn", d)
			}
		}
	}
	if !found {
		corpus.Missing(t, "no real snapshot with private pools")
	}
}
