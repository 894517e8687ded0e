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
				if _, err := DecodeBytes(in, "big", nil); err != nil {
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
