package record

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// TestSummaryNothing: the one line when nothing was written, for each
// reason the job's processes report.
func TestSummaryNothing(t *testing.T) {
	o := Options{OnOOM: true, Steps: []int{3}}
	for _, tc := range []struct {
		events []Event
		sig    syscall.Signal
		want   string
	}{
		{nil, 0, "nothing recorded: no process of the job imported torch"},
		{[]Event{{Event: "torch", PID: 1}, {Event: "torch", PID: 2}}, 0, "nothing recorded: 2 processes imported torch, none used CUDA"},
		{[]Event{{Event: "torch", PID: 1}, {Event: "cuda", PID: 1, Rank: 3, History: no(), Error: "RuntimeError: no"}}, 0,
			"nothing recorded: memory history could not be turned on (rank 3: RuntimeError: no)"},
		{[]Event{{Event: "torch", PID: 1, Rank: 5}, {Event: "skip", PID: 1, Rank: 5}}, 0, "nothing recorded: no process of the ranks in --ranks used CUDA (ranks skipped: 5)"},
		{[]Event{{Event: "torch", PID: 1}, {Event: "cuda", PID: 1, History: yes()}, {Event: "torch", PID: 2, Rank: 1}, {Event: "cuda", PID: 2, Rank: 1, History: yes()}}, syscall.SIGTERM,
			"the job was killed by signal 15 (terminated); nothing recorded: ranks 0,1 used CUDA, but no requested step was reached, there was no OOM, --at-exit was not given"},
	} {
		var b bytes.Buffer
		r := &Result{Dir: t.TempDir(), Events: tc.events, Signal: tc.sig, ExitCode: 128 + int(tc.sig)}
		if tc.sig == 0 {
			r.ExitCode = 0
		}
		WriteSummary(&b, r, o, "snaps")
		if strings.Count(b.String(), "\n") != 1 || !strings.Contains(b.String(), tc.want) {
			t.Errorf("summary %q, want one line with %q", b.String(), tc.want)
		}
	}
}

// TestSummaryFiles: per rank its files, sizes and steps; the commands
// compare ranks at the last step all of them dumped, and name the OOM.
func TestSummaryFiles(t *testing.T) {
	dir := t.TempDir()
	var evs []Event
	file := func(rank int, kind string, step int, name string, size int) {
		p := filepath.Join(dir, name)
		os.WriteFile(p, make([]byte, size), 0o644)
		evs = append(evs, Event{Event: "file", Rank: rank, Kind: kind, Step: step, Path: p})
	}
	file(0, "step", 2, "rank0-step2.pickle", 1000)
	file(0, "step", 4, "rank0-step4.pickle", 2000)
	file(1, "step", 2, "rank1-step2.pickle", 1024)
	file(1, "oom", 0, "rank1-oom.pickle", 4096)
	file(1, "step", 2, "rank1-step2.pickle", 1024) // reported twice: listed once
	var b bytes.Buffer
	WriteSummary(&b, &Result{Dir: dir, Events: evs, ExitCode: 1}, Options{OnOOM: true, Every: 2}, "out dir")
	want := `gpumem record: the job exited with status 1; wrote 4 files to out dir:
rank  snapshots                              size    steps  monitor
0     rank0-step2.pickle rank0-step4.pickle  3000 B  2,4    -
1     rank1-step2.pickle rank1-oom.pickle    5120 B  2      -
look at them:
  gpumem ranks 'out dir'/rank*-step2.pickle
  gpumem serve 'out dir/rank0-step2.pickle'
  gpumem steps 'out dir/rank0-step4.pickle'
  gpumem oom 'out dir/rank1-oom.pickle'
`
	if b.String() != want {
		t.Errorf("summary:\n%s\nwant\n%s", b.String(), want)
	}
}
