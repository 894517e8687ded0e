package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/demo"
)

// rankFiles writes n ranks' snapshots (links to one demo file) and returns
// their paths.
func rankFiles(t *testing.T, n int) []string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "demo.pickle")
	if err := os.WriteFile(src, demo.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, n)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("snapshot_rank%d.pickle", i))
		if err := os.Symlink(src, paths[i]); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

// TestRanksMemoryBoundedByJobs: with 500 files, what the rows hold once
// they are all made is a few bytes per row, not a decoded file per row
// (each row kept a pointer into its file's model: 240 KB a demo file).
func TestRanksMemoryBoundedByJobs(t *testing.T) {
	paths := rankFiles(t, 500)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ranksRowsMade = func() {
		runtime.GC()
		runtime.ReadMemStats(&after)
	}
	defer func() { ranksRowsMade = nil }()
	code, out, stderr := runCLI(append([]string{"ranks", "--json", "-j", "2"}, paths...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r analysis.Ranks
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Ranks) != 500 {
		t.Fatalf("%d rows (%v)", len(r.Ranks), err)
	}
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap held by 500 rows: %d KB", grown>>10)
	if grown > 8<<20 {
		t.Errorf("500 rows hold %d MB: memory grows with the files, not -j", grown>>20)
	}
}

// TestRanksCorruptFileAmongMany: one bad file among 200 costs its row,
// not the table: the other rows are printed, the bad file's error is one
// line on stderr, and the command exits 1.
func TestRanksCorruptFileAmongMany(t *testing.T) {
	paths := rankFiles(t, 200)
	bad := paths[137]
	os.Remove(bad)
	b := demo.Bytes()
	if err := os.WriteFile(bad, b[:len(b)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(append([]string{"ranks"}, paths...)...)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if rows := strings.Count(out, "snapshot_rank"); rows != 199 {
		t.Errorf("%d rows printed, want 199:\n%s", rows, out)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "snapshot_rank137.pickle: pickle: truncated") ||
		lines[1] != "gpumem ranks: 1 of 200 files could not be read (above); the table has the other 199" {
		t.Errorf("stderr %q", stderr)
	}
	// JSON too: the good rows, then the error.
	code, out, _ = runCLI(append([]string{"ranks", "--json"}, paths...)...)
	var r analysis.Ranks
	if code != 1 || json.Unmarshal([]byte(out), &r) != nil || len(r.Ranks) != 199 {
		t.Errorf("--json: exit %d, %d rows", code, len(r.Ranks))
	}
}
