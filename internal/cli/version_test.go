package cli

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/version"
)

func TestVersionCommand(t *testing.T) {
	want := version.Get().String()
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stdout string // exact, "" = must be empty
		stderr string // substring, "" = must be empty
	}{
		{"command", []string{"version"}, 0, want, ""},
		{"--version", []string{"--version"}, 0, want, ""},
		{"-version", []string{"-version"}, 0, want, ""},
		{"extra argument", []string{"version", "x"}, 2, "", `unexpected argument "x"`},
		{"bad flag", []string{"version", "--nope"}, 2, "", "unknown flag --nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := runMain(t, nil, tc.args...)
			if status != tc.status || stdout != tc.stdout {
				t.Errorf("status %d stdout %q, want %d %q", status, stdout, tc.status, tc.stdout)
			}
			if tc.stderr == "" && stderr != "" || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("stderr %q, want %q", stderr, tc.stderr)
			}
		})
	}
	for _, args := range [][]string{{"version", "--json"}, {"--version", "--json"}} {
		status, stdout, _ := runMain(t, nil, args...)
		var got version.Info
		if err := json.Unmarshal([]byte(stdout), &got); status != 0 || err != nil {
			t.Fatalf("%v: status %d, %v: %q", args, status, err, stdout)
		}
		if got != version.Get() || got.Go != runtime.Version() || got.OS != runtime.GOOS {
			t.Errorf("%v = %+v, want %+v", args, got, version.Get())
		}
	}
}
