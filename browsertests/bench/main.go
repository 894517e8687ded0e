// Command bench times gpumem's web viewer in headless Chromium: from
// reading a snapshot to the first painted Active Memory Timeline, each
// zoom/pan response, the state-history view, and the tab's memory.
//
//	go run ./bench FILE...   (from browsertests/)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/cdproto/performance"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

var (
	noState   = flag.Bool("no-state", false, "skip the state-history timings")
	pytorch   = flag.String("pytorch", "../../shared/reference/pytorch-viz", "`dir` with PyTorch's MemoryViz.js and process_alloc_data.js (see bench/baseline/README.md); PyTorch's pipeline is timed on each file after gpumem when they are there")
	mvBench   = flag.String("memoryviz-bench", "../../shared/tools/memoryviz_bench.mjs", "`path` of the script that runs PyTorch's viewer pipeline in node")
	repeat    = flag.Int("runs", 1, "runs of each tool per file (the table gives each; the ratio uses the fastest of each)")
	settle    = flag.Duration("settle", 2*time.Second, "wait after starting Chromium, before the clock starts, so that its start-up does not compete with gpumem (a user's browser is already running)")
	nodeHeapM = flag.Int("node-heap-mb", 16000, "node's --max-old-space-size for PyTorch's pipeline")
	binary    = flag.String("gpumem", "", "`path` of a gpumem binary to time instead of building this checkout (an earlier build, for before/after figures in one session)")
	traceSlow = flag.Float64("trace-slow", 0, "trace Chromium while the zooms run and list the page's main-thread tasks during each zoom slower than `ms` (0: no trace; tracing slows the page a little)")
)

func main() {
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: go run ./bench [-no-state] FILE...")
		os.Exit(2)
	}
	chrome := ""
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		fmt.Fprintln(os.Stderr, "bench: no chromium on PATH")
		os.Exit(1)
	}
	fmt.Println("| file | size | events | decode | layout+first query+paint | start→first paint | server CPU to first paint | zoom/pan median (max) | state view open | state step median (max) | JS heap | gpumem peak RSS |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
	gpumem, cleanup, err := *binary, func() {}, error(nil)
	if gpumem == "" {
		gpumem, cleanup, err = buildGpumem()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: building gpumem: %v\n", err)
		os.Exit(1)
	}
	defer cleanup()
	withPyTorch := havePyTorch()
	type pair struct{ ours, theirs, oursCPU, theirsCPU time.Duration }
	var pairs []pair
	for _, path := range flag.Args() {
		best := pair{ours: 1 << 62, theirs: 1 << 62, oursCPU: 1 << 62, theirsCPU: 1 << 62}
		for run := 0; run < max(*repeat, 1); run++ {
			wall, cpu, err := benchFile(chrome, gpumem, path)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", path, err)
				os.Exit(1)
			}
			best.ours, best.oursCPU = min(best.ours, wall), min(best.oursCPU, cpu)
		}
		if withPyTorch {
			for run := 0; run < max(*repeat, 1); run++ {
				wall, cpu, err := runPyTorch(path)
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench: %s: PyTorch's pipeline: %v\n", path, err)
					os.Exit(1)
				}
				best.theirs, best.theirsCPU = min(best.theirs, wall), min(best.theirsCPU, cpu)
			}
		}
		pairs = append(pairs, best)
	}
	if !withPyTorch {
		fmt.Fprintf(os.Stderr, "bench: %s/MemoryViz.js or %s missing: PyTorch's pipeline not timed\n", *pytorch, *mvBench)
		return
	}
	fmt.Println()
	fmt.Println("| file | PyTorch pipeline wall / CPU | gpumem start→first paint | gpumem CPU | wall ratio | CPU ratio |")
	fmt.Println("|---|---|---|---|---|---|")
	for i, path := range flag.Args() {
		p := pairs[i]
		fmt.Printf("| %s | %.2f s / %.2f s | %.2f s | %.2f s | **%.1f×** | %.1f× |\n", filepath.Base(path),
			p.theirs.Seconds(), p.theirsCPU.Seconds(), p.ours.Seconds(), p.oursCPU.Seconds(),
			p.theirs.Seconds()/p.ours.Seconds(), p.theirsCPU.Seconds()/p.oursCPU.Seconds())
	}
}

