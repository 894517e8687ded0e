package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpumem/gpumem/internal/gpumon"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/internal/web"
	"golang.org/x/term"
)

func init() {
	Register(&Command{
		Name:    "watch",
		Summary: "live GPU memory monitor: interval peaks, JSONL log, Prometheus metrics",
		Run:     runWatch,
	})
}

const watchAbout = `
Samples every GPU's memory (used/free/total), utilisation and per-process
memory every --interval through nvidia-smi (or NVML in a build with
-tags nvml), and every --report period reports each device's peak since the
last report, its minimum and its mean. On a terminal it shows a refreshing
table with a sparkline per device; otherwise it prints one line per device
per report. --log keeps every sample and report as JSONL (synced at each
report); --replay FILE.jsonl prints a log's reports, and gpumem serve
FILE.jsonl draws it. Stop with Ctrl-C.`

// openWatchBackend is gpumon.Open; tests replace it with a fake.
var openWatchBackend = func(interval time.Duration) (gpumon.Backend, error) { return gpumon.Open(interval) }

type watchOptions struct {
	interval, report time.Duration
	logPath, prom    string
	alert            float64
	execOnAlert      string
	json, plain      bool
	device, count    int
}

func runWatch(env *Env, args []string) error {
	fs := newFlagSet(env, "watch", "[flags]   |   gpumem watch --replay FILE.jsonl", watchAbout)
	var o watchOptions
	fs.DurationVar(&o.interval, "interval", 500*time.Millisecond, "sampling `period` (at least 50ms)")
	fs.DurationVar(&o.report, "report", 10*time.Second, "reporting `period`: peak since the last report, min, mean")
	fs.StringVar(&o.logPath, "log", "", "append every sample and report to `FILE.jsonl`")
	replay := fs.String("replay", "", "print the reports of a --log `FILE.jsonl` and exit")
	fs.StringVar(&o.prom, "prom", "", "serve Prometheus metrics on `[host]:port` (\":9400\" binds 127.0.0.1)")
	fs.Float64Var(&o.alert, "alert", 0, "warn when a device's used memory reaches `PCT` percent of its total")
	fs.StringVar(&o.execOnAlert, "exec-on-alert", "", "run `CMD` (with sh -c) at the first alert, once")
	fs.BoolVar(&o.json, "json", false, "print JSONL records (as --log writes them) instead of text")
	fs.BoolVar(&o.plain, "plain", false, "print report lines even on a terminal (no refreshing table)")
	o.device = -1 // every GPU; --device takes what every command's --device takes
	fs.Var(deviceValue{&o.device}, "device", "watch only GPU `N` (the driver's index)")
	fs.IntVar(&o.count, "count", 0, "stop after `N` samples (0: run until Ctrl-C)")
	useDemo := fs.Bool("demo", false, "watch a simulated two-GPU training job instead of the driver")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fs, env.Stderr, "unexpected argument "+strconv.Quote(pos[0])+" (a log is read with --replay FILE)")
	}
	if *replay != "" {
		return replayWatch(env, *replay, o)
	}
	if o.interval < 50*time.Millisecond {
		return usageError(fs, env.Stderr, "-interval must be at least 50ms")
	}
	if o.count < 0 {
		return usageError(fs, env.Stderr, "-count must be at least 0 (0: run until Ctrl-C)")
	}
	if o.report < o.interval {
		return usageError(fs, env.Stderr, "-report must be at least -interval")
	}
	if o.alert < 0 || o.alert > 100 {
		return usageError(fs, env.Stderr, "-alert is a percentage between 0 and 100")
	}
	if o.execOnAlert != "" && o.alert == 0 {
		return usageError(fs, env.Stderr, "-exec-on-alert needs -alert PCT")
	}
	var b gpumon.Backend
	if *useDemo {
		b = gpumon.NewDemo(o.interval)
	} else if b, err = openWatchBackend(o.interval); err != nil {
		return err
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watch(ctx, env, b, o)
}

// watchState is what the Prometheus handler reads while sampling goes on.
type watchState struct {
	mu   sync.Mutex
	last gpumon.Sample
	prev []gpumon.Interval // the last completed report
}

