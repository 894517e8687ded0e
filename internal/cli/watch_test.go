package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/gpumon"
	"github.com/gpumem/gpumem/internal/web"
)

var watchT0 = time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)

// fakeBackend replays scripted samples, one every 50 ms of fake time:
// used[i][g] is GPU g's used GiB at sample i (of 80 GiB).
type fakeBackend struct {
	used  [][]float64
	i     int
	sleep time.Duration // real time between samples, for the terminal test
}

func (f *fakeBackend) Name() string { return "fake" }
func (f *fakeBackend) Close() error { return nil }

func (f *fakeBackend) Sample() (gpumon.Sample, error) {
	if f.i >= len(f.used) {
		return gpumon.Sample{}, io.EOF
	}
	time.Sleep(f.sleep)
	s := gpumon.Sample{Time: watchT0.Add(time.Duration(f.i) * 50 * time.Millisecond)}
	for g, u := range f.used[f.i] {
		b := uint64(u * (1 << 30))
		uuid := "GPU-fake-" + string(rune('0'+g))
		s.Devices = append(s.Devices, gpumon.Device{Index: g, UUID: uuid, Name: "Fake H100", MIG: -1, Used: b, Free: 80<<30 - b, Total: 80 << 30, Util: 60 + g, MemKnown: true})
		s.Procs = append(s.Procs, gpumon.Process{Device: g, UUID: uuid, PID: 4100 + g, Command: "python train.py --rank " + string(rune('0'+g)), Used: int64(b) - 1<<29})
	}
	f.i++
	return s, nil
}

// fakeRun is twelve samples of two GPUs: three 200 ms report periods of
// four samples each.
var fakeRun = [][]float64{
	{10, 1}, {20, 2}, {30, 3}, {25, 4}, // peak 30 / min 10 / mean 21.25
	{12, 5}, {14, 6}, {16, 7}, {11, 8}, // peak 16 (not 30: reset) / 11 / 13.25
	{40, 9}, {5, 10}, {6, 11}, {7, 75}, // peak 40 / 5 / 14.5; GPU 1 crosses 90% at the end
}

func useFake(t *testing.T, f *fakeBackend) {
	t.Helper()
	old := openWatchBackend
	openWatchBackend = func(time.Duration) (gpumon.Backend, error) { return f, nil }
	t.Cleanup(func() { openWatchBackend = old })
}

func TestWatchReportsLogAndReplay(t *testing.T) {
	useFake(t, &fakeBackend{used: fakeRun})
	dir := t.TempDir()
	logPath := filepath.Join(dir, "run.jsonl")
	marker := filepath.Join(dir, "alerted")
	code, out, errOut := runMain(t, nil, "watch", "--interval", "50ms", "--report", "200ms", "--count", "12", "--log", logPath,
		"--alert", "90", "--exec-on-alert", `echo "$GPUMEM_ALERT_GPU $GPUMEM_ALERT_PERCENT" >> `+marker)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	wantLines := []string{
		"14:00:00  GPU 0  peak 30.0GiB at 14:00:00.1  min 10.0GiB  mean 21.2GiB  of 80.0GiB  (samples: 4 since 14:00:00)",
		"          pid 4100    peak 29.5GiB   python train.py --rank 0",
		"14:00:00  GPU 0  peak 16.0GiB at 14:00:00.3  min 11.0GiB  mean 13.2GiB  of 80.0GiB  (samples: 4 since 14:00:00)",
		"14:00:00  GPU 0  peak 40.0GiB at 14:00:00.4  min 5.0GiB  mean 14.5GiB  of 80.0GiB  (samples: 4 since 14:00:00)",
		"14:00:00  GPU 1  peak 75.0GiB at 14:00:00.5  min 9.0GiB  mean 26.2GiB  of 80.0GiB  (samples: 4 since 14:00:00)",
	}
	for _, w := range wantLines {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if n := strings.Count(out, "GPU 0  peak"); n != 3 {
		t.Errorf("%d reports for GPU 0, want 3", n)
	}
	if want := "gpumem watch: warning: GPU 1 at 93.8% of its memory (75.0GiB of 80.0GiB), --alert 90%\n"; errOut != want {
		t.Errorf("stderr %q, want %q", errOut, want)
	}
	// --exec-on-alert runs once, in the background.
	var ran []byte
	for i := 0; i < 100 && len(ran) == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		ran, _ = os.ReadFile(marker)
	}
	if string(ran) != "1 93.8\n" {
		t.Errorf("--exec-on-alert wrote %q, want %q", ran, "1 93.8\n")
	}

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := gpumon.ReadLog(f, logPath)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Starts) != 1 || len(lg.Samples) != 24 || len(lg.Reports) != 6 || len(lg.Alerts) != 1 {
		t.Fatalf("log: %d starts, %d samples, %d reports, %d alerts", len(lg.Starts), len(lg.Samples), len(lg.Reports), len(lg.Alerts))
	}
	if r := lg.Reports[2]; r.GPU != 0 || r.Peak != 16<<30 || r.Min != 11<<30 || r.Samples != 4 {
		t.Errorf("second report of GPU 0: %+v", r)
	}

	code, rout, rerr := runMain(t, nil, "watch", "--replay", logPath)
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, rerr)
	}
	for _, w := range wantLines {
		if !strings.Contains(rout, w+"\n") {
			t.Errorf("replay lacks %q:\n%s", w, rout)
		}
	}
	for _, w := range []string{"run started 2026-11-25 14:00:00  backend fake  every 50ms  report every 200ms", "12 samples of 2 devices, 3 reports, 1 alerts",
		"14:00:00  alert: GPU 1 at 93.8% (75.0GiB of 80.0GiB), threshold 90%"} {
		if !strings.Contains(rout, w) {
			t.Errorf("replay lacks %q:\n%s", w, rout)
		}
	}
}

