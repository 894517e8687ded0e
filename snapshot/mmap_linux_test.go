package snapshot

import (
	"os"
	"strings"
	"testing"
)

// TestMappedFileTruncated truncates a file while Open decodes it from a
// mapping: reading past the new end faults, which must come back as an
// error, not a crash.
func TestMappedFileTruncated(t *testing.T) {
	path := bigSnapshot(t)
	cut := false
	_, err := Open(path, &Options{Progress: func(done, total int64) {
		if !cut && done > 0 {
			cut = true
			if err := os.Truncate(path, 4096); err != nil {
				t.Error(err)
			}
		}
	}})
	if !cut {
		t.Fatal("no progress was reported, so the file was never cut")
	}
	if err == nil || !strings.Contains(err.Error(), "changed while it was read") {
		t.Fatalf("got %v, want a file-changed error", err)
	}
}