// buildGpumem builds the gpumem command from this checkout into a
// temporary folder.
func buildGpumem() (string, func(), error) {
	dir, err := os.MkdirTemp("", "gpumem-bin")
	if err != nil {
		return "", nil, err
	}
	bin := filepath.Join(dir, "gpumem")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gpumem")
	cmd.Dir = ".." // the gpumem module (this program runs from browsertests/)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	// Let the new binary reach the disk now rather than while a run is
	// timed.
	syscall.Sync()
	return bin, func() { os.RemoveAll(dir) }, nil
}

func havePyTorch() bool {
	for _, f := range []string{filepath.Join(*pytorch, "MemoryViz.js"), filepath.Join(*pytorch, "process_alloc_data.js"), *mvBench} {
		if _, err := os.Stat(f); err != nil {
			return false
		}
	}
	_, err := exec.LookPath("node")
	return err == nil
}

// runPyTorch times PyTorch's memory_viz pipeline (unpickle,
// annotate_snapshot, process_alloc_data; no drawing) on path in node, as
// a whole process: wall time and the child's user+system CPU.
func runPyTorch(path string) (wall, cpu time.Duration, err error) {
	cmd := exec.Command("node", fmt.Sprintf("--max-old-space-size=%d", *nodeHeapM), *mvBench, *pytorch, path)
	cmd.Stderr = os.Stderr
	t0 := time.Now()
	out, err := cmd.Output()
	wall = time.Since(t0)
	if err != nil {
		return 0, 0, err
	}
	cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	fmt.Fprintf(os.Stderr, "bench: %s: PyTorch's pipeline: wall %.2f s, CPU %.2f s, %s", filepath.Base(path), wall.Seconds(), cpu.Seconds(), out)
	return wall, cpu, nil
}

// waitReady waits until the page has drawn (data-ready="1" on body) and
// the frame holding that drawing has been produced: the page sets the
// attribute when it has issued its canvas calls, and Chromium rasterizes
// them when it finishes the frame, so the promise resolves in a task after
// the next animation frame. It is one call that the page answers: polling
// would compete with the decoder for the CPU while a big file loads.
func waitReady(ctx context.Context) error {
	var ok bool
	return chromedp.Run(ctx, chromedp.Evaluate(`new Promise(resolve => {
  const painted = () => requestAnimationFrame(() => setTimeout(() => resolve(true), 0));
  const ready = () => document.body && document.body.dataset.ready === '1';
  if (ready()) return painted();
  const o = new MutationObserver(() => { if (ready()) { o.disconnect(); painted(); } });
  o.observe(document.documentElement, {attributes: true, subtree: true, attributeFilter: ['data-ready']});
})`, &ok, awaitPromise))
}

