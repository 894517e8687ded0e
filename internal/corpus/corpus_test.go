package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPaths(t *testing.T) {
	if got, want := filepath.Base(Path()), "shared"; got != want {
		t.Fatalf("Path() = %s, want a directory named %s", Path(), want)
	}
	if _, err := os.Stat(Path("snapshots", "real", "SOURCES.md")); err != nil {
		// Dir must skip without the corpus (and fail under CI).
		t.Run("skips", func(t *testing.T) {
			Dir(t)
			t.Error("Dir did not skip without the corpus")
		})
		return
	}
	files := Files(t)
	if len(files) == 0 || filepath.Dir(files[0]) != Dir(t) {
		t.Fatalf("Files = %d paths in %v", len(files), files[:min(1, len(files))])
	}
	if got := File(t, filepath.Base(files[0])); got != files[0] {
		t.Errorf("File = %s, want %s", got, files[0])
	}
	if Snapshots(t) != filepath.Dir(Dir(t)) || Shared(t) != filepath.Dir(Snapshots(t)) {
		t.Errorf("Shared %s, Snapshots %s, Dir %s do not nest", Shared(t), Snapshots(t), Dir(t))
	}
}

// recorder is a testing.TB that keeps what Skip and Fatal were told.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any) { r.failed = fmt.Sprint(args...) }

// TestMissingFailsUnderCI: what a test lacks is a skip, except under CI,
// where it is a failure naming it.
func TestMissingFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Tool(r, "gpumem-no-such-tool", "apt-get install nothing")
		Need(r, Path("no-such-file"))
		got := r.skipped
		if ci == "true" {
			got = r.failed
		}
		if r.skipped != "" && r.failed != "" || !strings.Contains(got, filepath.Join("shared", "no-such-file")) {
			t.Errorf("CI=%q: skipped %q, failed %q", ci, r.skipped, r.failed)
		}
		r = &recorder{TB: t}
		Tool(r, "gpumem-no-such-tool", "apt-get install nothing")
		if got := r.skipped + r.failed; !strings.Contains(got, "gpumem-no-such-tool not on PATH (apt-get install nothing)") || (ci == "true") != (r.failed != "") {
			t.Errorf("CI=%q: tool: skipped %q, failed %q", ci, r.skipped, r.failed)
		}
	}
}

// TestPendingPagesAbsent: a page on PendingPages that exists has landed
// and must come off the list, so that its links and examples are checked.
func TestPendingPagesAbsent(t *testing.T) {
	docs := Docs(t)
	if docs["README.md"] == "" || docs["docs/README.md"] == "" {
		t.Fatalf("the manual: %d pages, without README.md or docs/README.md", len(docs))
	}
	for _, p := range PendingPages {
		if _, ok := docs[p]; ok {
			t.Errorf("%s exists: take it off corpus.PendingPages", p)
		}
	}
}