func TestWatchNoDriver(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("this machine has an NVIDIA driver")
	}
	t.Setenv("PATH", t.TempDir()) // no nvidia-smi; NVML finds no libnvidia-ml
	code, out, errOut := runMain(t, nil, "watch")
	if code != 1 || out != "" || errOut != "gpumem watch: no NVIDIA driver found (NVML and nvidia-smi unavailable)\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestWatchUsageAndBadLogs(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"type\":\"start\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"watch", "--interval", "10ms"}, 2, "-interval must be at least 50ms"},
		{[]string{"watch", "--exec-on-alert", "true"}, 2, "-exec-on-alert needs -alert PCT"},
		{[]string{"watch", "--alert", "120"}, 2, "-alert is a percentage"},
		{[]string{"watch", "x.jsonl"}, 2, "a log is read with --replay FILE"},
		{[]string{"watch", "--device", "-1"}, 2, "want a device number (0, 1, ...)"},
		{[]string{"watch", "--demo", "--count", "-1"}, 2, "-count must be at least 0"},
		{[]string{"watch", "--replay", bad}, 1, "gpumem watch: " + bad + ": line 2 (byte 17): not a JSON object"},
		{[]string{"watch", "--replay", filepath.Join(dir, "missing.jsonl")}, 1, "gpumem watch: " + filepath.Join(dir, "missing.jsonl") + ": no such file\n"},
		{[]string{"watch", "--replay", dir}, 1, "gpumem watch: " + dir + ": is a directory, not a watch log\n"},
	}
	for _, tc := range tests {
		code, _, errOut := runMain(t, nil, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.err)
		}
	}
}

