package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

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
	if code != 1 || !strings.Contains(out, "gpumem: loading 1 snapshot(s); the viewer is at http://127.0.0.1:") || strings.Contains(out, "serving") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the loading line and never \"serving\"", code, out, stderr.String())
	}
}

// syncBuffer is a bytes.Buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeSaysServingWhenLoaded: serve says it serves the files (and
// names the watch page) once they have decoded, not before.
func TestServeSaysServingWhenLoaded(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "demo.pickle")
	logPath := filepath.Join(dir, "run.jsonl")
	log := `{"type":"start","time":"2026-11-25T14:00:00Z","backend":"fake","interval_ms":50,"report_ms":200,"devices":[{"gpu":0,"uuid":"GPU-0","name":"Fake","total":85899345920}]}` + "\n"
	if err := os.WriteFile(snap, demo.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"serve", "-no-browser", "-http", "127.0.0.1:0", logPath, snap}, nil, &stdout, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stdout.String(), "gpumem: serving 1 snapshot(s)") {
		if time.Now().After(deadline) {
			t.Fatalf("no serving line: stdout %q stderr %q", stdout.String(), stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	out := stdout.String()
	if !strings.HasPrefix(out, "gpumem: loading 1 snapshot(s); the viewer is at http://127.0.0.1:") ||
		!strings.Contains(out, ", 1 watch log(s) at http://127.0.0.1:") || !strings.Contains(out, "/watch.html (Ctrl-C to stop)") {
		t.Errorf("stdout %q", out)
	}
	// The serving line is printed after serve listens for Ctrl-C.
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	if code := <-done; code != 0 {
		t.Errorf("exit %d after Ctrl-C: %s", code, stderr.String())
	}
}

// TestServeBeyondLoopback: serve on an address other machines reach needs
// --allow-host (a usage error without), warns in one line, and answers
// only the names allowed; a remote client naming localhost is refused.
func TestServeBeyondLoopback(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"serve", "-no-browser", "-http", "0.0.0.0:0", "--demo"}, nil, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "-http 0.0.0.0:0 listens beyond loopback: name the host names clients will use with --allow-host") {
		t.Errorf("without --allow-host: exit %d, %q", code, stderr.String())
	}
	var errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"serve", "-no-browser", "-http", "0.0.0.0:0", "--allow-host", "gpubox.lan", "--demo"}, nil, &stdout, &errOut)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(errOut.String(), "warning") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning: %q", errOut.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if w := errOut.String(); !strings.HasPrefix(w, "gpumem: warning: gpumem serve listens on ") || !strings.Contains(w, "beyond loopback") || strings.Count(w, "\n") != 1 {
		t.Errorf("warning %q: want one line", w)
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	<-done
}
