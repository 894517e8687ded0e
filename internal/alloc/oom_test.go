package alloc_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/synth"
)

// TestWhatIfOOMOnSynth runs synth runs that stop at an OOM: the capacity
// the OOM implies is the synth device's, the recorded settings OOM again
// at the recorded event there, and 1 GiB more serves the request.
func TestWhatIfOOMOnSynth(t *testing.T) {
	const capacity = 3 << 30
	for _, conf := range []string{"", "expandable_segments:True", "max_split_size_mb:128"} {
		t.Run(conf, func(t *testing.T) {
			s, res, err := synth.Generate(synth.Workload{Model: "mlp", Layers: 8, Hidden: 8192}, synth.Options{Config: conf, Capacity: capacity})
			if err != nil || res.OOM == nil {
				t.Fatalf("synth run did not stop at an OOM: %v", err)
			}
			c, err := alloc.ImpliedCapacity(s, 0)
			if err != nil {
				t.Fatal(err)
			}
			if c.Capacity != capacity || c.Event != len(s.Traces[0].Events)-1 || c.DeviceFree != res.OOM.DeviceFree {
				t.Fatalf("implied capacity %+v, want %d at the last event %d with %d free", c, uint64(capacity), len(s.Traces[0].Events)-1, res.OOM.DeviceFree)
			}
			for _, tc := range []struct {
				capacity uint64
				still    bool
			}{{c.Capacity, true}, {c.Capacity + 1<<30, false}} {
				out, err := alloc.WhatIfOOM(s, 0, tc.capacity, c.Event, []string{"recorded", "expandable_segments:True"}, false)
				if err != nil {
					t.Fatal(err)
				}
				o := out[0]
				if o.StillOOM != tc.still {
					t.Errorf("capacity %d: recorded settings StillOOM %v, want %v", tc.capacity, o.StillOOM, tc.still)
				}
				if tc.still && (o.FirstOOM != c.Event || o.FirstOOMSize != c.Size) {
					t.Errorf("capacity %d: first OOM at event %d (%d B), want the recorded one at %d (%d B)", tc.capacity, o.FirstOOM, o.FirstOOMSize, c.Event, c.Size)
				}
				if !tc.still && o.FirstOOM != -1 {
					t.Errorf("capacity %d: model still runs out at event %d", tc.capacity, o.FirstOOM)
				}
			}
		})
	}
}

func TestImpliedCapacityNeedsAnOOM(t *testing.T) {
	s, _, err := synth.Generate(synth.Workload{Model: "mlp", Layers: 2, Hidden: 512, Steps: 1}, synth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alloc.ImpliedCapacity(s, 0); err == nil || !strings.Contains(err.Error(), "no out-of-memory") {
		t.Errorf("got %v, want an error saying the trace has no OOM", err)
	}
	if _, err := alloc.WhatIfOOM(s, 0, 1<<30, 0, []string{"max_split_size_mb:10"}, false); err == nil {
		t.Error("an invalid config was accepted")
	}
}

// TestSynthSeedsReplay is the seed experiment: synth runs under five
// settings and five seeds (each on another device, the last with a
// capacity it runs out of) replay exactly, 25 of 25. Expandable runs sit
// at different bases per seed and device, so a replay that made up its
// reservation addresses would fail.
func TestSynthSeedsReplay(t *testing.T) {
	configs := []string{"", "expandable_segments:True", "max_split_size_mb:128", "roundup_power2_divisions:4",
		"expandable_segments:True,max_split_size_mb:128"}
	bases := map[uint64]string{}
	exactRuns := 0
	for _, conf := range configs {
		for seed := int64(1); seed <= 5; seed++ {
			var capacity uint64
			if seed == 5 {
				capacity = 3 << 30
			}
			dev := int(seed % 4)
			w := synth.Workload{Model: "transformer", Layers: 2, Steps: 2, Seed: seed}
			s, _, err := synth.Generate(w, synth.Options{Config: conf, Device: dev, Capacity: capacity})
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%q seed %d device %d capacity %d", conf, seed, dev, capacity)
			r, err := alloc.Simulate(s, dev, alloc.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.AllocAddrsTotal == 0 || r.AllocAddrsMatched != r.AllocAddrsTotal || r.SegEventsMatched != r.SegEventsTotal ||
				r.ReleasesMatched != r.ReleasesTotal || !r.FinalStateMatches {
				t.Errorf("%s: addresses %d/%d, segments %d/%d, releases %d/%d, final %v: %v", name,
					r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal,
					r.ReleasesMatched, r.ReleasesTotal, r.FinalStateMatches, r.Mismatches)
				continue
			}
			exactRuns++
			if conf == "expandable_segments:True" {
				base := s.Segments[0].Address
				if other, ok := bases[base]; ok {
					t.Errorf("%s: base %#x is also that of %s", name, base, other)
				}
				bases[base] = name
			}
		}
	}
	t.Logf("seed experiment: %d/%d synth runs replayed exactly", exactRuns, len(configs)*5)
}
