package alloc

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestReplayWorkerPanic: a panic in one setting's replay worker (injected
// through replayWorkerHook) is the sweep's error naming that setting, not
// the end of the process; without it the same sweep answers.
func TestReplayWorkerPanic(t *testing.T) {
	s, err := snapshot.Open(corpus.File(t, "cs336-kkaitlyn111__memory_ctx128_forward.pickle"), nil)
	if err != nil {
		t.Fatal(err)
	}
	replayWorkerHook = func(k int) {
		if k == 2 {
			panic("injected")
		}
	}
	_, err = Sweep(s, 0, SweepOptions{}) // the default replays first, outside replayEach: k 2 is SweepConfigs[3]
	replayWorkerHook = nil
	if err == nil || !strings.Contains(err.Error(), "replay under "+SweepConfigs[3]) || !strings.Contains(err.Error(), "internal error: injected") {
		t.Fatalf("sweep with a panicking replay: %v", err)
	}
	rows, err := Sweep(s, 0, SweepOptions{})
	if err != nil || len(rows) != len(SweepConfigs) {
		t.Fatalf("sweep after: %d rows, %v", len(rows), err)
	}
}
