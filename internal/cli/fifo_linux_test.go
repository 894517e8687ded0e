package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

// fifoWith makes a FIFO that one writer fills with data.
func fifoWith(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "snap.fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.Write(data)
		f.Close()
	}()
	return p
}

// TestInfoOnFIFO: gpumem info <(cat x.pickle) reads the pipe as a stream
// and prints the bytes that came through it as the size.
func TestInfoOnFIFO(t *testing.T) {
	b := demo.Bytes()
	p := fifoWith(t, b)
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"info", p}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := "bytes)"; !strings.Contains(stdout.String(), want) || strings.Contains(stdout.String(), "(0 bytes)") {
		t.Errorf("size line wrong:\n%s", stdout.String())
	}
}

// TestServeDoesNotProbeFIFO: serve's check for a watch log must not read
// the first bytes of a FIFO, which the decoder then misses.
func TestServeDoesNotProbeFIFO(t *testing.T) {
	p := fifoWith(t, demo.Bytes())
	done := make(chan error, 1)
	go func() {
		rest, n, err := web.New(web.Options{}).AddWatchLogs([]string{p})
		if err != nil || n != 0 || len(rest) != 1 {
			done <- err
			return
		}
		_, err = decodePath(&Env{}, p, &snapshot.Options{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve's path for a FIFO: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the FIFO was opened twice: its writer went to the probe")
	}
}