func awaitPromise(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams {
	return p.WithAwaitPromise(true)
}

// timedKey presses key and returns the ms until the page has fetched and
// drawn the new window (the refreshed counter moves, then one frame).
// The console.timeStamp marks bound the zoom in a trace (-trace-slow).
const timedKey = `new Promise(resolve => {
  const g = window.gpumem, before = g.refreshed, t0 = performance.now();
  console.timeStamp('zoom %d');
  document.dispatchEvent(new KeyboardEvent('keydown', {key: %q, bubbles: true}));
  const check = () => g.refreshed > before
    ? requestAnimationFrame(() => { console.timeStamp('zoomed %d'); resolve(performance.now() - t0); })
    : setTimeout(check, 1);
  check();
})`

// windowServerTimes lists the last 24 window answers' times: from the
// request to the response's end in the page, and the server's wall and
// CPU time on the answer (its Server-Timing header), marked "(none)" or
// "(blocks)" when it started before the window index was built.
const windowServerTimes = `performance.getEntriesByType('resource').filter(e => e.name.includes('api/window?')).slice(-24).map(e => {
  const t = Object.fromEntries(e.serverTiming.map(s => [s.name, s.description || s.duration]));
  return Math.round(e.responseEnd - e.startTime) + '/' + Math.round(t.window) + '/' + Math.round(t.cpu) + (t.index && t.index !== 'built' ? '(' + t.index + ')' : '');
}).join(' ')`

// windowSizes lists the last 24 window answers' sizes in KB (as sent:
// points or slides, window.go).
const windowSizes = `performance.getEntriesByType('resource').filter(e => e.name.includes('api/window?')).slice(-24).map(e => Math.round(e.encodedBodySize / 1024)).join(' ')`

// windowStalls lists, for the last 24 window requests, the ms each waited
// in the browser before it was sent (a free connection: Chromium opens
// at most 6 to a host), and the other requests open when it started.
const windowStalls = `(() => {
  const rs = performance.getEntriesByType('resource');
  return rs.filter(e => e.name.includes('api/window?')).slice(-24).map(e => {
    const open = rs.filter(o => o !== e && o.startTime <= e.startTime && o.responseEnd > e.startTime).map(o => o.name.replace(/^.*\/api\//, '').replace(/\?.*/, ''));
    return Math.round(e.requestStart - e.startTime) + (open.length ? '[' + open.join(',') + ']' : '');
  }).join(' ');
})()`

// pageTimes lists, in ms since the navigation started, when each request
// the page made ended, and the first paint.
const pageTimes = `(() => {
  const r = performance.getEntriesByType('resource').map(e => e.name.replace(/^.*\//, '').replace(/\?.*view=(\w+).*/, '($1)').slice(0, 30) + ' ' + Math.round(e.startTime) + '-' + Math.round(e.responseEnd));
  const nav = performance.getEntriesByType('navigation')[0];
  return 'html ' + Math.round(nav.responseEnd) + ', ' + r.join(', ') + ', first paint ' + Math.round(window.gpumem.firstPaint);
})()`

// benchFile times gpumem's viewer on path and prints a table row; it
// returns the time from start to first paint and the gpumem process's CPU
// time for it.
//
// Each run starts a fresh "gpumem serve -no-browser FILE" process, as a
// user does: a server inside this long-lived process would reuse a Go heap
// that earlier runs already faulted in, and measure a start no user has.
func benchFile(chrome, gpumem, path string) (time.Duration, time.Duration, error) {
	dir, err := os.MkdirTemp("", "gpumem-bench")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chrome), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1600, 1000))
	defer cancelA()
	ctx, cancelC := chromedp.NewContext(actx)
	defer cancelC()
	ctx, cancelT := context.WithTimeout(ctx, 9*time.Minute)
	defer cancelT()
	if err := chromedp.Run(ctx, chromedp.Navigate("about:blank"), performance.Enable()); err != nil {
		return 0, 0, err
	}
	// Let the browser finish starting (its helper processes keep both
	// cores busy for a while), as a user's browser already has.
	time.Sleep(*settle)

	// Start: run gpumem serve. It prints its URL at once and decodes the
	// file in the background; the page loads meanwhile, shows the
	// progress and draws when the default device's timeline is built.
	// Diagnostics of the start (they change nothing timed but the trace's
	// own cost): GPUMEM_BENCH_PROCS=1 lists Chromium's CPU to the first
	// paint by process, GPUMEM_BENCH_LOADTRACE=FILE keeps Chromium's trace
	// from the server's start to the first paint as JSON (its categories:
	// startTrace's, and GPUMEM_BENCH_TRACECATS's, comma-separated:
	// disabled-by-default-v8.cpu_profiler adds the page's JavaScript
	// samples, ProfileChunk events).
	var loadTrace *pageTrace
	if os.Getenv("GPUMEM_BENCH_LOADTRACE") != "" {
		if loadTrace, err = startTrace(ctx); err != nil {
			return 0, 0, err
		}
	}
	procs0 := browserProcCPU()
	browser0 := browserCPU()
	t0 := time.Now()
	cmd := exec.Command(gpumem, "serve", "-no-browser", path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("gpumem serve: %v", err)
	}
	url := regexp.MustCompile(`http://\S+/`).FindString(line)
	if url == "" {
		return 0, 0, fmt.Errorf("gpumem serve printed no URL: %q", line)
	}
	if err := chromedp.Run(ctx, chromedp.Navigate(url+"#view=active"), chromedp.ActionFunc(waitReady)); err != nil {
		return 0, 0, err
	}
	tTotal := time.Since(t0)
	cpuStart := procCPU(cmd.Process.Pid)
	browserStart := browserCPU() - browser0
	if os.Getenv("GPUMEM_BENCH_PROCS") != "" {
		var parts []string
		for k, v := range browserProcCPU() {
			if d := v - procs0[k]; d > 0 {
				parts = append(parts, fmt.Sprintf("%s %v", k, d.Round(time.Millisecond)))
			}
		}
		sort.Strings(parts)
		fmt.Fprintf(os.Stderr, "bench: Chromium's CPU to first paint by process: %s\n", strings.Join(parts, ", "))
	}
	if loadTrace != nil {
		if err := loadTrace.stop(ctx); err != nil {
			return 0, 0, err
		}
		if b, err := json.Marshal(loadTrace.events); err == nil {
			_ = os.WriteFile(os.Getenv("GPUMEM_BENCH_LOADTRACE"), b, 0o644)
		}
	}
	// The page's files?wait request ends when the file is shown: decoded
	// but for the address versions, which the server fills in after it has
	// laid out the first view.
	// A small file is shown before the page asks: no wait request then,
	// and the decode ended before the page's first request to the server,
	// a bound printed with "≤".
	var decoded struct {
		Wait, First float64
	}
	if err := chromedp.Run(ctx, chromedp.Evaluate(decodeEnd, &decoded)); err != nil {
		return 0, 0, err
	}
	decodeBound := ""
	decodedAt := decoded.Wait
	if decodedAt == 0 {
		decodeBound, decodedAt = "≤ ", decoded.First
	}
	tDecode := time.Duration(decodedAt*float64(time.Millisecond)) - time.Duration(t0.UnixNano())
	tDecode = max(0, min(tDecode, tTotal))
	tPaint := tTotal - tDecode
	fmt.Fprintf(os.Stderr, "bench: %s: decoded (but for address versions) in %s%v (the page loads meanwhile), first paint %v after start; CPU meanwhile: gpumem %v, Chromium %v\n",
		filepath.Base(path), decodeBound, tDecode, tTotal.Round(time.Millisecond), cpuStart.Round(time.Millisecond), browserStart.Round(time.Millisecond))
	var breakdown string
	if err := chromedp.Run(ctx, chromedp.Evaluate(pageTimes, &breakdown)); err == nil {
		fmt.Fprintf(os.Stderr, "bench: %s: in the page (ms since navigation): %s\n", filepath.Base(path), breakdown)
	}
	var events int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`fetch('api/files').then(r => r.json()).then(r => r.files[0].devices.reduce((n, d) => n + d.events, 0))`, &events, awaitPromise)); err != nil {
		return 0, 0, err
	}

	// Zoom in 8 times, pan 8 times, zoom out 8 times.
	var times []float64
	var trace *pageTrace
	if *traceSlow > 0 {
		if trace, err = startTrace(ctx); err != nil {
			return 0, 0, err
		}
	}
	for i, key := range append(append(rep("+", 8), rep("ArrowRight", 8)...), rep("-", 8)...) {
		var ms float64
		if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(timedKey, i, key, i), &ms, awaitPromise)); err != nil {
			return 0, 0, err
		}
		times = append(times, ms)
	}
	fmt.Fprintf(os.Stderr, "bench: %s: zoom/pan ms in order: %.0f\n", filepath.Base(path), times)
	if trace != nil {
		if err := trace.stop(ctx); err != nil {
			return 0, 0, err
		}
		trace.report(os.Stderr, times, *traceSlow, 4)
	}
	var server string
	if err := chromedp.Run(ctx, chromedp.Evaluate(windowServerTimes, &server)); err == nil {
		fmt.Fprintf(os.Stderr, "bench: %s: the 24 window answers, request to response end / server wall / server CPU (ms; (blocks) or (none): started before the window index was built): %s\n", filepath.Base(path), server)
	}
	var sizes string
	if err := chromedp.Run(ctx, chromedp.Evaluate(windowSizes, &sizes)); err == nil {
		fmt.Fprintf(os.Stderr, "bench: %s: the 24 window answers' sizes (KB): %s\n", filepath.Base(path), sizes)
	}
	var stalls string
	if err := chromedp.Run(ctx, chromedp.Evaluate(windowStalls, &stalls)); err == nil {
		fmt.Fprintf(os.Stderr, "bench: %s: the 24 window requests, ms queued in the browser before sent [other requests open then]: %s\n", filepath.Base(path), stalls)
	}
	var ph string
	_ = chromedp.Run(ctx, chromedp.Evaluate(`JSON.stringify(window.gpumem.phases)`, &ph))
	fmt.Fprintf(os.Stderr, "bench: phases [fetch+decode, draw] ms: %s\n", ph)
	sort.Float64s(times)

	var metrics []*performance.Metric
	if err := chromedp.Run(ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		metrics, err = performance.GetMetrics().Do(ctx)
		return err
	})); err != nil {
		return 0, 0, err
	}
	heap := 0.0
	for _, m := range metrics {
		if m.Name == "JSHeapTotalSize" {
			heap = m.Value
		}
	}

	// State history: open it (checkpoints are built on first use), then step.
	var tState, tStep, tStepMax time.Duration
	if !*noState {
		tState, tStep, tStepMax, err = benchState(ctx, strings.TrimSuffix(url, "/"), path)
		if err != nil {
			return 0, 0, err
		}
	}

	fi, _ := os.Stat(path)
	fmt.Printf("| %s | %.0f MB | %d | %s%.2f s | %.2f s | **%.2f s** | %.2f s | %.0f ms (%.0f ms) | %.2f s | %.0f ms (%.0f ms) | %.0f MB | %.0f MB |\n",
		filepath.Base(path), float64(fi.Size())/1e6, events, decodeBound, tDecode.Seconds(), tPaint.Seconds(), tTotal.Seconds(), cpuStart.Seconds(),
		times[len(times)/2], times[len(times)-1], tState.Seconds(), float64(tStep.Milliseconds()), float64(tStepMax.Milliseconds()), heap/1e6, float64(peakRSS(cmd.Process.Pid))/1e6)
	return tTotal, cpuStart, nil
}

