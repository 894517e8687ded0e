package cli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/units"
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
	fs.StringVar(&f.script, "script", "", "run a script `FILE` (- for stdin)")
	fs.StringVar(&f.config, "config", "", "allocator settings `STR` (PYTORCH_CUDA_ALLOC_CONF syntax)")
	fs.StringVar(&f.capacity, "capacity", "", "device memory `SIZE` (e.g. 80GiB), or oom for what the recorded OOM implies; default unlimited")
	fs.Float64Var(&f.fraction, "fraction", 0, "per-process memory `fraction` of --capacity (enables garbage_collection_threshold)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	f.devicePtr = deviceFlag(fs, "replay only device")
	fs.BoolVar(&f.sweep, "sweep", false, "compare common settings on the snapshot")
	fs.BoolVar(&f.fromEmpty, "from-empty", false, "what-if from an empty allocator (blocks live at trace start allocated first)")
	fs.BoolVar(&f.demo, "demo", false, "use the embedded demo snapshot")
	fs.Float64Var(&f.batchScale, "batch-scale", 0, "replay with the allocations that scale with the batch multiplied by `S` (e.g. 0.5)")
	return f, fs
}

type simFlags struct {
	devicePtr *int
	demo      bool
	script    string
	config    string
	capacity  string
	fraction  float64
	json      bool
	device    int
	sweep     bool
	// fromEmpty is set by --from-empty; fromEmptySet tells whether the
	// flag was given at all (a sweep chooses by itself otherwise).
	fromEmpty     bool
	fromEmptySet  bool
	capacityOOM   bool    // --capacity oom
	capacityBytes uint64  // --capacity SIZE
	batchScale    float64 // --batch-scale S (simbatch.go)
}

// parseSimArgs parses sim's command line: the flags, with --capacity
// read into bytes, and the positional arguments.
func parseSimArgs(env *Env, args []string) (*simFlags, []string, error) {
	f, fs := simFlagSet(env)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.fromEmptySet = f.fromEmptySet || fl.Name == "from-empty" })
	f.device = *f.devicePtr
	if f.capacity == "oom" {
		f.capacityOOM = true
	} else if f.capacity != "" {
		c, err := units.Parse(f.capacity)
		if err != nil {
			return nil, nil, usageError(fs, env.Stderr, "--capacity: "+err.Error())
		}
		f.capacityBytes = c
	}
	if f.fraction < 0 || f.fraction > 1 {
		return nil, nil, usageError(fs, env.Stderr, fmt.Sprintf("--fraction must be in [0, 1], got %g", f.fraction))
	}
	if f.fraction > 0 && f.capacity == "" {
		return nil, nil, usageError(fs, env.Stderr, "--fraction needs --capacity")
	}
	if _, err := simConfig(f.config); err != nil {
		return nil, nil, usageError(fs, env.Stderr, "--config: "+err.Error())
	}
	if err := f.checkBatchScale(); err != nil {
		return nil, nil, usageError(fs, env.Stderr, err.Error())
	}
	return f, pos, nil
}

func runSim(env *Env, args []string) error {
	f, pos, err := parseSimArgs(env, args)
	if err != nil {
		return err
	}
	capacity := f.capacityBytes
	switch {
	case f.script != "":
		if len(pos) > 0 || f.demo {
			return usageError(env.flags, env.Stderr, "give either --script FILE or a snapshot FILE, not both")
		}
		if f.capacityOOM {
			return errors.New("--capacity oom needs a snapshot with a recorded OOM, not a script")
		}
		return simScript(env, f, capacity)
	case len(pos)+boolInt(f.demo) == 1 && f.batchScale > 0:
		return simBatch(env, f, pos, capacity)
	case len(pos)+boolInt(f.demo) == 1:
		return simSnapshot(env, f, pos, capacity)
	default:
		return usageError(env.flags, env.Stderr, "need --script FILE or one snapshot FILE (or --demo)")
	}
}

func simConfig(s string) (alloc.Config, error) {
	if s == "" || s == "default" {
		return alloc.DefaultConfig(), nil
	}
	return alloc.ParseConfig(s)
}

// ---- scripts ----

func simScript(env *Env, f *simFlags, capacity uint64) error {
	var r io.Reader
	name := f.script
	if f.script == "-" {
		r = env.Stdin
	} else {
		fi, err := os.Stat(f.script)
		if err != nil {
			return prefixError(f.script, err) // "PATH: no such file", as every command
		}
		if fi.IsDir() {
			return fmt.Errorf("%s: is a directory, not a script", f.script)
		}
		fh, err := os.Open(f.script)
		if err != nil {
			return prefixError(f.script, err)
		}
		defer fh.Close()
		r = fh
	}
	cmds, err := alloc.ParseScript(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	cfg, err := simConfig(f.config)
	if err != nil {
		return err
	}
	steps, a, runErr := alloc.RunScript(cmds, cfg, alloc.Options{Capacity: capacity, MemoryFraction: f.fraction})
	if runErr != nil {
		runErr = fmt.Errorf("%s: %w", name, runErr)
	}
	if f.json {
		out := report.NewSimScriptJSON(cfg, steps)
		if err := writeJSON(env.Stdout, out); err != nil {
			return err
		}
		return runErr
	}
	report.SimScript(env.Stdout, cfg, capacity, steps, a.Stats())
	return runErr
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
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

func simSnapshot(env *Env, f *simFlags, files []string, capacity uint64) error {
	s, path, err := loadSimSnapshot(env, f, files)
	if err != nil {
		return err
	}
	if err := needSegments(s, "sim"); err != nil {
		return err
	}
	if f.device >= 0 {
		if _, err := oneDevice(s, f.device); err != nil {
			return err // every command's "no device N (devices: ...)"
		}
	}
	o := alloc.SimOptions{Device: f.device, Capacity: capacity, CapacityOOM: f.capacityOOM, Sweep: f.sweep,
		FromEmpty: f.fromEmpty, FromEmptySet: f.fromEmptySet}
	if f.config != "" {
		c, err := simConfig(f.config)
		if err != nil {
			return err
		}
		if f.fraction > 0 {
			c.MemoryFraction = f.fraction
		}
		o.Config = &c
	}
	r, err := alloc.SimSnapshot(s, path, o)
	if err != nil {
		return err
	}
	if f.json {
		return writeJSON(env.Stdout, r)
	}
	report.SimSnapshot(env.Stdout, path, s, r)
	return nil
}
