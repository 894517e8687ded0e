//go:build linux || darwin

package record

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func opts(t *testing.T) Options {
	return Options{Dir: filepath.Join(t.TempDir(), "snaps"), OnOOM: true, MaxEntries: 100000, Stacks: "python"}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		code   int
		sig    syscall.Signal
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"kill -KILL $$", 128 + 9, syscall.SIGKILL},
		{"kill -TERM $$", 128 + 15, syscall.SIGTERM},
	} {
		var out, errb bytes.Buffer
		r, err := Run(context.Background(), opts(t), []string{"sh", "-c", tc.script}, Streams{nil, &out, &errb})
		if err != nil {
			t.Fatalf("%s: %v", tc.script, err)
		}
		if r.ExitCode != tc.code || r.Signal != tc.sig {
			t.Errorf("%s: exit %d signal %v, want %d %v", tc.script, r.ExitCode, r.Signal, tc.code, tc.sig)
		}
	}
	if _, err := Run(context.Background(), opts(t), []string{"no-such-command-gpumem"}, Streams{}); err == nil || !strings.Contains(err.Error(), "command not found") {
		t.Errorf("missing command: %v", err)
	}
}

func TestStreamsUntouched(t *testing.T) {
	var out, errb bytes.Buffer
	in := strings.NewReader("line one\nline two\n")
	r, err := Run(context.Background(), opts(t), []string{"sh", "-c", "cat; printf 'to stderr\\n' >&2; printf 'no newline'"}, Streams{in, &out, &errb})
	if err != nil || r.ExitCode != 0 {
		t.Fatal(err, r)
	}
	if out.String() != "line one\nline two\nno newline" || errb.String() != "to stderr\n" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
}

// TestSignalForwarding sends SIGTERM and SIGINT to this process while Run
// waits: each reaches the command, which says so and exits with its own
// status. SIGINT from the terminal (terminalSent) is not sent a second
// time; SIGTERM always is.
func TestSignalForwarding(t *testing.T) {
	defer func(f func() bool) { terminalSent = f }(terminalSent)
	for _, tc := range []struct {
		sig      syscall.Signal
		terminal bool
		want     string
		code     int
	}{
		{syscall.SIGTERM, false, "got TERM\n", 7},
		{syscall.SIGINT, false, "got INT\n", 8},
		{syscall.SIGHUP, false, "got HUP\n", 9},
		{syscall.SIGTERM, true, "got TERM\n", 7},
		{syscall.SIGINT, true, "", 0}, // the terminal already sent it to the job: not again (the job runs to its end)
	} {
		terminalSent = func() bool { return tc.terminal }
		pr, pw := io.Pipe()
		var errb bytes.Buffer
		type res struct {
			r   *Result
			err error
		}
		done := make(chan res, 1)
		script := `trap 'echo got TERM; exit 7' TERM; trap 'echo got INT; exit 8' INT; trap 'echo got HUP; exit 9' HUP
echo ready; i=0; while [ $i -lt 20 ]; do sleep 0.05; i=$((i+1)); done`
		go func() {
			r, err := Run(context.Background(), opts(t), []string{"sh", "-c", script}, Streams{nil, pw, &errb})
			pw.Close()
			done <- res{r, err}
		}()
		sc := bufio.NewScanner(pr)
		if !sc.Scan() || sc.Text() != "ready" {
			t.Fatalf("no ready line: %q", sc.Text())
		}
		syscall.Kill(os.Getpid(), tc.sig)
		var rest strings.Builder
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
		}
		got := <-done
		if got.err != nil {
			t.Fatal(got.err)
		}
		if rest.String() != tc.want || got.r.ExitCode != tc.code {
			t.Errorf("%v (terminal %v): output %q exit %d, want %q %d", tc.sig, tc.terminal, rest.String(), got.r.ExitCode, tc.want, tc.code)
		}
	}
}

