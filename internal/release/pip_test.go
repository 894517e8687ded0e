package release

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/cli"
	"github.com/gpumem/gpumem/internal/corpus"
)

// TestWheelInstallsWithPip builds this machine's release binary (one
// build: linux/amd64 in CI), packs its wheel, checks it with Python's
// zipfile and scripts/check_wheel.py, installs it with pip into a fresh
// venv without any index, imports the gpumem module from it, and runs
// "gpumem version" and "gpumem info --demo" as found on the venv's PATH.
func TestWheelInstallsWithPip(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the release build and pip install")
	}
	tg, ok := LookupTarget(runtime.GOOS, runtime.GOARCH)
	if !ok {
		t.Skipf("%s/%s is not a release target", runtime.GOOS, runtime.GOARCH)
	}
	python := corpus.Tool(t, "python3", "the wheel is installed with its pip; Debian: apt-get install python3 python3-venv")
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	if out, err := exec.Command(python, "-m", "venv", venv).CombinedOutput(); err != nil {
		corpus.Missing(t, "python3 -m venv does not work here (Debian: apt-get install python3-venv): %v: %s", err, out)
	}

	ctx := context.Background()
	bin := filepath.Join(dir, "build", tg.Exe())
	if err := Build(ctx, "../..", tg, testStamp, bin); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckBinary(bin, tg); err != nil {
		t.Fatal(err)
	}
	if err := checkStamp(ctx, bin, testStamp); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	readme, _ := os.ReadFile("../../README.md")
	lic, _ := os.ReadFile("../../LICENSE")
	whlData, err := Wheel(tg, testStamp, b, readme, lic)
	if err != nil {
		t.Fatal(err)
	}
	whl := filepath.Join(dir, WheelName(testStamp.Version, tg))
	if err := os.WriteFile(whl, whlData, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := run(t, nil, python, "-m", "zipfile", "-t", whl); out != "Done testing\n" {
		t.Errorf("python3 -m zipfile -t: %q", out)
	}
	run(t, nil, python, "../../scripts/check_wheel.py", whl)

	scripts := filepath.Join(venv, "bin")
	if runtime.GOOS == "windows" {
		scripts = filepath.Join(venv, "Scripts")
	}
	env := []string{"PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1", "PIP_CONFIG_FILE=" + os.DevNull}
	run(t, env, filepath.Join(scripts, "python"), "-m", "pip", "install", "--no-index", "--no-deps", "--quiet", whl)
	meta := run(t, nil, filepath.Join(scripts, "python"), "-c",
		"import importlib.metadata as m; d = m.distribution('gpumem'); print(d.version, d.metadata['License-Expression'], d.metadata['Requires-Python'])")
	if meta != "9.8.7rc1 MIT >=3.8\n" {
		t.Errorf("installed metadata: %q", meta)
	}

	// The recorder module: import gpumem works in a venv without PyTorch,
	// from site-packages, with the wheel's version.
	mod := run(t, nil, filepath.Join(scripts, "python"), "-c",
		"import sys, gpumem; print(gpumem.__version__, 'torch' in sys.modules, callable(gpumem.Monitor), gpumem.__file__.startswith(sys.prefix))")
	if mod != "9.8.7rc1 False True True\n" {
		t.Errorf("import gpumem in the venv: %q, want version 9.8.7rc1, no torch, from the venv", mod)
	}

	// Found by PATH lookup, as a user's shell would after activating the venv.
	t.Setenv("PATH", scripts+string(os.PathListSeparator)+os.Getenv("PATH"))
	gpumem, err := exec.LookPath("gpumem")
	if err != nil || filepath.Dir(gpumem) != scripts {
		t.Fatalf("gpumem on PATH is %q (%v), want the venv's", gpumem, err)
	}
	want := "gpumem 9.8.7rc1\ncommit      0123456789abcdef0123456789abcdef01234567\nbuild date  2026-11-25T14:03:22Z\n"
	if got := run(t, nil, "gpumem", "version"); !strings.HasPrefix(got, want) {
		t.Errorf("gpumem version:\n%s\nwant it to start with\n%s", got, want)
	}
	// The installed binary answers like the code under test.
	var wantInfo, errOut bytes.Buffer
	if code := cli.Main([]string{"info", "--demo"}, nil, &wantInfo, &errOut); code != 0 {
		t.Fatalf("in-process gpumem info --demo: %d %s", code, errOut.String())
	}
	if got := run(t, nil, "gpumem", "info", "--demo"); got != wantInfo.String() || !strings.Contains(got, "peak active") {
		t.Errorf("installed gpumem info --demo:\n%s\nwant\n%s", got, wantInfo.String())
	}
}

// run runs a command with extra environment and returns its stdout,
// failing the test when it fails.
func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
