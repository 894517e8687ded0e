package export

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// corpusDir is ../shared/snapshots/real beside the repository.
const corpusDir = "../../../shared/snapshots/real"

var (
	corpusOnce  sync.Once
	corpusFiles []string
	corpusMu    sync.Mutex
	corpusCache = map[string]*snapshot.Snapshot{}
)

// corpus returns the real snapshots' paths, sorted, skipping the test when
// ../shared is absent.
func corpus(t testing.TB) []string {
	t.Helper()
	corpusOnce.Do(func() {
		corpusFiles, _ = filepath.Glob(filepath.Join(corpusDir, "*.pickle"))
		sort.Strings(corpusFiles)
	})
	if len(corpusFiles) == 0 {
		t.Skipf("no real snapshots in %s (../shared absent); corpus test skipped", corpusDir)
	}
	return corpusFiles
}

// load decodes a snapshot once per test binary.
func load(t testing.TB, path string) *snapshot.Snapshot {
	t.Helper()
	corpusMu.Lock()
	defer corpusMu.Unlock()
	if s, ok := corpusCache[path]; ok {
		return s
	}
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s absent (../shared missing): %v", path, err)
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	corpusCache[path] = s
	return s
}

// realFile is one file of the corpus by name.
func realFile(name string) string { return filepath.Join(corpusDir, name) }
