package replay

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

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
				lt.Live(lt.PeakAction, func(i int) { live += lt.Size(i) })
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

// TestNewLifetimesPaused: the lifetimes are NewLifetimes', the pause
// function is called about once per pauseEvery+1 events and elements, and
// Live calls it too.
func TestNewLifetimesPaused(t *testing.T) {
	s := randomSnapshot(rand.New(rand.NewSource(11)), 150_000)
	for _, kind := range []Kind{KindActive, KindSegments} {
		want := NewLifetimes(s, 0, kind)
		calls := 0
		got := NewLifetimesPaused(s, 0, kind, func() { calls++ })
		if got.Pause == nil {
			t.Fatalf("kind %v: Pause not kept", kind)
		}
		got.Pause = nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("kind %v: paused lifetimes differ from NewLifetimes'", kind)
		}
		events := len(vizEvents(s, 0))
		if min := events / (pauseEvery + 1); calls < min {
			t.Errorf("kind %v: pause called %d times over %d events, want at least %d", kind, calls, events, min)
		}
		got.Pause = func() { calls++ }
		calls = 0
		got.Live(len(got.Events)/2, func(int) {})
		if want := (got.Len() + pauseEvery) / (pauseEvery + 1); calls != want {
			t.Errorf("kind %v: Live paused %d times over %d elements, want %d", kind, calls, got.Len(), want)
		}
	}
}

// TestLifetimesTimestep checks each element's sources and Timestep, kept as bits of the frees that
// leave a gap, against timesteps counted on a plain stack: one per action,
// 3 more after a free of an element that is not on top (memory_viz's
// shift of the elements above it).
func TestLifetimesTimestep(t *testing.T) {
	gaps := 0
	dumps := 0
	check := func(t *testing.T, name string, l *elementList, lt *Lifetimes) {
		// Each element's sources, packed in 24 bytes, read back.
		for i := range l.elems {
			e, it := &l.elems[i], lt.Item(i)
			alloc, dump := int32(-1), int32(-1)
			switch e.kind() {
			case srcAlloc:
				alloc = e.ref
			case srcGhostBlock, srcDumpSeg:
				dump = e.ref
				dumps++
			}
			if it.Size != e.size || max(it.Alloc, -1) != alloc || it.Dump() != dump || it.Free != e.freeEvent() {
				t.Fatalf("%s: element %d: size %d alloc %d dump %d free %d, want %d %d %d %d", name, i, it.Size, it.Alloc, it.Dump(), it.Free, e.size, alloc, dump, e.freeEvent())
			}
		}
		stack := append([]int32(nil), l.initial...)
		ts := int32(0)
		for k, id := range l.actions {
			if got := lt.Timestep(k); got != ts {
				t.Fatalf("%s: action %d: timestep %d, want %d", name, k, got, ts)
			}
			i := slices.Index(stack, id)
			ts++
			if i < 0 {
				stack = append(stack, id)
				continue
			}
			if i != len(stack)-1 {
				ts += 3
				gaps++
			}
			stack = slices.Delete(stack, i, i+1)
		}
	}
	for seed := range int64(4) {
		s := randomSnapshot(rand.New(rand.NewSource(seed)), 3_000)
		for _, kind := range []Kind{KindActive, KindSegments} {
			check(t, "random", buildElements(s, 0, kind == KindSegments, nil, nil), NewLifetimes(s, 0, kind))
		}
	}
	for _, s := range corpusSnapshotsAll(t) {
		for _, d := range s.Devices() {
			for _, kind := range []Kind{KindActive, KindSegments} {
				if n := len(vizEvents(s, d)); n > 200_000 {
					continue // the plain stack is quadratic
				}
				check(t, s.Source.Name, buildElements(s, d, kind == KindSegments, nil, nil), NewLifetimes(s, d, kind))
			}
		}
	}
	if dumps == 0 {
		t.Fatal("no element from the dump: Dump is not checked")
	}
	if gaps == 0 {
		t.Fatal("no free left a gap: the test checks nothing of the gaps")
	}
}

// TestTimelineLifetimes: the lifetimes a stacked timeline gives are
// NewLifetimes' for KindActive, on every real snapshot, random traces
// and a timeline laid out from a decode's feed; the segment view and a
// materialized timeline give none.
func TestTimelineLifetimes(t *testing.T) {
	check := func(name string, tl *Timeline, want *Lifetimes) {
		t.Helper()
		got := tl.Lifetimes(nil)
		if got == nil {
			t.Fatalf("%s: a stacked active timeline gave no lifetimes", name)
		}
		if !reflect.DeepEqual(got, want) {
			what := "elements"
			switch {
			case !reflect.DeepEqual(got.Events, want.Events):
				what = "action events"
			case !reflect.DeepEqual(got.gaps, want.gaps) || !reflect.DeepEqual(got.gapsBefore, want.gapsBefore):
				what = "gaps"
			case got.PeakBytes != want.PeakBytes || got.PeakAction != want.PeakAction:
				what = "peak"
			}
			t.Fatalf("%s: the timeline's lifetimes differ from NewLifetimes' (%s)", name, what)
		}
	}
	for _, s := range corpusSnapshotsAll(t) {
		for _, d := range s.Devices() {
			want := NewLifetimes(s, d, KindActive)
			check(s.Source.Name, NewTimeline(s, d, KindActive), want)
			if !hasPrivatePools(s, d) {
				check(s.Source.Name+" (pools view)", NewTimeline(s, d, KindActiveWithPools), want)
			} else if NewTimeline(s, d, KindActiveWithPools).Lifetimes(nil) != nil {
				t.Fatalf("%s: a materialized timeline gave lifetimes", s.Source.Name)
			}
			if NewTimeline(s, d, KindSegments).Lifetimes(nil) != nil {
				t.Fatalf("%s: the segment timeline gave lifetimes", s.Source.Name)
			}
		}
	}
	r := rand.New(rand.NewSource(12))
	for iter := range 20 {
		s := randomSnapshot(r, 1+r.Intn(3000))
		check(fmt.Sprintf("random %d", iter), NewTimeline(s, 0, KindActive), NewLifetimes(s, 0, KindActive))
	}
	defer twoCores(t)()
	for iter := range 10 {
		got, want, _ := fedLayouts(randomPickle(t, r, r.Intn(400)), iter%2 == 1)
		if got == nil {
			t.Fatalf("fed %d: the fed work does not cover the only trace", iter)
		}
		check(fmt.Sprintf("fed %d", iter), got, want.Lifetimes(nil))
		check(fmt.Sprintf("fed %d", iter), got, NewLifetimes(got.s, got.device, KindActive))
	}
}
