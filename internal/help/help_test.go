package help

import (
	"io/fs"
	"strings"
	"testing"
)

// TestAbout: every text is found by its command's name, has no padding
// and keeps its lines within 120 characters.
func TestAbout(t *testing.T) {
	names, err := fs.Glob(about, "about/*.txt")
	if err != nil || len(names) < 20 {
		t.Fatalf("%d texts (%v)", len(names), err)
	}
	for _, n := range names {
		cmd := strings.TrimSuffix(strings.TrimPrefix(n, "about/"), ".txt")
		a := About(cmd)
		if a == "" || a != strings.TrimSpace(a) {
			t.Errorf("%s: %q", cmd, a)
		}
		for _, l := range strings.Split(a, "\n") {
			if len([]rune(l)) > 120 {
				t.Errorf("%s: line of %d characters: %q", cmd, len([]rune(l)), l)
			}
		}
	}
	if About("no-such-command") != "" {
		t.Error("a text for an unknown command")
	}
}