func TestEnviron(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want []string
	}{
		{[]string{"HOME=/h"}, []string{"HOME=/h", "PYTHONPATH=/rec", "GPUMEM_RECORD={}"}},
		{[]string{"PYTHONPATH=", "A=1"}, []string{"A=1", "PYTHONPATH=/rec", "GPUMEM_RECORD={}"}},
		{[]string{"PYTHONPATH=/a:/b", "GPUMEM_RECORD=old"}, []string{"PYTHONPATH=/rec:/a:/b", "GPUMEM_RECORD={}"}},
	} {
		if got := Environ(tc.env, "/rec", "{}"); !slices.Equal(got, tc.want) {
			t.Errorf("Environ(%q) = %q, want %q", tc.env, got, tc.want)
		}
	}
}

// TestSitecustomizeChains runs a real Python under Run with a
// sitecustomize of the user's on PYTHONPATH: it still runs, after gpumem's
// directory, and PYTHONPATH keeps the user's entry.
func TestSitecustomizeChains(t *testing.T) {
	py := python3(t)
	user := t.TempDir()
	os.WriteFile(filepath.Join(user, "sitecustomize.py"), []byte("import sys\nsys.stdout.write('user sitecustomize ran\\n')\n"), 0o644)
	t.Setenv("PYTHONPATH", user)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
	var out, errb bytes.Buffer
	r, err := Run(context.Background(), opts(t), []string{py, "-c", `import os, sys, gpumem; pp = os.environ["PYTHONPATH"].split(os.pathsep); print(len(pp), pp[1], "torch" in sys.modules)`}, Streams{nil, &out, &errb})
	if err != nil || r.ExitCode != 0 {
		t.Fatal(err, r, errb.String())
	}
	if want := "user sitecustomize ran\n2 " + user + " False\n"; out.String() != want || errb.String() != "" {
		t.Errorf("stdout %q stderr %q, want %q and nothing", out.String(), errb.String(), want)
	}
	if len(r.Events) != 0 {
		t.Errorf("events without torch: %+v", r.Events)
	}
}

// python3 is the python3 on PATH; a missing one fails under CI.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 not on PATH (CI=true)")
		}
		t.Skip("python3 not on PATH")
	}
	return py
}

// TestPythonUnittests runs python/tests (stdlib unittest): with the
// python3 on PATH (the fake of torch.cuda), and with Debian's
// /usr/bin/python3, which must have python3-torch (a real PyTorch 1.13
// without CUDA). Under CI a missing interpreter or torch fails.
func TestPythonUnittests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, tc := range []struct {
		name, py string
		torch    bool
	}{
		{"PATH python3", "", false},
		{"Debian python3 with torch", "/usr/bin/python3", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			py := tc.py
			if py == "" {
				py = python3(t)
			}
			if tc.torch {
				if err := exec.Command(py, "-c", "import torch").Run(); err != nil {
					if os.Getenv("CI") == "true" {
						t.Fatalf("%s cannot import torch (CI=true: .ci/run installs python3-torch): %v", py, err)
					}
					t.Skipf("%s cannot import torch (apt-get install python3-torch)", py)
				}
			}
			cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "python/tests", "-v")
			cmd.Dir = "../.."
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPATH=")
			if tc.torch {
				cmd.Env = append(cmd.Env, "GPUMEM_REQUIRE_TORCH=1")
			}
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s -m unittest: %v\n%s", py, err, out)
			}
			if tc.torch && !bytes.Contains(out, []byte("test_cuda_start_without_cuda_one_warning (test_gpumem.RealTorch")) {
				t.Errorf("the RealTorch tests did not run:\n%s", out)
			}
			if tc.torch && bytes.Contains(out, []byte("skipped")) {
				t.Errorf("tests skipped with a real torch:\n%s", out)
			}
			t.Logf("%s: %s", py, time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestIgnoredSignalStaysIgnored: SIGINT ignored when gpumem starts (nohup,
// "cmd &" in a script) is still ignored in the command.
func TestIgnoredSignalStaysIgnored(t *testing.T) {
	py := python3(t)
	signal.Ignore(os.Interrupt)
	defer signal.Reset(os.Interrupt)
	var out bytes.Buffer
	r, err := Run(context.Background(), opts(t), []string{py, "-c", "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"}, Streams{nil, &out, io.Discard})
	if err != nil || r.ExitCode != 0 || out.String() != "True\n" {
		t.Errorf("%v %+v %q", err, r, out.String())
	}
}
