package cli

import (
	"flag"
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/units"
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
	switch {
	case capFlag != "" && gpu != "":
		return 0, usageError(fs, env.Stderr, "give --capacity or --gpu, not both")
	case capFlag != "":
		c, err := units.Parse(capFlag)
		if err != nil || c == 0 {
			return 0, usageError(fs, env.Stderr, fmt.Sprintf("--capacity %q: want a size such as 80GiB", capFlag))
		}
		return c, nil
	case gpu != "":
		g, err := analysis.LookupGPU(gpu)
		if err != nil {
			return 0, usageError(fs, env.Stderr, err.Error())
		}
		return g.Bytes, nil
	}
	return 0, nil
}

func runOOM(env *Env, args []string) error {
	fs := newFlagSet(env, "oom", "[--capacity SIZE | --gpu NAME] [--no-replay] [[--at-dump] --request SIZE [--device-free SIZE] [--stream N]] [--categories RULES.json] [--depth K] [--top N] [--device N] [--json] [--demo] FILE...", help.About("oom"))
	var f answerFlags
	f.register(fs)
	capFlag := fs.String("capacity", "", "the device's total memory (`SIZE`, e.g. 80GiB)")
	gpu := fs.String("gpu", "", "take the capacity from a known GPU (`NAME`, e.g. H100, A100-40GB, T4)")
	noReplay := fs.Bool("no-replay", false, "skip the allocator-settings replays")
	atDump := fs.Bool("at-dump", false, "the trace records no OOM: answer for one at the moment of the dump (needs --request; --request alone implies it)")
	request := fs.String("request", "", "the failed request at the dump (`SIZE`, \"Tried to allocate …\"), for a trace without the OOM")
	deviceFree := fs.String("device-free", "", "with --request: CUDA's free memory at the OOM (`SIZE`, \"… of which … is free\")")
	stream := fs.Int64("stream", 0, "with --request: the request's stream (`N`, PyTorch's number; 0 is the default stream)")
	files, err := f.parse(env, fs, args)
	if err != nil {
		return err
	}
	var dump *analysis.DumpOOM
	if *atDump || *request != "" {
		if *request == "" {
			return usageError(fs, env.Stderr, "--at-dump needs --request SIZE (the error message's \"Tried to allocate …\"), and --device-free SIZE when known")
		}
		dump = &analysis.DumpOOM{Stream: *stream, DeviceFreeUnknown: *deviceFree == ""}
		if dump.RequestedBytes, err = units.Parse(*request); err != nil || dump.RequestedBytes == 0 {
			return usageError(fs, env.Stderr, fmt.Sprintf("--request %q: want a size such as 2GiB", *request))
		}
		if *deviceFree != "" {
			if dump.DeviceFreeBytes, err = units.Parse(*deviceFree); err != nil {
				return usageError(fs, env.Stderr, fmt.Sprintf("--device-free %q: want a size such as 1.1GiB", *deviceFree))
			}
		}
	} else if *deviceFree != "" || *stream != 0 {
		return usageError(fs, env.Stderr, "--device-free and --stream go with --request")
	}
	capacity, err := parseCapacity(env, fs, *capFlag, *gpu)
	if err != nil {
		return err
	}
	return runAnswers(env, &f, files, func(name string, d *analysis.Device) (any, func(io.Writer) error, error) {
		if dump != nil && f.device < 0 && len(d.S.Devices()) > 1 {
			return nil, nil, fmt.Errorf("--at-dump: the snapshot has devices %s; say which one ran out with --device", units.List(d.S.Devices()))
		}
		a, err := d.OOMAnswer(analysis.OOMOptions{Capacity: capacity, Depth: f.depth, Top: f.top, NoReplay: *noReplay, AtDump: dump})
		if err != nil {
			return nil, nil, err
		}
		a.File = name
		t0, ok := d.TraceStartUS()
		return a, func(w io.Writer) error { return report.WriteOOM(w, name, a, t0, ok) }, nil
	})
}
