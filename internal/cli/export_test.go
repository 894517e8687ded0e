package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs gpumem with args and returns its exit status and streams.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestExportCLI(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pickle")
	os.WriteFile(bad, []byte("\x80\x04\x95garbage"), 0o644)
	tests := []struct {
		args []string
		code int
		out  string // file written, "" for none
	}{
		{[]string{"export", "perfetto", "--demo", "-o", filepath.Join(dir, "p.json")}, 0, "p.json"},
		{[]string{"export", "json", "--demo", "--device", "0", "-o", filepath.Join(dir, "m.json")}, 0, "m.json"},
		{[]string{"export", "perfetto", bad, "-o", filepath.Join(dir, "x.json")}, 1, ""},
		{[]string{"export", "nope", "--demo"}, 2, ""},
		{[]string{"export", "json"}, 2, ""},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(tt.args...)
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d (%s)", tt.args, code, tt.code, stderr)
		}
		if code == 1 && strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: error is not one line: %q", tt.args, stderr)
		}
		if tt.out != "" {
			b, err := os.ReadFile(filepath.Join(dir, tt.out))
			if err != nil || !json.Valid(b) {
				t.Errorf("%v: %s not valid JSON (%v)", tt.args, tt.out, err)
			}
		}
	}
	// Atomic writes leave no temporary files, and a failed export no output.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "bad.pickle m.json p.json" {
		t.Errorf("directory holds %q", got)
	}
}
