// Package corpus finds what tests need outside the code: the real
// snapshots and PyTorch's outputs for them in ../shared beside the
// repository, tools such as node and python3, and the manual's pages
// (README.md, docs/) whose examples tests check. A test whose input or tool is absent
// skips, saying what is missing (a fresh clone); under CI (CI=true) it
// fails instead, so that CI cannot pass by skipping.
package corpus

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"
)

// Root is the repository's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	// This file is internal/corpus/corpus.go.
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// PendingPages are pages of the manual that links already name and that
// another branch is writing: a link to one is not yet an error, and checks
// of their examples wait for them. TestPendingPagesAbsent fails once one
// exists: then take it off the list. Empty when no such branch is open.
var PendingPages = []string{}

// Docs is the manual: README.md and docs/*.md by their paths from the
// root ("README.md", "docs/peak-oom.md"), with their text.
func Docs(t testing.TB) map[string]string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(Root(), "docs", "*.md"))
	paths = append(paths, filepath.Join(Root(), "README.md"))
	docs := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(Root(), p)
		docs[filepath.ToSlash(rel)] = string(b)
	}
	return docs
}

// Path is a path under ../shared (which may not exist), e.g.
// Path("tools", "memoryviz_bench.mjs").
func Path(elem ...string) string {
	// ../shared is beside the root.
	shared := filepath.Join(Root(), "..", "shared")
	return filepath.Join(append([]string{shared}, elem...)...)
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
		Missing(t, "real snapshot corpus not found at %s: it lives in ../shared beside the repository, absent in a fresh clone", dir)
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
		Missing(t, "no snapshots in %s (../shared)", dir)
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
		Missing(t, "%s absent from the shared corpus (../shared): %v", name, err)
	}
	return path
}

// CI reports whether the tests run under CI (CI=true), where a missing
// input or tool is a failure, not a skip.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips t, saying what is missing, or under CI fails it with the
// same message.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatal("CI=true and " + msg)
		return
	}
	t.Skip(msg)
}

// Tool is the path of the program name on PATH; when it is absent the
// test is Missing it, with install saying how to get it.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not on PATH (%s)", name, install)
	}
	return p
}

// Need is path, a file under ../shared (from Path), when it exists; else
// the test is Missing it.
func Need(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, "%s missing (../shared beside the repository): %v", path, err)
	}
	return path
}
