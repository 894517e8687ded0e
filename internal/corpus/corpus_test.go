package corpus

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPaths(t *testing.T) {
	if got, want := filepath.Base(Path()), "shared"; got != want {
		t.Fatalf("Path() = %s, want a directory named %s", Path(), want)
	}
	if _, err := os.Stat(Path("snapshots", "real", "SOURCES.md")); err != nil {
		// Dir must skip, not fail, without the corpus.
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
