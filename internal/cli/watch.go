package cli

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/gpumem/gpumem/internal/gpumon"
	"github.com/gpumem/gpumem/internal/help"
	"golang.org/x/term"
)

func init() {
	Register(&Command{
		Name:    "watch",
		Summary: "live GPU memory monitor: interval peaks, JSONL log, Prometheus metrics",
		Run:     runWatch,
	})
}

// openWatchBackend is gpumon.Open; tests replace it with a fake.
var openWatchBackend = func(interval time.Duration) (gpumon.Backend, error) { return gpumon.Open(interval) }

func runWatch(env *Env, args []string) error {
	fs := newFlagSet(env, "watch", "[flags]   |   gpumem watch --replay FILE.jsonl", help.About("watch"))
	var o gpumon.WatchOptions
	fs.DurationVar(&o.Interval, "interval", gpumon.DefaultInterval, "sampling `period` (at least 50ms)")
	fs.DurationVar(&o.Report, "report", gpumon.DefaultReport, "reporting `period`: peak since the last report, min, mean")
	fs.StringVar(&o.LogPath, "log", "", "append every sample and report to `FILE.jsonl`")
	replay := fs.String("replay", "", "print the reports of a --log `FILE.jsonl` and exit")
	fs.StringVar(&o.Prom, "prom", "", "serve Prometheus metrics on `[host]:port` (\":9400\" binds 127.0.0.1)")
	fs.Float64Var(&o.Alert, "alert", 0, "warn when a device's used memory reaches `PCT` percent of its total")
	fs.StringVar(&o.ExecOnAlert, "exec-on-alert", "", "run `CMD` (with sh -c) at the first alert, once")
	fs.BoolVar(&o.JSON, "json", false, "print JSONL records (as --log writes them) instead of text")
	fs.BoolVar(&o.Plain, "plain", false, "print report lines even on a terminal (no refreshing table)")
	o.Device = -1 // every GPU; --device takes what every command's --device takes
	fs.Var(deviceValue{&o.Device}, "device", "watch only GPU `N` (the driver's index)")
	fs.IntVar(&o.Count, "count", 0, "stop after `N` samples (0: run until Ctrl-C)")
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
	if err := o.Validate(); err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	var b gpumon.Backend
	if *useDemo {
		b = gpumon.NewDemo(o.Interval)
	} else if b, err = openWatchBackend(o.Interval); err != nil {
		return err
	}
	defer b.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return watch(ctx, env, b, o)
}

// watch runs gpumon.Watch, with the terminal table when stdout is one.
func watch(ctx context.Context, env *Env, b gpumon.Backend, o gpumon.WatchOptions) error {
	var tty *gpumon.Terminal
	if f, ok := env.Stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = &gpumon.Terminal{File: f, Width: func() int {
			w, _, _ := term.GetSize(int(f.Fd()))
			return w
		}}
	}
	return gpumon.Watch(ctx, b, o, env.Stdout, env.Stderr, tty)
}

// replayWatch prints the reports of a log as watch printed them.
func replayWatch(env *Env, path string, o gpumon.WatchOptions) error {
	// "-" reads standard input, as every command's FILE does.
	r, err := openInput(env, path, "watch log")
	if err != nil {
		return err
	}
	defer r.Close()
	lg, err := gpumon.ReadLog(r, path)
	if err != nil {
		return err
	}
	return gpumon.WriteReplay(env.Stdout, lg, path, o.Device, o.JSON)
}
