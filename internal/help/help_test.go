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

// TestGuideAndUsage: the guide's examples are those of the commands given,
// and the usage has a line per command with its summary.
func TestGuideAndUsage(t *testing.T) {
	var g strings.Builder
	Guide(&g, []string{"info", "peak"})
	if !strings.Contains(g.String(), "gpumem info --demo") || strings.Contains(g.String(), "gpumem record --") ||
		!strings.Contains(g.String(), "Commands:\n  info peak\n") {
		t.Errorf("guide:\n%s", g.String())
	}
	var u strings.Builder
	Usage(&u, []string{"info", "peak"}, func(n string) string { return "about " + n })
	if !strings.Contains(u.String(), "  info       about info\n  peak       about peak\n") {
		t.Errorf("usage:\n%s", u.String())
	}
}
