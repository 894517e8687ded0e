package cli

import (
	"flag"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/snapshot"
)

func init() {
	Register(&Command{
		Name:    "sim",
		Summary: "simulate PyTorch's caching allocator: scripts, snapshot replay, config what-ifs",
		Run:     runSim,
	})
}

// simFlagSet makes sim's flag set and the flags it fills in.
func simFlagSet(env *Env) (*simFlags, *flag.FlagSet) {
	f := &simFlags{}
	fs := newFlagSet(env, "sim", "[--script FILE | FILE | --demo] [flags]", help.About("sim"))
	fs.StringVar(&f.Script, "script", "", "run a script `FILE` (- for stdin)")
	fs.StringVar(&f.Config, "config", "", "allocator settings `STR` (PYTORCH_CUDA_ALLOC_CONF syntax)")
	fs.StringVar(&f.Capacity, "capacity", "", "device memory `SIZE` (e.g. 80GiB), or oom for what the recorded OOM implies; default unlimited")
	fs.Float64Var(&f.Fraction, "fraction", 0, "per-process memory `fraction` of --capacity (enables garbage_collection_threshold)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	f.devicePtr = deviceFlag(fs, "replay only device")
	fs.BoolVar(&f.Sweep, "sweep", false, "compare common settings on the snapshot")
	fs.BoolVar(&f.fromEmpty, "from-empty", false, "what-if from an empty allocator (blocks live at trace start allocated first)")
	fs.BoolVar(&f.demo, "demo", false, "use the embedded demo snapshot")
	fs.IntVar(&f.Curve, "curve", 0, "with --json, add the reserved bytes over the trace, recorded and replayed, in `N` buckets")
	fs.Float64Var(&f.BatchScale, "batch-scale", 0, "replay with the allocations that scale with the batch multiplied by `S` (e.g. 0.5)")
	return f, fs
}

type simFlags struct {
	alloc.SimRequest
	devicePtr *int
	demo      bool
	json      bool
	device    int
	// fromEmpty is set by --from-empty; fromEmptySet tells whether the
	// flag was given at all (a sweep chooses by itself otherwise).
	fromEmpty    bool
	fromEmptySet bool
}

// parseSimArgs parses sim's command line: the flags, checked, and the
// positional arguments.
func parseSimArgs(env *Env, args []string) (*simFlags, []string, error) {
	f, fs := simFlagSet(env)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.fromEmptySet = f.fromEmptySet || fl.Name == "from-empty" })
	f.device = *f.devicePtr
	if err := f.Validate(); err != nil {
		return nil, nil, usageError(fs, env.Stderr, err.Error())
	}
	if f.Curve > 0 && !f.json {
		return nil, nil, usageError(fs, env.Stderr, "--curve needs --json")
	}
	return f, pos, nil
}

func runSim(env *Env, args []string) error {
	f, pos, err := parseSimArgs(env, args)
	if err != nil {
		return err
	}
	capacity := f.CapacityBytes
	switch {
	case f.Script != "":
		if len(pos) > 0 || f.demo {
			return usageError(env.flags, env.Stderr, "give either --script FILE or a snapshot FILE, not both")
		}
		if err := f.CheckScript(); err != nil {
			return err
		}
		return simScript(env, f, capacity)
	case len(pos)+boolInt(f.demo) == 1 && f.BatchScale > 0:
		return simBatch(env, f, pos, capacity)
	case len(pos)+boolInt(f.demo) == 1:
		return simSnapshot(env, f, pos)
	default:
		return usageError(env.flags, env.Stderr, "need --script FILE or one snapshot FILE (or --demo)")
	}
}

// ---- scripts ----

func simScript(env *Env, f *simFlags, capacity uint64) error {
	r, err := openInput(env, f.Script, "script")
	if err != nil {
		return err
	}
	defer r.Close()
	run, err := alloc.RunScriptFrom(r, f.Script, f.Config, alloc.Options{Capacity: capacity, MemoryFraction: f.Fraction})
	if err != nil {
		return err
	}
	if f.json {
		if err := report.WriteJSON(env.Stdout, report.NewSimScriptJSON(run.Config, run.Steps)); err != nil {
			return err
		}
		return run.Err
	}
	report.SimScript(env.Stdout, run.Config, capacity, run.Steps, run.Final)
	return run.Err
}

// ---- snapshots ----

// loadSimSnapshot loads sim's one snapshot and names it as the answers do.
func loadSimSnapshot(env *Env, f *simFlags, files []string) (*snapshot.Snapshot, string, error) {
	s, err := loadOne(env, files, f.demo)
	if len(files) == 1 {
		return s, files[0], err
	}
	return s, "demo", err
}

func simSnapshot(env *Env, f *simFlags, files []string) error {
	s, path, err := loadSimSnapshot(env, f, files)
	if err != nil {
		return err
	}
	if err := alloc.NeedSegments(s, "sim"); err != nil {
		return err
	}
	if f.device >= 0 {
		if _, err := analysis.OneDevice(s, f.device); err != nil {
			return err // every command's "no device N (devices: ...)"
		}
	}
	o, err := f.Options(f.device, f.fromEmpty, f.fromEmptySet)
	if err != nil {
		return err
	}
	r, err := alloc.SimSnapshot(s, path, o)
	if err != nil {
		return err
	}
	if f.json {
		return report.WriteJSON(env.Stdout, r)
	}
	report.SimSnapshot(env.Stdout, path, s, r)
	return nil
}
