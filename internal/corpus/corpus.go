// Package corpus finds the shared test data for tests: the real snapshots
// and PyTorch's outputs for them in ../shared beside the repository. A test
// that needs them skips, saying why, when they are absent (a fresh clone).
package corpus

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
)

// Path is a path under ../shared (which may not exist), e.g.
// Path("tools", "memoryviz_bench.mjs").
func Path(elem ...string) string {
	_, file, _, _ := runtime.Caller(0)
	// This file is internal/corpus/corpus.go; ../shared is beside the root.
	root := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
	return filepath.Join(append([]string{root}, elem...)...)
}

// Shared is ../shared, skipping the test when the real snapshots are not
// there.
func Shared(t testing.TB) string {
	t.Helper()
	Dir(t)
	return Path()
}

// Snapshots is ../shared/snapshots (real/ and expected/), skipping the test
// when the real snapshots are not there.
func Snapshots(t testing.TB) string {
	t.Helper()
	Dir(t)
	return Path("snapshots")
}

// Dir is ../shared/snapshots/real, the real snapshots, skipping the test
// when it is absent.
func Dir(t testing.TB) string {
	t.Helper()
	dir := Path("snapshots", "real")
	if _, err := os.Stat(filepath.Join(dir, "SOURCES.md")); err != nil {
		t.Skipf("real snapshot corpus not found at %s: it lives in ../shared beside the repository, absent in a fresh clone", dir)
	}
	return dir
}

// Files is the real snapshots' paths, sorted, skipping the test when there
// are none.
func Files(t testing.TB) []string {
	t.Helper()
	dir := Dir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.pickle"))
	if len(files) == 0 {
		t.Skipf("no snapshots in %s", dir)
	}
	sort.Strings(files)
	return files
}

// File is the real snapshot called name, skipping the test when it is
// absent.
func File(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(Dir(t), name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s absent from the shared corpus: %v", name, err)
	}
	return path
}
