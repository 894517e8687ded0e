//go:build linux || darwin

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
)

func TestRecordUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record"}, "gpumem record: no command given"},
		{[]string{"record", "--stacks", "cpp", "--", "true"}, `gpumem record: --stacks wants python or all, not "cpp"`},
		{[]string{"record", "--monitor=0", "--", "true"}, "invalid value \"0\" for --monitor: want --monitor or --monitor=K with K >= 1 steps"},
		{[]string{"record", "--step", "0", "--", "true"}, `want numbers >= 1 separated by commas, not "0"`},
		{[]string{"record", "--max-entries", "0", "--", "true"}, "gpumem record: --max-entries wants at least 1"},
	} {
		code, _, stderr := runCLI(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, code, firstLine(stderr), tc.want)
		}
	}
	if code, _, stderr := runCLI("record", "--dir", t.TempDir(), "--", "no-such-command-gpumem"); code != 127 || stderr != "gpumem record: no-such-command-gpumem: command not found\n" {
		t.Errorf("missing command: exit %d %q", code, stderr)
	}
}

func firstLine(s string) string { return strings.SplitN(s, "\n", 2)[0] }

// TestRecordNothing: a command that never imports torch runs as it would,
// and the summary is one line.
func TestRecordNothing(t *testing.T) {
	code, stdout, stderr := runCLI("record", "--dir", t.TempDir(), "--", "sh", "-c", "echo out; exit 3")
	want := "gpumem record: the job exited with status 3; nothing recorded: no process of the job imported torch (Python run with -I, -E or -S does not load gpumem)\n"
	if code != 3 || stdout != "out\n" || stderr != want {
		t.Errorf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runCLI("record", "--dir", t.TempDir(), "--", "sh", "-c", "kill -KILL $$")
	if code != 137 || !strings.HasPrefix(stderr, "gpumem record: the job was killed by signal 9 (killed); nothing recorded") {
		t.Errorf("killed: exit %d %q", code, stderr)
	}
}

const fakeJob = `
import os, torch
base = torch.cuda.fake_alloc(100 << 20)
opt = torch.optim.SGD()
spike = int(os.environ.get("SPIKE", "0"))
for step in range(1, 6):
    act = torch.cuda.fake_alloc((50 + (spike if step == 4 else 0)) << 20)
    act.free()
    opt.step()
print("rank", os.environ["RANK"], "done")
`

// TestRecordTwoRanksFakeTorch records a two-rank job (a launcher starting
// two Python processes with RANK set, as torchrun does) against the fake
// of torch.cuda in python/tests: per rank a step snapshot, an exit snapshot
// and a monitor file; the summary lists them; gpumem reads every file; the
// info --json summaries give ranks the same peaks as the snapshots.
func TestRecordTwoRanksFakeTorch(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not on PATH (CI=true)")
		}
		t.Skip("python3 not on PATH")
	}
	fake, _ := filepath.Abs("../../python/tests/fake_torch")
	t.Setenv("PYTHONPATH", fake)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	work := t.TempDir()
	job := filepath.Join(work, "job.py")
	os.WriteFile(job, []byte(fakeJob), 0o644)
	dir := filepath.Join(work, "snaps")
	launcher := fmt.Sprintf("RANK=0 %[1]s %[2]s & RANK=1 SPIKE=400 %[1]s %[2]s; wait", py, job)
	code, stdout, stderr := runCLI("record", "--dir", dir, "--step", "3", "--monitor", "--at-exit", "--", "sh", "-c", launcher)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// The two ranks write at once: their lines may interleave, but every
	// byte the job wrote must come through, and nothing else.
	if len(stdout) != len("rank 0 done\nrank 1 done\n") || !strings.Contains(stdout, "rank 0 done") || !strings.Contains(stdout, "rank 1 done") {
		t.Errorf("stdout %q", stdout)
	}
	want := regexp.MustCompile(`^gpumem record: the job exited with status 0; wrote 6 files to \S+/snaps:
rank  snapshots +size +steps  monitor
0     rank0-step3.pickle rank0-exit.pickle  \d+(\.\d+)? (B|KiB)  3      rank0-steps.jsonl \(5 lines\)
1     rank1-step3.pickle rank1-exit.pickle  \d+(\.\d+)? (B|KiB)  3      rank1-steps.jsonl \(5 lines\)
look at them:
  gpumem ranks \S+/snaps/rank\*-step3.pickle
  gpumem serve \S+/snaps/rank0-step3.pickle
  gpumem steps \S+/snaps/rank0-step3.pickle
  gpumem ranks \S+/snaps/\*-steps.jsonl
$`)
	if !want.MatchString(stderr) {
		t.Errorf("summary:\n%s", stderr)
	}

	// Every snapshot opens; rank 1's exit snapshot holds its spike.
	steps, _ := filepath.Glob(filepath.Join(dir, "*step*.pickle"))
	exits, _ := filepath.Glob(filepath.Join(dir, "*exit*.pickle"))
	if len(steps) != 2 || len(exits) != 2 {
		t.Fatalf("files: %v %v", steps, exits)
	}
	var summaries []string
	for _, f := range append(steps, exits...) {
		code, out, stderr := runCLI("info", "--json", f)
		if code != 0 {
			t.Fatalf("info %s: %s", f, stderr)
		}
		if strings.Contains(f, "exit") {
			s := filepath.Join(work, strings.TrimSuffix(filepath.Base(f), ".pickle")+".json")
			os.WriteFile(s, []byte(out), 0o644)
			summaries = append(summaries, s)
		}
	}
	ranksOf := func(files ...string) analysis.Ranks {
		t.Helper()
		code, out, stderr := runCLI(append([]string{"ranks", "--json"}, files...)...)
		if code != 0 {
			t.Fatalf("ranks %q: %s", files, stderr)
		}
		var r analysis.Ranks
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	fromSnaps, fromSummaries := ranksOf(exits...), ranksOf(summaries...)
	for i := range 2 {
		a, b := fromSnaps.Ranks[i], fromSummaries.Ranks[i]
		if a.Rank != i || b.Rank != i || a.PeakAllocatedBytes != b.PeakAllocatedBytes || a.PeakReservedBytes != b.PeakReservedBytes || b.Source != "info summary" {
			t.Errorf("rank %d: snapshot row %+v, summary row %+v", i, a, b)
		}
	}
	if got := fromSnaps.Ranks[1].PeakAllocatedBytes - fromSnaps.Ranks[0].PeakAllocatedBytes; got != 400<<20 {
		t.Errorf("rank 1's spike: %d bytes over rank 0, want 400 MiB", got)
	}

	// The monitor files: interval peaks reset after each report, so rank
	// 1's step 4 spike is a jump and the other steps are not.
	mons, _ := filepath.Glob(filepath.Join(dir, "*-steps.jsonl"))
	r := ranksOf(mons...)
	if len(r.Ranks) != 2 || r.Ranks[1].PeakStep == nil || *r.Ranks[1].PeakStep != 4 || len(r.Ranks[1].Jumps) != 1 || len(r.Ranks[0].Jumps) != 0 ||
		r.Ranks[1].PeakAllocatedBytes != 550<<20 || r.Ranks[0].PeakAllocatedBytes != 150<<20 {
		t.Errorf("ranks of the monitor files: %+v %+v", r.Ranks[0], r.Ranks[1])
	}
	code, out, stderr := runCLI("steps", filepath.Join(dir, "rank1-steps.jsonl"))
	if code != 0 || !strings.Contains(out, "peak jump: step 4: 550 MiB, 400 MiB over the median interval peak (+266.7%)") ||
		!strings.Contains(out, "\n3     100 MiB    150 MiB ") {
		t.Errorf("steps on the monitor file (exit %d %s):\n%s", code, stderr, out)
	}
}

