package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
)

// TestRanksWorkerPanic: a panic in one file's worker (injected through
// ranksWorkerHook) is that file's error on standard error and exit 1,
// and the answer is still that of the other files.
func TestRanksWorkerPanic(t *testing.T) {
	paths := []string{
		corpus.File(t, "cs336-kkaitlyn111__memory_ctx128_forward.pickle"),
		corpus.File(t, "cs336-kkaitlyn111__memory_ctx256_forward.pickle"),
		corpus.File(t, "cs336-kkaitlyn111__memory_ctx512_forward.pickle"),
	}
	ranksWorkerHook = func(path string) {
		if path == paths[1] {
			panic("injected")
		}
	}
	defer func() { ranksWorkerHook = nil }()
	code, out, stderr := runCLI(append([]string{"ranks", "--json"}, paths...)...)
	want := "gpumem ranks: " + paths[1] + ": internal error: injected"
	// The failed file's line, then the summary line (TestRanksCorruptFileAmongMany).
	if code != 1 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 2 {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	var r analysis.Ranks
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if len(r.Ranks) != 2 || r.Ranks[0].File != paths[0] || r.Ranks[1].File != paths[2] {
		t.Fatalf("rows %+v; want the two other files", r.Ranks)
	}
	// The rows are those of a run without the failed file.
	ranksWorkerHook = nil
	code, alone, _ := runCLI("ranks", "--json", paths[0], paths[2])
	if code != 0 || alone != strings.ReplaceAll(out, `"rank": 2,`, `"rank": 1,`) {
		t.Errorf("answer without the failed file differs:\n%s\nwant\n%s", out, alone)
	}
}
