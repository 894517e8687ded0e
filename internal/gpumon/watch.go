package gpumon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/gpumem/gpumem/internal/units"
)

// The defaults of gpumem watch's periods.
const (
	DefaultInterval = 500 * time.Millisecond
	DefaultReport   = 10 * time.Second
)

// Terminal is where watch draws its refreshing table: the terminal and
// its width in columns (0 when unknown).
type Terminal struct {
	File  *os.File
	Width func() int
}

// WatchOptions are gpumem watch's settings.
type WatchOptions struct {
	Interval, Report time.Duration // sampling and reporting periods
	LogPath          string        // JSONL log to append to ("" for none)
	Prom             string        // Prometheus [host]:port ("" for none)
	Alert            float64       // warn at this percent of a device's total (0: off)
	ExecOnAlert      string        // run with sh -c at the first alert
	JSON, Plain      bool          // JSONL records; report lines even on a terminal
	Device           int           // one GPU, or -1 for every GPU
	Count            int           // stop after this many samples (0: never)
}

// watchState is what the Prometheus handler reads while sampling goes on.
type watchState struct {
	mu   sync.Mutex
	last Sample
	prev []Interval // the last completed report
}

// MinInterval is the shortest sampling period watch accepts.
const MinInterval = 50 * time.Millisecond

// Validate says what is wrong with the settings, in the flags' words.
func (o *WatchOptions) Validate() error {
	switch {
	case o.Interval < MinInterval:
		return errors.New("-interval must be at least 50ms")
	case o.Count < 0:
		return errors.New("-count must be at least 0 (0: run until Ctrl-C)")
	case o.Report < o.Interval:
		return errors.New("-report must be at least -interval")
	case o.Alert < 0 || o.Alert > 100:
		return errors.New("-alert is a percentage between 0 and 100")
	case o.ExecOnAlert != "" && o.Alert == 0:
		return errors.New("-exec-on-alert needs -alert PCT")
	}
	return nil
}

// Watch samples b every o.Interval until ctx ends, o.Count samples are
// taken or the backend fails, and reports every o.Report: to stdout as
// text lines, JSONL records (o.JSON) or, on a terminal (tty), a
// refreshing table; alerts go to stderr, every sample and report to the
// log, the last ones to the Prometheus endpoint. The sampler stops before
// Watch returns, so the caller may close b then.
func Watch(ctx context.Context, b Backend, o WatchOptions, stdout, stderr io.Writer, tty *Terminal) error {
	var lw *LogWriter
	if o.LogPath != "" {
		var err error
		if lw, err = CreateLog(o.LogPath); err != nil {
			return err
		}
		defer lw.Close()
	}
	st := &watchState{}
	if o.Prom != "" {
		stopProm, err := servePrometheus(stderr, o.Prom, st)
		if err != nil {
			return err
		}
		defer stopProm()
	}
	var scr *screen
	if tty != nil && !o.JSON && !o.Plain {
		scr = newScreen(tty.File, b.Name(), o)
		scr.width = tty.Width
		scr.start()
		defer scr.stop()
	}
	var jsonOut *json.Encoder
	if o.JSON {
		jsonOut = json.NewEncoder(stdout)
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
	samples := make(chan Sample)
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

	var stats *Stats
	var alerter *Alerter
	if o.Alert > 0 {
		alerter = NewAlerter(o.Alert)
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
				_ = jsonOut.Encode(NewReportRecord(iv))
			}
		case scr != nil:
			scr.setReport(ivs)
		default:
			WriteReportLines(stdout, ivs)
		}
		return nil
	}
	for {
		var s Sample
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
		s = filterDevice(s, o.Device)
		if len(s.Devices) == 0 {
			return fmt.Errorf("no GPU with index %d", o.Device)
		}
		if stats == nil {
			stats = NewStats(s.Time)
			nextReport = s.Time.Add(o.Report)
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
				nextReport = nextReport.Add(o.Report)
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
			for _, r := range NewSampleRecords(s) {
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
					fmt.Fprintln(stderr, line)
				}
				if lw != nil {
					if err := lw.Alert(a); err != nil {
						return err
					}
				}
				if jsonOut != nil {
					_ = jsonOut.Encode(a)
				}
				if o.ExecOnAlert != "" && !execDone {
					execDone = true
					runAlertCommand(stderr, o.ExecOnAlert, a)
				}
			}
		}
		if scr != nil {
			scr.update(s, stats.Current(s.Time))
		}
		n++
		if o.Count > 0 && n >= o.Count {
			return doReport(s.Time)
		}
	}
}

func startRecord(b Backend, s Sample, o WatchOptions) StartRecord {
	r := StartRecord{Type: "start", Time: s.Time, Backend: b.Name(), IntervalMS: o.Interval.Milliseconds(), ReportMS: o.Report.Milliseconds()}
	for _, d := range s.Devices {
		info := DeviceInfo{GPU: d.Index, UUID: d.UUID, Name: d.Name, Total: d.Total}
		if d.MIG >= 0 {
			mig := d.MIG
			info.MIG = &mig
		}
		r.Devices = append(r.Devices, info)
	}
	return r
}

func filterDevice(s Sample, dev int) Sample {
	if dev < 0 {
		return s
	}
	out := Sample{Time: s.Time}
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
func runAlertCommand(stderr io.Writer, command string, a AlertRecord) {
	cmd := exec.Command("sh", "-c", command)
	cmd.Env = append(os.Environ(),
		"GPUMEM_ALERT_GPU="+strconv.Itoa(a.GPU),
		"GPUMEM_ALERT_UUID="+a.UUID,
		"GPUMEM_ALERT_USED="+strconv.FormatUint(a.Used, 10),
		"GPUMEM_ALERT_TOTAL="+strconv.FormatUint(a.Total, 10),
		"GPUMEM_ALERT_PERCENT="+strconv.FormatFloat(a.Percent, 'f', 1, 64))
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "gpumem watch: --exec-on-alert: %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

// writeReportLines prints one line per device per report, then a line per
// process with its peak.
func WriteReportLines(w io.Writer, ivs []Interval) {
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
