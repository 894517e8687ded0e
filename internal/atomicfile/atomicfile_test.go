package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	if err := WriteFile(path, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v; want the second write", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}

	// A failed write keeps the old file and leaves no temporary file.
	boom := errors.New("disk full")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), path+": ") {
		t.Errorf("failed write: %v, want %s: disk full", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Errorf("after a failed write the file holds %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries left in the folder, want only out.txt", len(ents))
	}

	// Errors name the target, never the temporary file.
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing", "x.out"), filepath.Join(dir, "missing", "x.out") + ": no such directory"},
		{dir, dir + ": is a directory"},
	} {
		if err := WriteFile(tc.path, []byte("x")); err == nil || err.Error() != tc.want {
			t.Errorf("WriteFile(%s) = %v, want %q", tc.path, err, tc.want)
		}
	}
}
