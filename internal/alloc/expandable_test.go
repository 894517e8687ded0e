package alloc

import (
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// The fixtures under testdata/expandable are snapshots written by hand
// (addresses derived from CUDACachingAllocator.cpp's rules, step by step
// in testdata/expandable/README.md), not by the model.

// expandableFixture is one device of a fixture with the events it must
// have; the counts keep the test honest if a fixture is edited.
type expandableFixture struct {
	file              string
	dev               int
	allocs, maps, rel int
}

var expandableFixtures = []expandableFixture{
	{"four-devices.json", 0, 11, 7, 1},
	{"four-devices.json", 1, 6, 4, 1},
	{"four-devices.json", 2, 2, 1, 1},
	{"four-devices.json", 3, 5, 5, 1},
}

func openFixture(t *testing.T, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Open(filepath.Join("testdata", "expandable", name), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// exact reports whether a validation replay predicted every address and
// map, applied every release and ended on the snapshot's layout.
func exact(r *ReplayResult) bool {
	return r.AllocAddrsMatched == r.AllocAddrsTotal && r.SegEventsMatched == r.SegEventsTotal &&
		r.ReleasesMatched == r.ReleasesTotal && r.FinalStateMatches
}

func TestExpandableFixtures(t *testing.T) {
	for _, fx := range expandableFixtures {
		s := openFixture(t, fx.file)
		r, err := Simulate(s, fx.dev, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.AllocAddrsTotal != fx.allocs || r.SegEventsTotal != fx.maps || r.ReleasesTotal != fx.rel {
			t.Errorf("%s device %d: %d allocs, %d maps, %d unmaps; the fixture has %d, %d, %d",
				fx.file, fx.dev, r.AllocAddrsTotal, r.SegEventsTotal, r.ReleasesTotal, fx.allocs, fx.maps, fx.rel)
		}
		if !exact(r) {
			t.Errorf("%s device %d: addresses %d/%d, maps %d/%d, unmaps %d/%d, final %v: %v", fx.file, fx.dev,
				r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal,
				r.ReleasesMatched, r.ReleasesTotal, r.FinalStateMatches, r.Mismatches)
		}
		if msg := statsMismatch(s, fx.dev, &r.Stats); msg != "" {
			t.Errorf("%s device %d: memory_stats differ from the snapshot's segments: %s", fx.file, fx.dev, msg)
		}
	}
}

// TestExpandableAblation switches each rule off in turn: some fixture
// must then replay inexactly, or the fixtures do not test that rule.
func TestExpandableAblation(t *testing.T) {
	rules := []struct {
		name string
		r    rule
	}{
		{"reservation base from the trace", ruleTraceBase},
		{"best fit on expandable size", ruleExpandableFit},
		{"split when >= 512 bytes remain", ruleExpandableSplit},
		{"free block before the unmapped tail joins the mapping", ruleMergeBeforeTail},
		{"one reservation per stream", ruleStreamReserve},
		{"release unmaps whole free pages", ruleUnmapFreePages},
	}
	snaps := map[string]*snapshot.Snapshot{}
	for _, fx := range expandableFixtures {
		if snaps[fx.file] == nil {
			snaps[fx.file] = openFixture(t, fx.file)
		}
	}
	for _, rl := range rules {
		var broken []string
		for _, fx := range expandableFixtures {
			r, err := Simulate(snaps[fx.file], fx.dev, ReplayOptions{off: rl.r})
			if err != nil {
				t.Fatal(err)
			}
			if !exact(r) {
				broken = append(broken, fx.file+"#"+string(rune('0'+fx.dev)))
			}
		}
		if len(broken) == 0 {
			t.Errorf("without %q every fixture still replays exactly", rl.name)
		} else {
			t.Logf("without %q: inexact on %v", rl.name, broken)
		}
	}
}

// TestExpandableOOMRetry: device 1 of the fixture runs out of memory after
// unmapping six free pages. At the capacity the OOM implies the model
// releases the same pages and still fails; 100 MiB more lets it map.
func TestExpandableOOMRetry(t *testing.T) {
	s := openFixture(t, "four-devices.json")
	c, err := ImpliedCapacity(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	// 60+140+20 MiB mapped, 120 MiB unmapped by the retry, 156 MiB free.
	if c.Event != 9 || c.Reserved != 100*MiB || c.DeviceFree != 156*MiB || c.Capacity != 256*MiB {
		t.Fatalf("implied capacity %+v, want event 9, 100 MiB reserved + 156 MiB free", c)
	}
	for _, tc := range []struct {
		capacity uint64
		still    bool
	}{{c.Capacity, true}, {c.Capacity + 100*MiB, false}} {
		out, err := WhatIfOOM(s, 1, tc.capacity, c.Event, []string{"recorded"}, false)
		if err != nil {
			t.Fatal(err)
		}
		o := out[0]
		if o.StillOOM != tc.still || (tc.still && o.FirstOOM != c.Event) || (!tc.still && o.FirstOOM != -1) {
			t.Errorf("capacity %d MiB: still %v, first OOM %d; want still %v", tc.capacity/MiB, o.StillOOM, o.FirstOOM, tc.still)
		}
		// The model's own retry unmapped the six pages: one unmap, the
		// recorded one left to the model.
		st := o.Result.Stats
		if tc.still && (st.NumDeviceFree != 1 || st.NumAllocRetries != 1 || st.NumOOMs != 1) {
			t.Errorf("capacity %d MiB: %d unmaps, %d retries, %d OOMs; want 1 of each",
				tc.capacity/MiB, st.NumDeviceFree, st.NumAllocRetries, st.NumOOMs)
		}
	}
}
