package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
)

// TestServeBadFiles: serve checks that files exist before it starts, and
// a file that fails to decode in the background ends the command with
// one line naming the file and the byte offset, exit code 1.
func TestServeBadFiles(t *testing.T) {
	dir := t.TempDir()
	truncated := filepath.Join(dir, "cut.pickle")
	b := demo.Bytes()
	if err := os.WriteFile(truncated, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "-no-browser", filepath.Join(dir, "missing.pickle")}, "missing.pickle: no such file"},
		{[]string{"serve", "-no-browser", dir}, "is a directory"},
		{[]string{"serve", "-no-browser", "-http", "127.0.0.1:0", truncated}, "cut.pickle: pickle: truncated"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(tc.args, nil, &stdout, &stderr)
		msg := stderr.String()
		if code != 1 || !strings.Contains(msg, tc.want) || strings.Count(strings.TrimSpace(msg), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 1 and one line with %q", tc.args, code, msg, tc.want)
		}
	}
}

// TestServeNamesTheWatchPage: watch logs given beside snapshots are drawn
// on /watch.html, and the line serve prints says where.
func TestServeNamesTheWatchPage(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "run.jsonl")
	log := `{"type":"start","time":"2026-11-25T14:00:00Z","backend":"fake","interval_ms":50,"report_ms":200,"devices":[{"gpu":0,"uuid":"GPU-0","name":"Fake","total":85899345920}]}` + "\n"
	truncated := filepath.Join(dir, "cut.pickle")
	b := demo.Bytes()
	if err := os.WriteFile(logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(truncated, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	// The truncated snapshot ends the command after the line is printed.
	var stdout, stderr bytes.Buffer
	code := Main([]string{"serve", "-no-browser", "-http", "127.0.0.1:0", logPath, truncated}, nil, &stdout, &stderr)
	out := stdout.String()
	if code != 1 || !strings.Contains(out, "gpumem: serving 1 snapshot(s) at http://127.0.0.1:") || !strings.Contains(out, ", 1 watch log(s) at http://127.0.0.1:") || !strings.Contains(out, "/watch.html (Ctrl-C to stop)") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, stderr.String())
	}
}