func watch(ctx context.Context, env *Env, b gpumon.Backend, o watchOptions) error {
	var lw *gpumon.LogWriter
	if o.logPath != "" {
		var err error
		if lw, err = gpumon.CreateLog(o.logPath); err != nil {
			return err
		}
		defer lw.Close()
	}
	st := &watchState{}
	if o.prom != "" {
		stopProm, err := servePrometheus(env, o.prom, st)
		if err != nil {
			return err
		}
		defer stopProm()
	}
	var scr *screen
	if f, ok := env.Stdout.(*os.File); ok && !o.json && !o.plain && term.IsTerminal(int(f.Fd())) {
		scr = newScreen(f, b.Name(), o)
		scr.start()
		defer scr.stop()
	}
	var jsonOut *json.Encoder
	if o.json {
		jsonOut = json.NewEncoder(env.Stdout)
	}

	// The sampler stops, and watch waits for it, before watch returns:
	// the caller closes the backend then, and a Sample running on a
	// closed backend (NVML shut down under it) is undefined.
	sctx, cancel := context.WithCancel(ctx)
	samplerDone := make(chan struct{})
	defer func() {
		cancel()
		<-samplerDone
	}()
	samples := make(chan gpumon.Sample)
	errc := make(chan error, 1)
	go func() {
		defer close(samplerDone)
		// A bug in a backend is the run's error (reported after the
		// partial interval), not a crash that loses the log's last lines.
		defer func() {
			if p := recover(); p != nil {
				errc <- fmt.Errorf("%s backend: internal error: %v", b.Name(), p)
			}
		}()
		for sctx.Err() == nil {
			s, err := b.Sample()
			if err != nil {
				errc <- err
				return
			}
			select {
			case samples <- s:
			case <-sctx.Done():
				return
			}
		}
	}()

	var stats *gpumon.Stats
	var alerter *gpumon.Alerter
	if o.alert > 0 {
		alerter = gpumon.NewAlerter(o.alert)
	}
	var nextReport time.Time
	execDone := false
	n := 0
	doReport := func(now time.Time) error {
		ivs := stats.Report(now)
		if alerter != nil {
			alerter.NewPeriod()
		}
		st.mu.Lock()
		st.prev = ivs
		st.mu.Unlock()
		if lw != nil {
			if err := lw.Report(ivs); err != nil {
				return err
			}
		}
		switch {
		case jsonOut != nil:
			for _, iv := range ivs {
				_ = jsonOut.Encode(gpumon.NewReportRecord(iv))
			}
		case scr != nil:
			scr.setReport(ivs)
		default:
			writeReportLines(env.Stdout, ivs)
		}
		return nil
	}
	for {
		var s gpumon.Sample
		select {
		case <-ctx.Done():
			// Ctrl-C: the partial interval is reported too, so nothing
			// sampled is lost from the log.
			if stats != nil {
				return doReport(time.Now())
			}
			return nil
		case err := <-errc:
			if stats != nil {
				_ = doReport(time.Now())
			}
			return err
		case s = <-samples:
		}
		s = filterDevice(s, o.device)
		if len(s.Devices) == 0 {
			return fmt.Errorf("no GPU with index %d", o.device)
		}
		if stats == nil {
			stats = gpumon.NewStats(s.Time)
			nextReport = s.Time.Add(o.report)
			if lw != nil {
				if err := lw.Start(startRecord(b, s, o)); err != nil {
					return err
				}
			}
			if jsonOut != nil {
				_ = jsonOut.Encode(startRecord(b, s, o))
			}
		}
		// An interval is [start, start+report): the sample that reaches
		// the boundary opens the next one.
		if !s.Time.Before(nextReport) {
			if err := doReport(s.Time); err != nil {
				return err
			}
			for !s.Time.Before(nextReport) {
				nextReport = nextReport.Add(o.report)
			}
		}
		stats.Add(s)
		st.mu.Lock()
		st.last = s
		st.mu.Unlock()
		if lw != nil {
			if err := lw.Sample(s); err != nil {
				return err
			}
		}
		if jsonOut != nil {
			for _, r := range gpumon.NewSampleRecords(s) {
				_ = jsonOut.Encode(r)
			}
		}
		if alerter != nil {
			for _, a := range alerter.Check(s) {
				line := fmt.Sprintf("gpumem watch: warning: GPU %d%s at %.1f%% of its memory (%s of %s), --alert %g%%",
					a.GPU, migSuffix(a.MIG), a.Percent, units.PythonU(a.Used), units.PythonU(a.Total), a.Threshold)
				if scr != nil {
					scr.setAlert(fmt.Sprintf("%06d%s", a.GPU, migSuffix(a.MIG)), line)
				} else {
					fmt.Fprintln(env.Stderr, line)
				}
				if lw != nil {
					if err := lw.Alert(a); err != nil {
						return err
					}
				}
				if jsonOut != nil {
					_ = jsonOut.Encode(a)
				}
				if o.execOnAlert != "" && !execDone {
					execDone = true
					runAlertCommand(env, o.execOnAlert, a)
				}
			}
		}
		if scr != nil {
			scr.update(s, stats.Current(s.Time))
		}
		n++
		if o.count > 0 && n >= o.count {
			return doReport(s.Time)
		}
	}
}

