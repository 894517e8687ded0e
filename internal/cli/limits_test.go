package cli

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
)

// TestMaxDecompressed: every command that reads a snapshot takes
// --max-decompressed, and a gzip input over it fails in one line that
// names the limit and the flag.
func TestMaxDecompressed(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(demo.Bytes())
	zw.Close()
	p := filepath.Join(t.TempDir(), "demo.pickle.gz")
	if err := os.WriteFile(p, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"info", "--max-decompressed", "16KiB", p},
		{"peak", "--max-decompressed", "16KiB", p},
		{"export", "pprof", "--max-decompressed", "16KiB", "-o", filepath.Join(t.TempDir(), "x.pb.gz"), p},
		{"ranks", "--max-decompressed", "16KiB", p, p},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(args, nil, &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 1 || !strings.Contains(msg, "16 KiB limit") || !strings.Contains(msg, "--max-decompressed SIZE raises it") {
			t.Errorf("%v: exit %d, %q; want 1 and the limit with the flag", args, code, msg)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"info", "--max-decompressed", "64MiB", p}, nil, &stdout, &stderr); code != 0 {
		t.Errorf("under the limit: exit %d, %s", code, stderr.String())
	}
}
