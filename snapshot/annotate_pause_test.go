package snapshot

import "testing"

// TestAnnotatePause checks Options.Pause's hook in the versions' pass: it
// is called every 65,536 entries, before the entry it stops at, so that a
// pause that blocks holds the pass there (a viewer gives the core to a
// zoom so); and the versions are those of a pass without pauses.
func TestAnnotatePause(t *testing.T) {
	const n = 200_000
	mk := func() *Snapshot {
		evs := make([]Event, n)
		for i := range evs {
			// Alloc and free at 64 addresses in turn: versions up to n/128.
			evs[i] = Event{Addr: uint64(i/2%64) << 20, Size: 512, Action: ActionAlloc}
			if i%2 == 1 {
				evs[i].Action = ActionFreeCompleted
			}
		}
		return &Snapshot{Traces: []Trace{{Events: evs}}}
	}
	s := mk()
	annotate(s, true, false, nil)
	var at []int
	annotate(s, false, true, func() {
		// The entries before the stop have their versions; the rest not yet.
		i := len(at) << 16
		at = append(at, i)
		tr := &s.Traces[0]
		if i >= 128 && tr.Version(i-1) == 0 {
			t.Errorf("pause at entry %d: entry %d has no version yet", i, i-1)
		}
		for j := i; j < min(i+1<<16, n); j++ {
			if tr.Version(j) != 0 {
				t.Fatalf("pause at entry %d: a later entry has its version already", i)
			}
		}
	})
	if len(at) != (n+1<<16-1)>>16 {
		t.Errorf("pauses at %v: want one every 65,536 of %d entries", at, n)
	}
	want := mk()
	annotate(want, true, true, nil)
	for i := range want.Traces[0].Events {
		if got, w := s.Traces[0].Version(i), want.Traces[0].Version(i); got != w {
			t.Fatalf("entry %d: version %d with pauses, %d without", i, got, w)
		}
	}
}