func startRecord(b gpumon.Backend, s gpumon.Sample, o watchOptions) gpumon.StartRecord {
	r := gpumon.StartRecord{Type: "start", Time: s.Time, Backend: b.Name(), IntervalMS: o.interval.Milliseconds(), ReportMS: o.report.Milliseconds()}
	for _, d := range s.Devices {
		info := gpumon.DeviceInfo{GPU: d.Index, UUID: d.UUID, Name: d.Name, Total: d.Total}
		if d.MIG >= 0 {
			mig := d.MIG
			info.MIG = &mig
		}
		r.Devices = append(r.Devices, info)
	}
	return r
}

func filterDevice(s gpumon.Sample, dev int) gpumon.Sample {
	if dev < 0 {
		return s
	}
	out := gpumon.Sample{Time: s.Time}
	for _, d := range s.Devices {
		if d.Index == dev {
			out.Devices = append(out.Devices, d)
		}
	}
	for _, p := range s.Procs {
		if p.Device == dev {
			out.Procs = append(out.Procs, p)
		}
	}
	return out
}

func migSuffix(mig *int) string {
	if mig == nil {
		return ""
	}
	return " MIG " + strconv.Itoa(*mig)
}

func migName(mig int) string {
	if mig < 0 {
		return ""
	}
	return "/" + strconv.Itoa(mig)
}

