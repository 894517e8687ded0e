// Command compare measures how fast gpumem reads big snapshots compared with
// Python's pickle.load, and writes the figures to bench/RESULTS.md.
//
// Run it from the repository root:
//
//	go run ./bench/compare [-sizes 250,1000] [-runs 3] [-src FILE] [-o bench/RESULTS.md]
//
// It builds gpumem, makes tiled snapshots of about each size in MB from a
// real snapshot with bench/tile.py (kept under bench/data/, git-ignored,
// reused when present), then times, per file, `python3 -c pickle.load`,
// `gpumem info` and `gpumem stats`: wall time, throughput and the peak RSS
// the kernel reports for the child (wait4 rusage ru_maxrss).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gpumem/gpumem/internal/atomicfile"
)

const defaultSrc = "../shared/snapshots/real/cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle"

func main() {
	sizes := flag.String("sizes", "250,1000", "comma-separated target sizes in MB of the tiled snapshots")
	runs := flag.Int("runs", 3, "timed runs per command and file (the median is reported)")
	src := flag.String("src", defaultSrc, "real snapshot to tile")
	out := flag.String("o", "bench/RESULTS.md", "results file (Markdown); - for stdout only")
	data := flag.String("data", "bench/data", "folder for the tiled snapshots and the built binary")
	noPython := flag.Bool("no-python", false, "skip the Python baselines")
	pyRuns := flag.Int("python-runs", 0, "timed runs of the Python baselines (default: -runs); they take minutes on 1 GB")
	flag.Parse()
	if *pyRuns <= 0 {
		*pyRuns = *runs
	}
	if err := run(*sizes, *runs, *pyRuns, *src, *out, *data, *noPython); err != nil {
		fmt.Fprintln(os.Stderr, "compare bench:", err)
		os.Exit(1)
	}
}

// result is one command timed on one file.
type result struct {
	name   string
	wall   []time.Duration
	maxRSS []int64 // bytes
	err    string
}

func (r *result) median() (time.Duration, int64) {
	w := slices.Clone(r.wall)
	m := slices.Clone(r.maxRSS)
	slices.Sort(w)
	slices.Sort(m)
	n := len(w)
	if n%2 == 0 { // the mean of the middle two
		return (w[n/2-1] + w[n/2]) / 2, (m[n/2-1] + m[n/2]) / 2
	}
	return w[n/2], m[n/2]
}

type fileResult struct {
	path    string
	size    int64
	results []*result
}

func run(sizesFlag string, runs, pyRuns int, src, out, data string, noPython bool) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the repository root (go run ./bench/compare)")
	}
	if runs < 1 {
		return errors.New("-runs must be at least 1")
	}
	var sizes []int
	for _, s := range strings.Split(sizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("bad size %q in -sizes", s)
		}
		sizes = append(sizes, n)
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	bin, err := filepath.Abs(filepath.Join(data, "gpumem"))
	if err != nil {
		return err
	}
	logf("building %s", bin)
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/gpumem").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}

	// The decoder's own decode-only timer (snapshot.Open and nothing else),
	// when it builds: it separates decoding from what info/stats add.
	decodeOnly, _ := filepath.Abs(filepath.Join(data, "decode-only"))
	if b, err := exec.Command("go", "build", "-o", decodeOnly, "./bench/decode").CombinedOutput(); err != nil {
		logf("no decode-only row: go build ./bench/decode: %v %s", err, b)
		decodeOnly = ""
	}

	tiler := "bench/tile.py"
	if _, err := os.Stat(tiler); err != nil {
		tiler = "bench/tile_fallback.py"
	}
	var files []*fileResult
	for _, mb := range sizes {
		path := filepath.Join(data, fmt.Sprintf("tiled-%dMB.pickle", mb))
		if _, err := os.Stat(path); err != nil {
			logf("tiling %s -> %s (%d MB) with %s", src, path, mb, tiler)
			cmd := exec.Command("python3", tiler, src, path, "--target-mb", strconv.Itoa(mb))
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v", tiler, err)
			}
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		files = append(files, &fileResult{path: path, size: st.Size()})
	}

	for _, f := range files {
		cmds := []struct {
			name string
			argv []string
		}{
			{"python3 pickle.load", []string{"python3", "-c", `import pickle,sys; pickle.load(open(sys.argv[1],"rb"))`, f.path}},
			{"snapshot.Open only", []string{decodeOnly, f.path}},
			{"gpumem info", []string{bin, "info", f.path}},
			{"gpumem stats", []string{bin, "stats", f.path}},
		}
		if shim := "bench/baseline/run_memory_viz.py"; fileExists(shim) && fileExists("../shared/reference/pytorch-viz/_memory_viz.py") {
			// PyTorch's own `_memory_viz.py stats` (pickle.load + segsum),
			// run without torch by the baseline shim.
			cmds = append(cmds[:1:1], append([]struct {
				name string
				argv []string
			}{{"python3 _memory_viz stats", []string{"python3", shim, "--quiet", f.path}}}, cmds[1:]...)...)
		}
		for _, c := range cmds {
			if noPython && strings.HasPrefix(c.name, "python") || c.argv[0] == "" {
				continue
			}
			r := &result{name: c.name}
			n := runs
			if strings.HasPrefix(c.name, "python") {
				n = pyRuns
			}
			for i := 0; i < n; i++ {
				wall, rss, err := timeCmd(c.argv)
				if err != nil {
					r.err = err.Error()
					logf("%s on %s: %v", c.name, f.path, err)
					break
				}
				logf("%-20s %s run %d: %.2fs, max RSS %s", c.name, filepath.Base(f.path), i+1, wall.Seconds(), mib(rss))
				r.wall = append(r.wall, wall)
				r.maxRSS = append(r.maxRSS, rss)
			}
			f.results = append(f.results, r)
		}
	}

	md := report(files, runs, pyRuns, src)
	fmt.Print(md)
	if out == "-" {
		return nil
	}
	return writeAtomic(out, []byte(md))
}

