package snapshot

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenFIFO: a FIFO (what <(cat x) and /dev/stdin from a pipe are)
// reports size 0 from Stat; Open reads it as a stream, as "-" is read,
// and the snapshot's file size is what came through it.
func TestOpenFIFO(t *testing.T) {
	raw := smallSnapshot(t)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	want, err := DecodeBytes(raw, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{{"pickle", raw}, {"gzip", gz.Bytes()}} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skip("no FIFOs here:", err)
			}
			go func() {
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				f.Write(tc.data)
				f.Close()
			}()
			s, err := Open(p, nil)
			if err != nil {
				t.Fatalf("Open(FIFO): %v", err)
			}
			if s.Source.FileSize != int64(len(tc.data)) {
				t.Errorf("file size %d, want %d", s.Source.FileSize, len(tc.data))
			}
			if len(s.Segments) != len(want.Segments) || len(s.Traces) != len(want.Traces) {
				t.Errorf("decoded %d segments %d traces, want %d %d", len(s.Segments), len(s.Traces), len(want.Segments), len(want.Traces))
			}
		})
	}
}