// runAlertCommand starts CMD with the alert in its environment and does
// not wait: a command that signals the training process to dump a
// snapshot must not stall sampling.
func runAlertCommand(env *Env, command string, a gpumon.AlertRecord) {
	cmd := exec.Command("sh", "-c", command)
	cmd.Env = append(os.Environ(),
		"GPUMEM_ALERT_GPU="+strconv.Itoa(a.GPU),
		"GPUMEM_ALERT_UUID="+a.UUID,
		"GPUMEM_ALERT_USED="+strconv.FormatUint(a.Used, 10),
		"GPUMEM_ALERT_TOTAL="+strconv.FormatUint(a.Total, 10),
		"GPUMEM_ALERT_PERCENT="+strconv.FormatFloat(a.Percent, 'f', 1, 64))
	cmd.Stdout, cmd.Stderr = env.Stderr, env.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(env.Stderr, "gpumem watch: --exec-on-alert: %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

// writeReportLines prints one line per device per report, then a line per
// process with its peak.
func writeReportLines(w io.Writer, ivs []gpumon.Interval) {
	for _, iv := range ivs {
		d := iv.Device
		if iv.Samples == 0 {
			fmt.Fprintf(w, "%s  GPU %d%s  no memory figures from the driver\n", iv.End.Format("15:04:05"), d.Index, migName(d.MIG))
			continue
		}
		fmt.Fprintf(w, "%s  GPU %d%s  peak %s at %s  min %s  mean %s  of %s  (samples: %d since %s)\n",
			iv.End.Format("15:04:05"), d.Index, migName(d.MIG), units.PythonU(iv.Peak), iv.PeakTime.Format("15:04:05.0"),
			units.PythonU(iv.Min), units.PythonU(iv.Mean), units.PythonU(d.Total), iv.Samples, iv.Start.Format("15:04:05"))
		for _, p := range iv.Procs {
			fmt.Fprintf(w, "          pid %-7d peak %-9s %s\n", p.PID, procBytes(p.Peak), p.Command)
		}
	}
}

func procBytes(n int64) string {
	if n < 0 {
		return "n/a"
	}
	return units.Python(n)
}

// replayWatch prints the reports of a log as watch printed them.
func replayWatch(env *Env, path string, o watchOptions) error {
	// "-" reads standard input, as every command's FILE does; a missing
	// file or a directory gets the loader's one-line messages.
	var r io.Reader = env.Stdin
	if path != "-" {
		fi, err := os.Stat(path)
		if err != nil {
			return prefixError(path, err)
		}
		if fi.IsDir() {
			return fmt.Errorf("%s: is a directory, not a watch log", path)
		}
		f, err := os.Open(path)
		if err != nil {
			return prefixError(path, err)
		}
		defer f.Close()
		r = f
	}
	lg, err := gpumon.ReadLog(r, path)
	if err != nil {
		return err
	}
	if len(lg.Starts) == 0 && len(lg.Samples) == 0 {
		return fmt.Errorf("%s: no gpumem watch records", path)
	}
	reports := lg.Reports
	if o.device >= 0 {
		// A GPU the log never saw is an error, as a missing --device is
		// for a snapshot, not an empty replay.
		seen := map[int]bool{}
		for _, st := range lg.Starts {
			for _, d := range st.Devices {
				seen[d.GPU] = true
			}
		}
		for _, r := range lg.Samples {
			seen[r.Device().Index] = true
		}
		if !seen[o.device] {
			gpus := make([]int, 0, len(seen))
			for g := range seen {
				gpus = append(gpus, g)
			}
			slices.Sort(gpus)
			return fmt.Errorf("%s: no GPU %d in the log (GPUs: %s)", path, o.device, joinInts(gpus))
		}
		reports = reports[:0:0]
		for _, r := range lg.Reports {
			if r.GPU == o.device {
				reports = append(reports, r)
			}
		}
	}
	if o.json {
		out := struct {
			Starts  []gpumon.StartRecord  `json:"starts"`
			Reports []gpumon.ReportRecord `json:"reports"`
			Alerts  []gpumon.AlertRecord  `json:"alerts"`
			Samples int                   `json:"samples"`
		}{lg.Starts, reports, lg.Alerts, len(lg.Samples)}
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, s := range lg.Starts {
		fmt.Fprintf(env.Stdout, "run started %s  backend %s  every %dms  report every %s\n",
			s.Time.Format("2006-01-02 15:04:05"), s.Backend, s.IntervalMS, time.Duration(s.ReportMS)*time.Millisecond)
		for _, d := range s.Devices {
			fmt.Fprintf(env.Stdout, "  GPU %d%s  %s  %s  %s\n", d.GPU, migSuffix(d.MIG), d.Name, d.UUID, units.PythonU(d.Total))
		}
	}
	// Records with the same end time are one report (one per device), and
	// records with the same time one sample.
	times, devs := map[int64]bool{}, map[string]bool{}
	for _, r := range lg.Samples {
		times[r.Time.UnixNano()] = true
		devs[gpumon.DeviceKey(r.Device())] = true
	}
	var groups [][]gpumon.Interval
	for i, r := range reports {
		if i == 0 || !r.Time.Equal(reports[i-1].Time) || !r.Start.Equal(reports[i-1].Start) {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], r.Interval())
	}
	fmt.Fprintf(env.Stdout, "%d samples of %d devices, %d reports, %d alerts\n", len(times), len(devs), len(groups), len(lg.Alerts))
	for _, ivs := range groups {
		writeReportLines(env.Stdout, ivs)
	}
	for _, a := range lg.Alerts {
		fmt.Fprintf(env.Stdout, "%s  alert: GPU %d%s at %.1f%% (%s of %s), threshold %g%%\n",
			a.Time.Format("15:04:05"), a.GPU, migSuffix(a.MIG), a.Percent, units.PythonU(a.Used), units.PythonU(a.Total), a.Threshold)
	}
	if lg.TruncatedTail {
		fmt.Fprintf(env.Stdout, "note: the last line of %s is cut off (the watcher stopped mid-write); it was skipped\n", path)
	}
	return nil
}

// servePrometheus listens on addr (":9400" means 127.0.0.1:9400) and
// serves /metrics until the returned stop is called.
func servePrometheus(env *Env, addr string, st *watchState) (func(), error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--prom: %v", err)
	}
	host, _ := os.Hostname()
	loopback := isLoopbackAddr(ln.Addr())
	if !loopback {
		// Prometheus scrapes from elsewhere name this machine as they
		// please: any Host is answered, but the user is told.
		warnBeyondLoopback(env, "gpumem watch --prom", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		// A loopback listener answers only loopback names, so a web page
		// cannot read it through DNS rebinding.
		if loopback && !isLoopbackHost(r.Host) {
			http.Error(w, "bad Host", http.StatusForbidden)
			return
		}
		st.mu.Lock()
		last, prev := st.last, st.prev
		st.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = gpumon.WritePrometheus(w, host, last, prev)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Fprintf(env.Stderr, "gpumem watch: Prometheus metrics at http://%s/metrics\n", ln.Addr())
	return func() { _ = hs.Close() }, nil
}

func isLoopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func isLoopbackHost(hostport string) bool {
	h, _, err := net.SplitHostPort(hostport)
	if err != nil {
		h = hostport
	}
	h = strings.Trim(h, "[]")
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// addWatchLogs reads the gpumem watch logs among paths (named *.jsonl, or
// starting with a watch record) into srv and returns the other paths.
func addWatchLogs(srv *web.Server, paths []string) (rest []string, n int, err error) {
	for _, path := range paths {
		if path == "-" || !isWatchLog(path) {
			rest = append(rest, path)
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		lg, err := gpumon.ReadLog(f, path)
		f.Close()
		if err != nil {
			return nil, 0, err
		}
		srv.AddWatchLog(filepath.Base(path), lg)
		n++
	}
	return rest, n, nil
}

func isWatchLog(path string) bool {
	if strings.HasSuffix(strings.ToLower(path), ".jsonl") {
		return true
	}
	// Only a regular file is probed: the probe would consume the first
	// bytes of a pipe or FIFO, which the snapshot decoder then misses.
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 20)
	k, _ := io.ReadFull(f, head)
	head = head[:k]
	return bytes.HasPrefix(head, []byte(`{"type":"start"`)) || bytes.HasPrefix(head, []byte(`{"type":"sample"`))
}
