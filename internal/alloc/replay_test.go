package alloc

import (
	"math/rand"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// randomWorkload drives a model with a reproducible mix of small and large
// requests on two streams, deferred frees and empty_cache calls.
func randomWorkload(t *testing.T, cfg Config, seed int64, n int) *Allocator {
	t.Helper()
	a := New(cfg, Options{Record: true})
	rng := rand.New(rand.NewSource(seed))
	var live []uint64
	var pend []uint64
	for i := 0; i < n; i++ {
		switch x := rng.Intn(100); {
		case x < 50 || len(live) == 0:
			var size uint64
			switch rng.Intn(4) {
			case 0:
				size = uint64(rng.Intn(4096) + 1)
			case 1:
				size = uint64(rng.Intn(1<<20) + 1)
			case 2:
				size = uint64(rng.Intn(12<<20) + 1)
			default:
				size = uint64(rng.Intn(80<<20) + 1)
			}
			stream := int64(0)
			if rng.Intn(5) == 0 {
				stream = 0x5a5a00
			}
			p, err := a.Malloc(size, stream)
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, p)
		case x < 92:
			k := rng.Intn(len(live))
			p := live[k]
			live = append(live[:k], live[k+1:]...)
			if rng.Intn(8) == 0 {
				if err := a.FreeRequested(p); err != nil {
					t.Fatal(err)
				}
				pend = append(pend, p)
			} else if err := a.Free(p); err != nil {
				t.Fatal(err)
			}
		case x < 97:
			if len(pend) > 0 {
				p := pend[0]
				pend = pend[1:]
				if b := a.active[p]; b != nil && b.eventCount > 0 {
					if err := a.FreeCompleted(p); err != nil {
						t.Fatal(err)
					}
				}
			}
		default:
			a.EmptyCache()
			pend = nil
		}
	}
	return a
}

// TestReplaySelf replays the model's own traces, whole and with the start
// cut off (as a full ring buffer loses it): the replay must predict every
// address and segment and end on the same layout.
func TestReplaySelf(t *testing.T) {
	cfgs := []string{"", "roundup_power2_divisions:4", "max_split_size_mb:40", "expandable_segments:True",
		"expandable_segments:True,large_segment_size_mb:40"}
	for _, cs := range cfgs {
		cfg, err := ParseConfig(cs)
		if err != nil {
			t.Fatal(err)
		}
		for seed := int64(1); seed <= 4; seed++ {
			a := randomWorkload(t, cfg, seed, 3000)
			snap := a.Snapshot()
			full := len(snap.Traces[0].Events)
			cuts := []int{0, full / 3, full * 2 / 3}
			if cfg.MaxSplitSize != Unlimited {
				// A block live at the cut that was freed later is known only
				// by its requested size; when it is followed by free space
				// its real size may be up to 1 MiB more (an unsplit
				// remainder) and nothing in the trace tells. The random
				// max_split workload hits that often, so only full traces.
				cuts = cuts[:1]
			}
			for _, cut := range cuts {
				// Cut at an alloc so that no event pair is split.
				ev := snap.Traces[0].Events
				// Cut at an alloc that does not need a new segment: a cut
				// between segment_alloc and its alloc leaves a fresh
				// segment the replay cannot tell from a cached one.
				for cut > 0 && cut < len(ev) && (ev[cut].Action != snapshot.ActionAlloc ||
					ev[cut-1].Action == snapshot.ActionSegmentAlloc || ev[cut-1].Action == snapshot.ActionSegmentMap) {
					cut++
				}
				s2 := *snap
				s2.Traces = append(s2.Traces[:0:0], snap.Traces...)
				s2.Traces[0].Events = ev[cut:]
				r, err := Simulate(&s2, 0, ReplayOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.AllocAddrsMatched != r.AllocAddrsTotal || r.SegEventsMatched != r.SegEventsTotal || !r.FinalStateMatches {
					t.Errorf("config %q seed %d cut %d: allocs %d/%d segments %d/%d final %v; %v",
						cs, seed, cut, r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal,
						r.FinalStateMatches, r.Mismatches)
				}
			}
		}
	}
}