// decodeEnd gives the wall-clock times (Unix ms) at which the page's wait
// for the file to be shown was answered (Wait; 0 when the page did not
// need to wait) and at which its first request to the server started.
const decodeEnd = `(() => {
  const rs = performance.getEntriesByType('resource').filter(e => e.name.includes('/api/'));
  const w = rs.find(e => e.name.includes('files?wait='));
  const first = rs.length ? Math.min(...rs.map(e => e.startTime)) : 0;
  return {Wait: w ? performance.timeOrigin + w.responseEnd : 0, First: performance.timeOrigin + first};
})()`

// procCPU is the user+system CPU time used so far by process pid (all of
// its threads), from /proc.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return statTicks(b)
}

// statTicks reads utime+stime from a /proc/PID/stat line.
func statTicks(b []byte) time.Duration {
	// pid (comm) state ppid ... utime(14) stime(15); comm may hold spaces.
	close := strings.LastIndexByte(string(b), ')')
	if close < 0 {
		return 0
	}
	f := strings.Fields(string(b[close+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// peakRSS is process pid's peak resident set (VmHWM) in bytes.
func peakRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// browserProcCPU is browserCPU per process: "pid type" (the --type= of
// its command line, "browser" without one) to its CPU time so far.
func browserProcCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	eachChromium(func(pid string, _ []byte) {
		typ := "browser"
		if c, err := os.ReadFile("/proc/" + pid + "/cmdline"); err == nil {
			for _, a := range strings.FieldsFunc(string(c), func(r rune) bool { return r == 0 || r == ' ' }) {
				if t, ok := strings.CutPrefix(a, "--type="); ok {
					typ = t
				}
				if t, ok := strings.CutPrefix(a, "--utility-sub-type="); ok {
					typ += "/" + t
				}
			}
		}
		out[pid+" "+typ] = schedCPU(pid)
	})
	return out
}

// eachChromium calls fn with the pid and /proc stat line of each running
// Chromium process (any process whose name starts with "chrom").
func eachChromium(fn func(pid string, stat []byte)) {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		if open := strings.IndexByte(string(b), '('); open >= 0 && strings.HasPrefix(string(b[open+1:]), "chrom") {
			fn(d.Name(), b)
		}
	}
}

// schedCPU is the time on a CPU of process pid's live threads, in
// nanoseconds (the scheduler's count: finer than stat's ticks).
func schedCPU(pid string) time.Duration {
	tasks, _ := os.ReadDir("/proc/" + pid + "/task")
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// browserCPU is the CPU time used so far by the running Chromium processes
// (any process whose name starts with "chrom"), from /proc.
func browserCPU() time.Duration {
	var total time.Duration
	eachChromium(func(_ string, stat []byte) { total += statTicks(stat) })
	return total
}

// benchState opens Allocator State History (whose checkpoints are built on
// first use) and steps back one event.
func benchState(ctx context.Context, url, path string) (open, step, stepMax time.Duration, err error) {
	t2 := time.Now()
	if err := chromedp.Run(ctx, chromedp.Navigate(url+"/#view=state"), chromedp.ActionFunc(waitReady)); err != nil {
		return 0, 0, 0, err
	}
	open = time.Since(t2)
	fmt.Fprintf(os.Stderr, "bench: %s: state view in %v\n", filepath.Base(path), open)
	// Five steps back from the end, each timed in the page as the zooms
	// are (polling over CDP every few ms competed with the server).
	var steps []float64
	for range stateSteps {
		var ms float64
		if err := chromedp.Run(ctx, chromedp.Evaluate(timedStateStep, &ms, awaitPromise)); err != nil {
			return 0, 0, 0, err
		}
		steps = append(steps, ms)
	}
	var ph string
	_ = chromedp.Run(ctx, chromedp.Evaluate(`JSON.stringify(window.gpumem.statePhases)`, &ph))
	fmt.Fprintf(os.Stderr, "bench: state steps ms in order: %.0f; [fetch+parse, draw] ms (open, steps): %s\n", steps, ph)
	sort.Float64s(steps)
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return open, ms(steps[len(steps)/2]), ms(steps[len(steps)-1]), nil
}

// stateSteps is how many steps back through the state history are timed.
const stateSteps = 5

// timedStateStep presses ↑ in Allocator State History and returns the ms
// until the previous event's state is drawn (then one frame).
const timedStateStep = `new Promise(resolve => {
  const S = window.gpumem.S, before = S.state.index, t0 = performance.now();
  document.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowUp', bubbles: true}));
  const check = () => S.state.index !== before
    ? requestAnimationFrame(() => resolve(performance.now() - t0))
    : setTimeout(check, 1);
  check();
})`

func rep(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
