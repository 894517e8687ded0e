package alloc

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestNeedSegments: a real torch.profiler export has no segments, and a
// view of them says so and what to record instead; a memory snapshot has
// them.
func TestNeedSegments(t *testing.T) {
	for _, tc := range []struct {
		path string
		want string
	}{
		{corpus.Need(t, corpus.Path("snapshots", "profiler_exports", "optimizer-memory-profiles__modal_gpu_sgd__profile.raw.json.gz")), ": stats: a "},
		{corpus.File(t, "cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle"), ""},
	} {
		s, err := snapshot.Open(tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = NeedSegments(s, "stats")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.path, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.path+tc.want) || !strings.Contains(err.Error(), "take a memory snapshot") {
			t.Errorf("%s: %v, want %q and what to record", tc.path, err, tc.want)
		}
		if _, err := SimSnapshot(s, "p", SimOptions{Device: -1}); err == nil || !strings.Contains(err.Error(), ": sim: a ") {
			t.Errorf("sim of a profiler export: %v", err)
		}
	}
}