// timeCmd runs argv with output discarded and returns its wall time and the
// child's peak resident set size in bytes.
func timeCmd(argv []string) (time.Duration, int64, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout = io.Discard
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return 0, 0, fmt.Errorf("%v: %s", err, msg)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = int64(ru.Maxrss) * 1024 // Linux reports KiB
	}
	return wall, rss, nil
}

func report(files []*fileResult, runs, pyRuns int, src string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Decode benchmark\n\n")
	fmt.Fprintf(&b, "Generated by `go run ./bench/compare -runs %d -python-runs %d` on %s: each row is the median of %d runs (%d for the Python rows).\n\n",
		runs, pyRuns, time.Now().UTC().Format("2006-01-02 15:04 UTC"), runs, pyRuns)
	fmt.Fprintf(&b, "## Machine\n\n")
	for _, l := range machine() {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	fmt.Fprintf(&b, "\nInputs: `%s` tiled with `bench/tile.py` to the sizes below (protocol-4 pickles, frames shared through the memo as PyTorch writes them).\n\n", filepath.Base(src))
	fmt.Fprintf(&b, "## Results\n\n")
	fmt.Fprintf(&b, "| file | size (MB) | command | wall (s) | MB/s | peak RSS (MiB) | RSS / file size | speed-up vs pickle.load | speed-up vs PyTorch's stats |\n")
	fmt.Fprintf(&b, "|---|---:|---|---:|---:|---:|---:|---:|---:|\n")
	type check struct {
		text string
		ok   bool
	}
	var checks []check
	for i, f := range files {
		mb := float64(f.size) / 1e6
		var pyWall, vizWall time.Duration
		if r := find(f.results, "python3 _memory_viz stats"); r != nil {
			vizWall, _ = r.median()
		}
		for _, r := range f.results {
			if r.err != "" {
				fmt.Fprintf(&b, "| %s | %.1f | %s | failed: %s | | | | | |\n", filepath.Base(f.path), mb, r.name, r.err)
				continue
			}
			wall, rss := r.median()
			if r.name == "python3 pickle.load" {
				pyWall = wall
			}
			speed, vs := "", ""
			if pyWall > 0 && !strings.HasPrefix(r.name, "python") {
				speed = fmt.Sprintf("%.1f×", pyWall.Seconds()/wall.Seconds())
			}
			if vizWall > 0 && !strings.HasPrefix(r.name, "python") {
				vs = fmt.Sprintf("%.1f×", vizWall.Seconds()/wall.Seconds())
			}
			fmt.Fprintf(&b, "| %s | %.1f | %s | %.2f | %.0f | %.0f | %.2f | %s | %s |\n", filepath.Base(f.path), mb, r.name,
				wall.Seconds(), mb/wall.Seconds(), float64(rss)/(1<<20), float64(rss)/float64(f.size), speed, vs)
		}
		// Acceptance targets: the first (≈250 MB) file for speed-up and RSS,
		// the last (≈1 GB) for stats under 10 s.
		stats := find(f.results, "gpumem stats")
		for _, name := range []string{"snapshot.Open only", "gpumem info"} {
			r := find(f.results, name)
			if i != 0 || r == nil {
				continue
			}
			w, rss := r.median()
			if pyWall > 0 {
				sp := pyWall.Seconds() / w.Seconds()
				checks = append(checks, check{fmt.Sprintf("decode of the %.0f MB file (`%s`) %.1f× faster than pickle.load (target ≥ 10×)", mb, name, sp), sp >= 10})
			}
			ratio := float64(rss) / float64(f.size)
			checks = append(checks, check{fmt.Sprintf("peak RSS of `%s` on the %.0f MB file is %.2f× the file size (target ≤ 1.5×)", name, mb, ratio), ratio <= 1.5})
		}
		if stats != nil && vizWall > 0 {
			w, _ := stats.median()
			checks = append(checks, check{fmt.Sprintf("(same answer, same file) `gpumem stats` on the %.0f MB file is %.1f× faster than PyTorch's `_memory_viz.py stats` (reference: target ≥ 10× for decode)", mb, vizWall.Seconds()/w.Seconds()), vizWall.Seconds()/w.Seconds() >= 10})
		}
		if i == len(files)-1 && len(files) > 1 && stats != nil {
			w, _ := stats.median()
			checks = append(checks, check{fmt.Sprintf("`gpumem stats` on the %.0f MB file takes %.2f s (target < 10 s)", mb, w.Seconds()), w < 10*time.Second})
		}
	}
	fmt.Fprintf(&b, "\nMB = 10^6 bytes; MB/s = file size / wall time. Peak RSS is the child's `ru_maxrss` from wait4 (what `/usr/bin/time -v` prints as \"Maximum resident set size\"). `snapshot.Open only` is `go run ./bench/decode FILE` (the decoder's timer: decode into the typed model and nothing else); `gpumem info` decodes the whole file and summarises it (including the timeline peaks); `gpumem stats` decodes it and prints memory_viz's segment summary.\n\n")
	fmt.Fprintf(&b, "## Acceptance targets\n\n")
	for _, c := range checks {
		mark := "MET"
		if !c.ok {
			mark = "NOT MET"
		}
		fmt.Fprintf(&b, "- **%s**: %s\n", mark, c.text)
	}
	fmt.Fprintf(&b, "\n## About the baseline\n\n")
	fmt.Fprintf(&b, "PyTorch is not installed here, so `python -m torch.cuda._memory_viz stats` cannot be run as such. Its `stats` is `pickle.load` followed by `segsum` (a pass over the segments), so the `pickle.load` time above is a lower bound on PyTorch's own time for the same answer, and the speed-ups (computed against pickle.load only) are conservative. Where PyTorch's `_memory_viz.py` is present in `../shared/reference/pytorch-viz/` (see bench/baseline/README.md), the row `python3 _memory_viz stats` runs PyTorch's own `stats` code without torch through `bench/baseline/run_memory_viz.py`.\n")
	fmt.Fprintf(&b, "The machine is shared: other processes ran during the measurement, so single figures can vary by 10–20%%; rerun with `go run ./bench/compare` to reproduce.\n")
	return b.String()
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func find(rs []*result, name string) *result {
	for _, r := range rs {
		if r.name == name && r.err == "" && len(r.wall) > 0 {
			return r
		}
	}
	return nil
}

// machine describes where the benchmark ran.
func machine() []string {
	var lines []string
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	lines = append(lines, fmt.Sprintf("CPU: %s, %d logical cores available to Go (runtime.NumCPU)", cpu, runtime.NumCPU()))
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				if len(f) >= 2 {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					lines = append(lines, fmt.Sprintf("RAM: %.1f GiB", float64(kb)/(1<<20)))
				}
			}
		}
	}
	if b, err := exec.Command("go", "version").Output(); err == nil {
		lines = append(lines, "Go: "+strings.TrimSpace(string(b)))
	}
	if b, err := exec.Command("python3", "--version").CombinedOutput(); err == nil {
		lines = append(lines, "Python: "+strings.TrimSpace(string(b)))
	}
	if b, err := exec.Command("git", "log", "-1", "--format=%h %s").Output(); err == nil {
		lines = append(lines, "gpumem commit: "+strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		lines = append(lines, "load average at report time: "+strings.Join(strings.Fields(string(b))[:3], " "))
	}
	return lines
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare bench: "+format+"\n", args...)
}

// keepMarker starts the part of the results file that this program does
// not generate (the web viewer's figures, from browsertests/bench); a
// rewrite keeps it.
const keepMarker = "<!-- kept by bench/compare -->"

// writeAtomic writes a temp file in the target's folder and renames it,
// keeping the old file's part from keepMarker on.
func writeAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil {
		if i := bytes.Index(old, []byte(keepMarker)); i >= 0 {
			data = append(append(data, '\n'), old[i:]...)
		}
	}
	return atomicfile.WriteFile(path, data)
}