// TestWatchReplayStdin reads a log from standard input with --replay -,
// as every command reads "-".
func TestWatchReplayStdin(t *testing.T) {
	log := `{"type":"start","time":"2026-11-25T14:00:00Z","backend":"fake","interval_ms":50,"report_ms":200,"devices":[{"gpu":0,"uuid":"GPU-0","name":"Fake","total":85899345920}]}
{"type":"sample","time":"2026-11-25T14:00:00.05Z","gpu":0,"uuid":"GPU-0","used":1073741824,"free":84825604096,"total":85899345920,"util":50}
`
	code, out, errOut := runMain(t, []byte(log), "watch", "--replay", "-")
	if code != 0 || !strings.Contains(out, "run started 2026-11-25 14:00:00  backend fake") || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A GPU the log does not have is an error naming the ones it has.
	code, out, errOut = runMain(t, []byte(log), "watch", "--replay", "-", "--device", "3")
	if code != 1 || out != "" || errOut != "gpumem watch: -: no GPU 3 in the log (GPUs: 0)\n" {
		t.Errorf("--device 3: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestWatchBackendError(t *testing.T) {
	useFake(t, &fakeBackend{used: fakeRun[:3]})
	code, out, errOut := runMain(t, nil, "watch", "--interval", "50ms", "--report", "1s")
	// The backend ending mid-interval still reports what it sampled.
	if code != 1 || !strings.Contains(out, "peak 30.0GiB") || errOut != "gpumem watch: "+io.EOF.Error()+"\n" {
		t.Errorf("exit %d stdout %q stderr %q", code, out, errOut)
	}
}

func TestWatchJSON(t *testing.T) {
	useFake(t, &fakeBackend{used: fakeRun})
	code, out, errOut := runMain(t, nil, "watch", "--json", "--interval", "50ms", "--report", "200ms", "--count", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lg, err := gpumon.ReadLog(strings.NewReader(out), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Starts) != 1 || len(lg.Samples) != 8 || len(lg.Reports) != 2 || lg.Reports[0].Peak != 30<<30 {
		t.Errorf("--json: %d starts %d samples %d reports %+v", len(lg.Starts), len(lg.Samples), len(lg.Reports), lg.Reports)
	}
}

func TestServeFindsWatchLogs(t *testing.T) {
	useFake(t, &fakeBackend{used: fakeRun})
	dir := t.TempDir()
	named := filepath.Join(dir, "run.jsonl")
	unnamed := filepath.Join(dir, "run.log") // a log by its first record
	for _, p := range []string{named, unnamed} {
		if code, _, errOut := runMain(t, nil, "watch", "--interval", "50ms", "--report", "200ms", "--count", "4", "--log", p); code != 0 {
			t.Fatal(errOut)
		}
		useFake(t, &fakeBackend{used: fakeRun})
	}
	snap := filepath.Join(dir, "x.pickle")
	if err := os.WriteFile(snap, []byte("\x80\x04N."), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := web.New(web.Options{})
	rest, n, err := srv.AddWatchLogs([]string{named, snap, unnamed, "-"})
	if err != nil || n != 2 || strings.Join(rest, ",") != snap+",-" {
		t.Errorf("logs %d, rest %v, err %v", n, rest, err)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"type\":\"start\"}\n{\"type\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.AddWatchLogs([]string{bad}); err == nil || !strings.Contains(err.Error(), "bad.jsonl: line 2 (byte 17)") {
		t.Errorf("bad log: %v", err)
	}
}

type closeCheckBackend struct {
	fakeBackend
	t                *testing.T
	mu               sync.Mutex
	closed, sampling bool
}

func (c *closeCheckBackend) Sample() (gpumon.Sample, error) {
	c.mu.Lock()
	if c.closed {
		c.t.Error("Sample after Close")
	}
	c.sampling = true
	c.mu.Unlock()
	s, err := c.fakeBackend.Sample()
	time.Sleep(20 * time.Millisecond) // a driver call takes a while: Close would come in the middle
	c.mu.Lock()
	c.sampling = false
	c.mu.Unlock()
	return s, err
}

func (c *closeCheckBackend) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sampling {
		c.t.Error("Close while a Sample runs")
	}
	c.closed = true
	return nil
}

// TestWatchSamplerStopsBeforeClose: watch -count N returns with its
// sampler stopped, so that the backend closes with no Sample running or
// to come.
func TestWatchSamplerStopsBeforeClose(t *testing.T) {
	for _, count := range []string{"1", "3", "5"} {
		b := &closeCheckBackend{fakeBackend: fakeBackend{used: fakeRun}, t: t}
		old := openWatchBackend
		openWatchBackend = func(time.Duration) (gpumon.Backend, error) { return b, nil }
		code, _, stderr := runCLI("watch", "--plain", "-interval", "50ms", "-count", count)
		openWatchBackend = old
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if code != 0 || !closed {
			t.Errorf("-count %s: exit %d (%s), backend closed %v", count, code, stderr, closed)
		}
		time.Sleep(60 * time.Millisecond) // a sampler left running would Sample again now
	}
}

// panicBackend panics in its third Sample.
type panicBackend struct{ fakeBackend }

func (p *panicBackend) Sample() (gpumon.Sample, error) {
	if p.i == 2 {
		panic("boom")
	}
	return p.fakeBackend.Sample()
}

// TestWatchBackendPanic: a panic in the sampler goroutine (a backend bug)
// ends watch with that error and exit 1, after reporting what was
// sampled, not with a crash.
func TestWatchBackendPanic(t *testing.T) {
	b := &panicBackend{fakeBackend{used: fakeRun}}
	old := openWatchBackend
	openWatchBackend = func(time.Duration) (gpumon.Backend, error) { return b, nil }
	defer func() { openWatchBackend = old }()
	code, out, stderr := runCLI("watch", "--plain", "-interval", "50ms")
	if code != 1 || !strings.Contains(stderr, "fake backend: internal error: boom") || !strings.Contains(out, "GPU 0") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, stderr, out)
	}
}
