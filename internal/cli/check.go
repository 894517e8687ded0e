package cli

import (
	"io"
	"os"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/check"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/snapshot"
)

func init() {
	Register(&Command{
		Name:    "check",
		Summary: "memory budgets for CI: exit 1 when a peak, category, fragmentation, growth or increase over a baseline is over its budget",
		Run:     runCheck,
	})
}

func runCheck(env *Env, args []string) error {
	fs := newFlagSet(env, "check", "[budgets] [--budgets FILE.json] [--json] [--junit FILE.xml] [--device N] FILE...", help.About("check"))
	var fv check.FlagValues
	fs.StringVar(&fv.MaxPeak, "max-peak", "", "largest peak active `SIZE`")
	fs.StringVar(&fv.MaxReserved, "max-reserved", "", "largest peak reserved `SIZE`")
	fs.StringVar(&fv.MinHeadroom, "min-headroom", "", "least capacity - peak reserved (`SIZE`; needs --gpu or --capacity)")
	fs.StringVar(&fv.Capacity, "capacity", "", "the device's total memory (`SIZE`) for --min-headroom")
	fs.StringVar(&fv.MaxGrowthPerStep, "max-growth-per-step", "", "largest growth of live memory per step (`SIZE`)")
	fv.MaxCategory = check.CategoryLimits{}
	fs.Var(fv.MaxCategory, "max-category", "largest bytes of a category at the peak (`NAME=SIZE`, repeatable)")
	fs.StringVar(&fv.MaxFragmentation, "max-fragmentation", "", "largest fragmentation at the peak (`F`, 0..1)")
	fs.StringVar(&fv.GPU, "gpu", "", "the capacity of a known GPU (`NAME`, e.g. H100) for --min-headroom")
	fs.StringVar(&fv.Baseline, "baseline", "", "an earlier run's snapshot (`OLD`) for --max-increase")
	fs.StringVar(&fv.MaxIncrease, "max-increase", "", "largest growth over --baseline of the peak and each category (`SIZE` or PCT%)")
	budgetsFile := fs.String("budgets", "", "budgets `FILE.json` (- for stdin)")
	asJSON := fs.Bool("json", false, "print JSON")
	junit := fs.String("junit", "", "also write the verdicts as JUnit XML to `FILE`")
	device := deviceFlag(fs, "check only device")
	depth := fs.Int("depth", analysis.DefaultDepth, "user frames that identify a site (`K`)")
	useDemo := fs.Bool("demo", false, "include the embedded demo snapshot")
	files, err := parseSnapshots(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	if err := (analysis.LiveOptions{Depth: *depth}).Validate(); err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	if err := stdinOnce(env, fs, append(files, *budgetsFile)); err != nil {
		return err
	}
	fb, err := fv.Budgets(*budgetsFile == "")
	if err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	bf := &check.File{}
	if *budgetsFile != "" {
		r, err := openInput(env, *budgetsFile, "budgets file")
		if err != nil {
			return err
		}
		defer r.Close()
		if bf, err = check.ReadFile(r, *budgetsFile); err != nil {
			return err
		}
	}
	if fb.Empty() && bf.Empty() && len(bf.Devices) == 0 && len(bf.Ranks) == 0 {
		return usageError(fs, env.Stderr, "no budget given (--max-peak, --max-reserved, --max-category, ... or --budgets)")
	}
	checks, err := runChecks(env, files, *useDemo, *device, bf, &fb, check.Options{Depth: *depth})
	if err != nil {
		return err
	}
	r := check.NewResult(checks)
	if *junit != "" {
		if err := writeOutput(env, *junit, r.WriteJUnit); err != nil {
			return err
		}
	}
	err = writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			return r.WriteJSON(w)
		}
		return r.WriteText(w)
	})
	if err != nil {
		return err
	}
	if os.Getenv("GITHUB_ACTIONS") == "true" {
		// Workflow commands are read from the step's output; with --json
		// they go to stderr so that stdout stays one JSON document.
		w := env.Stdout
		if *asJSON {
			w = env.Stderr
		}
		if err := r.WriteGitHub(w); err != nil {
			return err
		}
	}
	return r.Err()
}

// runChecks checks each snapshot (the demo first) with check.EvaluateFiles.
func runChecks(env *Env, files []string, useDemo bool, device int, bf *check.File, fb *check.Budgets, o check.Options) ([]check.Check, error) {
	if useDemo {
		files = append([]string{demoArg}, files...)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = demoName(f)
	}
	open := func(pos int) (*snapshot.Snapshot, error) { return loadDemoOr(env, files[pos]) }
	baseline := func(path string) (*snapshot.Snapshot, error) { return LoadFile(env, path) }
	return check.EvaluateFiles(names, open, baseline, device, bf, fb, o)
}
