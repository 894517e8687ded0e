package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runCLI runs gpumem with args and returns its exit status and streams.
func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestMissingDeviceIsAnError: every command given a device the snapshot
// lacks fails with the one message naming the input (not an empty output).
func TestMissingDeviceIsAnError(t *testing.T) {
	for _, args := range [][]string{
		{"export", "perfetto"}, {"export", "json"}, {"export", "pprof"},
		{"flame", "memory"}, {"flame", "segments"}, {"flame", "peak"},
		{"html", "-o", filepath.Join(t.TempDir(), "x.html")}, {"steps"}, {"peak"}, {"oom"}, {"trace"},
	} {
		args = append(args, "--demo", "--device", "99")
		code, out, stderr := runCLI(args...)
		if code != 1 || out != "" || stderr != "gpumem "+args[0]+": demo: no device 99 (devices: 0)\n" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q", args, code, len(out), stderr)
		}
	}
}

// TestAnswerFlagValues: peak and oom reject what is not a device number
// and a negative --top, as usage mistakes.
func TestAnswerFlagValues(t *testing.T) {
	for _, args := range [][]string{
		{"peak", "--demo", "--device", "-1"}, {"oom", "--demo", "--device", "-2"},
		{"peak", "--demo", "--top", "-3"}, {"oom", "--demo", "--top", "-1"},
	} {
		if code, out, stderr := runCLI(args...); code != 2 || out != "" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want a usage error", args, code, len(out), stderr)
		}
	}
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

func TestFlameAndDiffCLI(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range []string{"memory", "segments", "peak", "diff"} {
		svg := filepath.Join(dir, kind+".svg")
		if code, _, stderr := runCLI("flame", kind, "--demo", "-o", svg); code != 0 {
			t.Fatalf("flame %s: exit %d: %s", kind, code, stderr)
		}
		code, folded, stderr := runCLI("flame", kind, "--demo", "--collapsed")
		if code != 0 {
			t.Fatalf("flame %s --collapsed: exit %d: %s", kind, code, stderr)
		}
		b, _ := os.ReadFile(svg)
		var root int64
		if _, err := fmt.Sscanf(string(b[bytes.Index(b, []byte(`<g class="f" data-o="0" data-v="`))+len(`<g class="f" data-o="0" data-v="`):]), "%d", &root); err != nil {
			t.Fatalf("%s: no root frame in the SVG: %v", kind, err)
		}
		var sum int64
		for _, line := range strings.Split(strings.TrimSpace(folded), "\n") {
			f := strings.Fields(line)
			v, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			sum += v
		}
		if sum != root || root == 0 {
			t.Errorf("flame %s: --collapsed sums to %d, SVG root %d", kind, sum, root)
		}
	}
	code, out, stderr := runCLI("diff", "--demo", "--json")
	if code != 0 {
		t.Fatalf("diff --json: exit %d: %s", code, stderr)
	}
	var r map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "categories_delta", "sites", "settings"} {
		if _, ok := r[k]; !ok {
			t.Errorf("diff --json lacks %q", k)
		}
	}
	if code, out, _ := runCLI("diff", "--demo", "--segments"); code != 0 || out != "only_before = []\nonly_after = []\n" {
		t.Errorf("diff --segments of the demo with itself: exit %d, %q", code, out)
	}
	if code, out, stderr := runCLI("diff", "--demo", "--json", "--device-a", "0", "--device-b", "0"); code != 0 || !strings.Contains(out, `"device": 0`) {
		t.Errorf("diff --device-a 0 --device-b 0: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI("diff", "--demo", "--device-b", "3"); code != 1 || !strings.Contains(stderr, "no device 3") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("diff --device-b 3 of the one-device demo: exit %d, %q", code, stderr)
	}
	if code, _, stderr := runCLI("flame", "peak", "--demo", "--at", "e999999"); code != 1 || strings.Count(stderr, "\n") != 1 {
		t.Errorf("flame --at out of range: exit %d, %q", code, stderr)
	}
}
