package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHTMLCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "demo.html")
	if code, _, stderr := runMain(t, nil, "html", "--demo", "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.Contains(page, `id="gpumem-data"`) || strings.Contains(page, `src="app.js"`) {
		t.Errorf("page is not self-contained")
	}
	// Only the output file is left behind: the temporary file was renamed.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the output directory, want 1", len(ents))
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"html", "--demo"}, 2, "-o OUT.html is required"},
		{[]string{"html", "--demo", "--view", "flame", "-o", out}, 2, `unknown --view "flame"`},
		{[]string{"html", "--demo", "--device", "7", "-o", filepath.Join(dir, "x.html")}, 1, "demo: no device 7 (devices: 0)"},
		{[]string{"html", "-o", out}, 2, "want exactly one snapshot"},
		// Values the page would silently replace by its defaults.
		{[]string{"html", "--demo", "--width", "0", "-o", filepath.Join(dir, "x.html")}, 2, "--width must be between 1 and 16384"},
		{[]string{"html", "--demo", "--width", "-5", "-o", filepath.Join(dir, "x.html")}, 2, "got -5"},
		{[]string{"html", "--demo", "--width", "20000", "-o", filepath.Join(dir, "x.html")}, 2, "got 20000"},
		{[]string{"html", "--demo", "--detail", "0", "-o", filepath.Join(dir, "x.html")}, 2, "--detail must be at least 1"},
		{[]string{"html", "--demo", "--detail", "-1", "-o", filepath.Join(dir, "x.html")}, 2, "got -1"},
	} {
		if code, _, stderr := runMain(t, nil, tc.args...); code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.html")); err == nil {
		t.Errorf("a failed export left its output file")
	}
}

func TestServeBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"serve", "--max-upload", "lots", "--demo"}, 2, "-max-upload"},
		{[]string{"serve", "-no-browser", "-http", "256.0.0.1:bad", "--demo"}, 1, "listen on"},
		{[]string{"serve", "-no-browser"}, 1, "no snapshot given"},
	} {
		if code, _, stderr := runMain(t, nil, tc.args...); code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
}