// TestRanksThousandSummaries: a thousand per-rank info --json summaries
// (as a Slurm array writes them) make one table of a thousand rows, with
// the one rank that peaks 30% higher as the outlier. (The time is in
// BenchmarkRanksSummaries.)
func TestRanksThousandSummaries(t *testing.T) {
	files := thousandSummaries(t, t.TempDir())
	code, out, stderr := runCLI(append([]string{"ranks", "--json"}, files...)...)
	if code != 0 {
		t.Fatal(stderr)
	}
	var r analysis.Ranks
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Ranks) != 1000 || r.Ranks[999].Rank != 999 || r.Outlier == nil || r.Outlier.Rank != 417 || stderr != "" {
		t.Errorf("%d rows, last %+v, outlier %+v, stderr %q", len(r.Ranks), r.Ranks[len(r.Ranks)-1], r.Outlier, stderr)
	}
	code, text, _ := runCLI(append([]string{"ranks"}, files...)...)
	if code != 0 || strings.Count(text, "\n") != 1000+5 || strings.Count(text, "rank  peak active") != 1 {
		t.Errorf("text: exit %d, %d lines", code, strings.Count(text, "\n"))
	}
}

func thousandSummaries(tb testing.TB, dir string) []string {
	code, out, stderr := runCLI("info", "--json", "--demo")
	if code != 0 {
		tb.Fatal(stderr)
	}
	var files []string
	for i := range 1000 {
		var m map[string]any
		json.Unmarshal([]byte(out), &m)
		m["file"] = fmt.Sprintf("/scratch/job/rank%d-step100.pickle", i)
		d := m["devices"].([]any)[0].(map[string]any)
		peak := d["active_timeline_peak_bytes"].(float64)
		d["active_timeline_peak_bytes"] = uint64(peak * (1 + float64(i%7)/1000))
		if i == 417 {
			d["active_timeline_peak_bytes"] = uint64(peak * 1.3)
		}
		b, _ := json.MarshalIndent(m, "", "  ")
		f := filepath.Join(dir, fmt.Sprintf("summary-%04d.json", i)) // the rank comes from the file inside
		os.WriteFile(f, b, 0o644)
		files = append(files, f)
	}
	return files
}

