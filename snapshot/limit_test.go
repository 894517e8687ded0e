package snapshot

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// gzipped compresses the pickle head followed by n bytes 'a' and tail.
func gzipped(t *testing.T, head string, n int, tail string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	zw.Write([]byte(head))
	chunk := bytes.Repeat([]byte{'a'}, 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		zw.Write(chunk[:k])
		n -= k
	}
	zw.Write([]byte(tail))
	zw.Close()
	return buf.Bytes()
}

// TestDecompressionBound: a gzip or zstd input may expand only to
// ExpansionFloor plus ExpansionRatio times its size (Options.MaxBytes
// raises it), and a string claiming more than that is refused before any
// buffer grows towards it: one line naming the limit and the flag, bounded
// memory, for a file, standard input and an upload.
func TestDecompressionBound(t *testing.T) {
	const claim = 1 << 30
	// A gzip of one 1 GiB string claimed in 2 MB of input.
	bigClaim := gzipped(t, "\x80\x04\x8d"+le64(claim), 2<<20, "")
	// A gzip bomb: 160 MiB of one byte in well under a megabyte.
	bomb := gzipped(t, "\x80\x04\x8d"+le64(160<<20), 160<<20, "\x94.")
	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs)
	zw.Write([]byte("\x80\x04\x8d" + le64(160<<20)))
	zw.Write(bytes.Repeat([]byte{'a'}, 160<<20))
	zw.Close()
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	claimPath, bombPath, zstdPath := write("claim.pickle.gz", bigClaim), write("bomb.pickle.gz", bomb), write("bomb.pickle.zst", zs.Bytes())
	tests := []struct {
		name   string
		decode func(opt *Options) (*Snapshot, error)
		want   string
		maxMB  uint64 // bytes allocated during the decode, at most
	}{
		{"claim file", func(o *Options) (*Snapshot, error) { return Open(claimPath, o) }, "value at byte 2 claims 1 GiB", 64},
		{"claim upload", func(o *Options) (*Snapshot, error) { return DecodeBytes(bigClaim, "up", o) }, "value at byte 2 claims 1 GiB", 64},
		{"bomb file", func(o *Options) (*Snapshot, error) { return Open(bombPath, o) }, "claims 160 MiB", 64},
		{"bomb zstd", func(o *Options) (*Snapshot, error) { return Open(zstdPath, o) }, "zstd input", 64},
		// Standard input has no size: the bound grows with what was read.
		{"bomb stdin", func(o *Options) (*Snapshot, error) { return Decode(bytes.NewReader(bomb), "-", o) }, "gzip input expands past the", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := tc.decode(&Options{LimitFlag: "--max-decompressed SIZE"})
			runtime.ReadMemStats(&after)
			var le *LimitError
			if !errors.As(err, &le) {
				t.Fatalf("got %v, want a *LimitError", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, "--max-decompressed SIZE raises it") ||
				!strings.Contains(msg, "200 times the compressed size") || strings.Contains(msg, "\n") {
				t.Errorf("message %q: want one line with %q, the rule and the flag", msg, tc.want)
			}
			if got := (after.TotalAlloc - before.TotalAlloc) >> 20; got > tc.maxMB {
				t.Errorf("allocated %d MB while refusing, want at most %d", got, tc.maxMB)
			}
		})
	}
	// Without a size, a claim is refused when the data runs out.
	if _, err := Decode(bytes.NewReader(bigClaim), "-", nil); err == nil || !strings.Contains(err.Error(), "truncated BINUNICODE8") {
		t.Errorf("claim on stdin: got %v, want truncated", err)
	}
	// The limit raised, the bomb decodes (and is then no snapshot).
	_, err := Open(bombPath, &Options{MaxBytes: 1 << 30})
	if err == nil || !strings.Contains(err.Error(), "top-level value is str") {
		t.Errorf("with MaxBytes 1 GiB: got %v, want the bomb decoded", err)
	}
	// A real snapshot, gzipped, is far inside the bound.
	raw := smallSnapshot(t)
	var gz bytes.Buffer
	gw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	gw.Write(raw)
	gw.Close()
	if _, err := Decode(io.MultiReader(&gz), "-", nil); err != nil {
		t.Errorf("real snapshot, gzip on stdin: %v", err)
	}
}
