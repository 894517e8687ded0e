package alloc

import (
	"strings"
	"testing"
)

// TestRunScriptFrom: the script's and the settings' mistakes are errors;
// what stops the run is its Err, naming the script, after the steps before
// it; the final statistics are the allocator's.
func TestRunScriptFrom(t *testing.T) {
	for _, tc := range []struct {
		name, script, config string
		capacity             uint64
		err, runErr          string
		steps                int
		reserved             int64
	}{
		{"runs", "alloc a 3MiB\nalloc b 1000\n", "", 0, "", "", 2, 22 * MiB},
		{"settings", "alloc a 3MiB\n", "expandable_segments:True", 0, "", "", 1, -1},
		{"bad script", "grow a 3MiB\n", "", 0, "s.txt: ", "", 0, 0},
		{"bad settings", "alloc a 3MiB\n", "roundup:x", 0, "roundup", "", 0, 0},
		{"stops", "alloc a 3MiB\nfree x\nalloc c 1MiB\n", "", 0, "", "s.txt: line 2: x is not allocated", 1, -1},
	} {
		run, err := RunScriptFrom(strings.NewReader(tc.script), "s.txt", tc.config, Options{Capacity: tc.capacity})
		if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.err)
		}
		if err != nil {
			continue
		}
		if (run.Err == nil) != (tc.runErr == "") || run.Err != nil && !strings.HasPrefix(run.Err.Error(), tc.runErr) {
			t.Errorf("%s: run error %v, want %q", tc.name, run.Err, tc.runErr)
		}
		if len(run.Steps) != tc.steps {
			t.Errorf("%s: %d steps, want %d", tc.name, len(run.Steps), tc.steps)
		}
		if tc.config != "" && !strings.Contains(run.Config.String(), "expandable_segments:True") {
			t.Errorf("%s: config %s", tc.name, run.Config.String())
		}
		if tc.reserved >= 0 && run.Final.ReservedBytes[PoolAll].Current != tc.reserved {
			t.Errorf("%s: reserved %d, want %d", tc.name, run.Final.ReservedBytes[PoolAll].Current, tc.reserved)
		}
	}
}

// TestCheckScript: a script records no OOM to take the capacity from.
func TestCheckScript(t *testing.T) {
	for _, tc := range []struct {
		capacity string
		ok       bool
	}{{"", true}, {"80GiB", true}, {"oom", false}} {
		r := SimRequest{Capacity: tc.capacity}
		if err := r.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := r.CheckScript(); (err == nil) != tc.ok {
			t.Errorf("--capacity %q: %v", tc.capacity, err)
		}
	}
}
