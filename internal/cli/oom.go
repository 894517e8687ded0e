package cli

import (
	"flag"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "oom",
		Summary: "why an OOM happened: shortage, fragmentation or memory outside PyTorch, and what would avoid it",
		Run:     runOOM,
	})
}

// parseCapacity reads --capacity SIZE or --gpu NAME (0: neither given).
func parseCapacity(env *Env, fs *flag.FlagSet, capFlag, gpu string) (uint64, error) {
	c, err := analysis.ParseCapacity(capFlag, gpu)
	if err != nil {
		return 0, usageError(fs, env.Stderr, err.Error())
	}
	return c, nil
}

func runOOM(env *Env, args []string) error {
	fs := newFlagSet(env, "oom", "[--capacity SIZE | --gpu NAME] [--no-replay] [[--at-dump] --request SIZE [--device-free SIZE] [--stream N]] [--categories RULES.json] [--depth K] [--top N] [--device N] [--json] [--demo] FILE...", help.About("oom"))
	var f answerFlags
	f.register(fs)
	capFlag := fs.String("capacity", "", "the device's total memory (`SIZE`, e.g. 80GiB)")
	gpu := fs.String("gpu", "", "take the capacity from a known GPU (`NAME`, e.g. H100, A100-40GB, T4)")
	noReplay := fs.Bool("no-replay", false, "skip the allocator-settings replays")
	var df analysis.DumpFlags
	fs.BoolVar(&df.AtDump, "at-dump", false, "the trace records no OOM: answer for one at the moment of the dump (needs --request; --request alone implies it)")
	fs.StringVar(&df.Request, "request", "", "the failed request at the dump (`SIZE`, \"Tried to allocate …\"), for a trace without the OOM")
	fs.StringVar(&df.DeviceFree, "device-free", "", "with --request: CUDA's free memory at the OOM (`SIZE`, \"… of which … is free\")")
	fs.Int64Var(&df.Stream, "stream", 0, "with --request: the request's stream (`N`, PyTorch's number; 0 is the default stream)")
	files, err := f.parse(env, fs, args)
	if err != nil {
		return err
	}
	dump, err := df.DumpOOM()
	if err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	capacity, err := parseCapacity(env, fs, *capFlag, *gpu)
	if err != nil {
		return err
	}
	return runAnswers(env, &f, files, func(name string, d *analysis.Device) (any, func(io.Writer) error, error) {
		if err := dump.CheckDevice(d.S, f.Device >= 0); err != nil {
			return nil, nil, err
		}
		a, err := d.OOMAnswer(analysis.OOMOptions{Capacity: capacity, Depth: f.Depth, Top: f.Top, NoReplay: *noReplay, AtDump: dump})
		if err != nil {
			return nil, nil, err
		}
		a.File = name
		t0, ok := d.TraceStartUS()
		return a, func(w io.Writer) error { return report.WriteOOM(w, name, a, t0, ok) }, nil
	})
}