// BenchmarkRanksSummaries: gpumem ranks on a thousand info --json
// summaries (the issue asks for under 2 s).
func BenchmarkRanksSummaries(b *testing.B) {
	files := thousandSummaries(b, b.TempDir())
	b.ResetTimer()
	for range b.N {
		if code, _, stderr := runCLI(append([]string{"ranks"}, files...)...); code != 0 {
			b.Fatal(stderr)
		}
	}
}

func TestRanksBadSummary(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct{ data, want string }{
		"trunc.json": {`{"file": "x", "generation": "D3", "devices": [`, "trunc.json: not a gpumem info --json summary: unexpected EOF"},
		"nodev.json": {`{"file": "x", "generation": "D3", "devices": []}`, "nodev.json: not a gpumem info --json summary (no generation or devices)"},
		"many.json":  {`[{"file": "a", "generation": "D3"}, {"file": "b", "generation": "D3"}]`, "many.json: holds the summaries of several snapshots"},
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(tc.data), 0o644)
		code, _, stderr := runCLI("ranks", p)
		if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d %q, want %q", name, code, stderr, tc.want)
		}
	}
}

// TestRecordRealTorchWithoutCUDA runs a CPU training step under gpumem
// record with Debian's /usr/bin/python3 and its PyTorch 1.13 (no CUDA):
// the job's output is what it is without gpumem, no recorder line, and the
// summary says torch was imported but CUDA never used.
func TestRecordRealTorchWithoutCUDA(t *testing.T) {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s cannot import torch (CI=true: .ci/run installs python3-torch): %v", py, err)
		}
		t.Skipf("%s cannot import torch", py)
	}
	t.Setenv("PYTHONPATH", "")
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	script := `import torch
torch.manual_seed(0)
m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)
loss = m(torch.randn(8, 4)).square().mean(); loss.backward(); opt.step()
print("loss %.6f cuda %s" % (loss.item(), torch.cuda.is_initialized()))`
	plain, err := exec.Command(py, "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("record", "--dir", t.TempDir(), "--step", "1", "--monitor", "--", py, "-c", script)
	want := "gpumem record: the job exited with status 0; nothing recorded: 1 process imported torch, none used CUDA\n"
	if code != 0 || stdout != string(plain) || stderr != want {
		t.Errorf("exit %d\nstdout %q (without gpumem %q)\nstderr %q\nwant   %q", code, stdout, plain, stderr, want)
	}
}
