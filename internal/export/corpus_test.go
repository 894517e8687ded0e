package export

import (
	"os"
	"sync"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

var (
	corpusMu    sync.Mutex
	corpusCache = map[string]*snapshot.Snapshot{}
)

// load decodes a snapshot once per test binary.
func load(t testing.TB, path string) *snapshot.Snapshot {
	t.Helper()
	corpusMu.Lock()
	defer corpusMu.Unlock()
	if s, ok := corpusCache[path]; ok {
		return s
	}
	if _, err := os.Stat(path); err != nil {
		corpus.Missing(t, "%s absent (../shared missing): %v", path, err)
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	corpusCache[path] = s
	return s
}

// realFile is one file of the corpus by name.
func realFile(name string) string { return corpus.Path("snapshots", "real", name) }
