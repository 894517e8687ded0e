package snapshot

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
)

// gcPercent reads the process's GC percentage without changing it.
func gcPercent() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestEagerGCNested: two decodes that overlap, the first finishing first,
// keep the eager GOGC until both are done and then restore the value the first
// one found (restoring without counting left it eager for good).
func TestEagerGCNested(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(137))
	big := eagerGCMin + 1
	first := eagerGC(big)
	second := eagerGC(big)
	if got := gcPercent(); got != eagerGCPercent {
		t.Fatalf("during two decodes GOGC = %d, want %d", got, eagerGCPercent)
	}
	first()
	first() // a second call of the same restore changes nothing
	if got := gcPercent(); got != eagerGCPercent {
		t.Fatalf("with one decode still running GOGC = %d, want %d", got, eagerGCPercent)
	}
	second()
	if got := gcPercent(); got != 137 {
		t.Fatalf("after both decodes GOGC = %d, want 137", got)
	}
	eagerGC(eagerGCMin)() // a small input leaves the setting alone
	if got := gcPercent(); got != 137 {
		t.Fatalf("after a small decode GOGC = %d, want 137", got)
	}
}

// TestEagerGCConcurrentDecodes decodes two big inputs at once, again and
// again (big: the threshold is lowered below their size so the test stays
// small), and checks that the GC setting is what it was before.
func TestEagerGCConcurrentDecodes(t *testing.T) {
	defer func(m int64) { eagerGCMin = m }(eagerGCMin)
	defer debug.SetGCPercent(debug.SetGCPercent(137))
	inputs := [][]byte{streamsPickle(3000), streamsPickle(2000)}
	eagerGCMin = int64(min(len(inputs[0]), len(inputs[1]))) - 1
	for round := 0; round < 30; round++ {
		var wg sync.WaitGroup
		for i, in := range inputs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := DecodeBytes(in, "big", &Options{EagerGC: true}); err != nil {
					t.Errorf("input %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		if got := gcPercent(); got != 137 {
			t.Fatalf("round %d: after two concurrent decodes GOGC = %d, want 137", round, got)
		}
	}
}

// TestDecodeLeavesGCAlone: without Options.EagerGC (a library's caller)
// a big decode never changes the process's GC setting; with it, the
// decode runs at eagerGC's lower GOGC and restores the setting. (Feed is called as
// the pickle decode starts: it reads the setting during the decode.)
func TestDecodeLeavesGCAlone(t *testing.T) {
	defer func(m int64) { eagerGCMin = m }(eagerGCMin)
	defer debug.SetGCPercent(debug.SetGCPercent(137))
	in := streamsPickle(3000)
	eagerGCMin = int64(len(in)) - 1
	for _, eager := range []bool{false, true} {
		during := int64(-1)
		opt := &Options{EagerGC: eager, Feed: func(*EventFeed) { during = gcPercent() }}
		if _, err := DecodeBytes(in, "big", opt); err != nil {
			t.Fatal(err)
		}
		// Eager: lower than the process's 137 while decoding (the exact
		// percentage is eagerGC's); else untouched. 137 again after.
		if changed := during != 137; changed != eager || during >= 100 && eager || gcPercent() != 137 {
			t.Errorf("EagerGC %v: GOGC %d during the decode, %d after; want it lowered only with EagerGC, then 137", eager, during, gcPercent())
		}
	}
	if _, err := DecodeBytes(in, "big", nil); err != nil || gcPercent() != 137 {
		t.Errorf("nil options: GOGC %d after (%v)", gcPercent(), err)
	}
}
