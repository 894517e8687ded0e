package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWording: errors read once and say what to do: a bad gzip header is
// "gzip: invalid header" (it read "gzip: gzip: ..."), a list containing
// itself is named so (not "an empty list"), a script may write a size's
// unit apart ("alloc a 1 GiB"), and a too-long script line names the line
// and the limit.
func TestWording(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badgz := write("bad.gz", []byte("\x1f\x8bxxxxxxxxxxxxxxx"))
	// {"segments": [l]} with l = [l], as pickle.dumps(protocol=4) writes it.
	selfList := write("self.pickle", []byte("\x80\x04\x95\x17\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94]\x94h\x03aas."))
	longLine := write("long.txt", []byte("alloc a 1MiB\nalloc b "+strings.Repeat("1", 70000)+"\n"))
	spaced := write("spaced.txt", []byte("alloc a 1 GiB\nalloc b 1.5 MiB stream=1\nfree a\n"))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"info", badgz}, 1, "bad.gz: gzip: invalid header\n"},
		{[]string{"info", selfList}, 1, "a list that contains itself"},
		{[]string{"sim", "--script", longLine}, 1, "line 2: longer than 64 KiB, the longest line a script may have"},
		{[]string{"sim", "--script", spaced}, 0, ""},
	} {
		code, out, stderr := runCLI(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "gzip: gzip") || strings.Contains(stderr, "empty list") {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if tc.code == 0 && !strings.Contains(out, "alloc a 1 GiB") {
			t.Errorf("%v: %s", tc.args, out)
		}
	}
}
