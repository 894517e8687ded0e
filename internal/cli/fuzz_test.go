package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzDecodeThenCommands decodes arbitrary input as a snapshot (on
// standard input, as "gpumem CMD -" reads it, or from a file for the
// commands of two) and runs every command that reads one on it: each exits 0, or 1 with one line on stderr; never 2
// (no usage error for an input), never an internal error (a panic).
func FuzzDecodeThenCommands(f *testing.F) {
	for _, name := range []string{"no-oom.json", "oom-twice.json", "oom-outside.json"} {
		if b, err := os.ReadFile(filepath.Join("..", "analysis", "testdata", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 2, "stream": 0}]]}`))
	f.Add([]byte(`{"segments": [{"device": 1, "address": 4096, "total_size": 2097152, "stream": 0, "blocks": [{"address": 4096, "size": 2097152, "state": "active_allocated", "requested_size": 100}]}], "device_traces": [[], [{"action": "free_requested", "addr": 4096, "size": 100, "stream": 0, "time_us": 5}, {"action": "oom", "addr": 0, "size": 1048576, "stream": 0}]]}`))
	f.Add([]byte("\x80\x04}(\x8c\x08segments]u."))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		out := filepath.Join(dir, "out")
		in := filepath.Join(dir, "in")
		if err := os.WriteFile(in, b, 0o644); err != nil {
			t.Fatal(err)
		}
		cmds := [][]string{
			{"info", "-"}, {"info", "--json", "-"}, {"peak", "-"}, {"peak", "--json", "--at", "end", "-"},
			{"oom", "-"}, {"oom", "--json", "-"}, {"stats", "-"}, {"steps", "-"}, {"steps", "--json", "-"},
			{"trace", "-"}, {"export", "perfetto", "-"}, {"export", "json", "-"}, {"export", "pprof", "-o", out + ".pb.gz", "-"},
			{"flame", "memory", "--collapsed", "-"}, {"flame", "segments", "-"}, {"flame", "peak", "--collapsed", "-"},
			{"html", "-", "-o", out + ".html"}, {"diff", in, in}, {"ranks", in}, {"sim", "-"},
		}
		for _, args := range cmds {
			var stdout, stderr bytes.Buffer
			code := Main(args, bytes.NewReader(b), &stdout, &stderr)
			msg := stderr.String()
			if strings.Contains(msg, "internal error") || strings.Contains(msg, "panic") {
				t.Fatalf("gpumem %s: %s", strings.Join(args, " "), msg)
			}
			switch code {
			case 0:
			case 1:
				if strings.Count(strings.TrimRight(msg, "\n"), "\n") != 0 || strings.TrimSpace(msg) == "" {
					t.Fatalf("gpumem %s: exit 1 with %q, want one line", strings.Join(args, " "), msg)
				}
			default:
				t.Fatalf("gpumem %s: exit %d: %s", strings.Join(args, " "), code, msg)
			}
		}
	})
}
