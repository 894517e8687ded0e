package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "peak",
		Summary: "what is live at the peak (or any moment): sites, categories, size classes, fragmentation",
		Run:     runPeak,
	})
}

// answerFlags are the flags peak and oom share.
type answerFlags struct {
	asJSON, useDemo bool
	analysis.AnswerOptions
	categories string // --categories RULES.json
}

func (f *answerFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.asJSON, "json", false, "print JSON")
	fs.BoolVar(&f.useDemo, "demo", false, "include the embedded demo snapshot")
	f.Device = -1
	fs.Var(deviceValue{&f.Device}, "device", "only device `N` (a device number 0, 1, ...; default: every device)")
	fs.IntVar(&f.Depth, "depth", analysis.DefaultDepth, "user frames that identify a site (`K`)")
	fs.IntVar(&f.Top, "top", analysis.DefaultTop, "sites listed (`N`; 0 = all)")
	categoriesFlag(fs, &f.categories)
}

// categoriesFlag registers --categories (peak, oom, diff, serve).
func categoriesFlag(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "categories", "", "your own category rules (`RULES.json`: [{\"match\": REGEX on \"file:line:function\", \"category\": NAME}, …]; first match wins)")
}

// loadCategories reads a --categories file ("" : none).
func loadCategories(path string) (*analysis.UserRules, error) {
	if path == "" {
		return nil, nil
	}
	u, err := analysis.LoadUserRules(path)
	if err != nil && u == nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, prefixError(path, pe.Err)
		}
	}
	return u, err
}

func runPeak(env *Env, args []string) error {
	fs := newFlagSet(env, "peak", "[--at peak|reserved-peak|end|eN|TIME] [--capacity SIZE | --gpu NAME] [--categories RULES.json] [--depth K] [--top N] [--device N] [--json] [--demo] FILE...", help.About("peak"))
	var f answerFlags
	f.register(fs)
	at := fs.String("at", "peak", "the `moment`: peak, reserved-peak, end, eN or a time such as 12.5ms")
	capFlag := fs.String("capacity", "", "the device's memory (`SIZE`): replay the batch what-if (0.75, 0.5, 0.25) against it")
	gpu := fs.String("gpu", "", "take the capacity from a known GPU (`NAME`, e.g. H100)")
	files, err := f.parse(env, fs, args)
	if err != nil {
		return err
	}
	capacity, err := parseCapacity(env, fs, *capFlag, *gpu)
	if err != nil {
		return err
	}
	if err := analysis.CheckMomentSpec(*at); err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	return runAnswers(env, &f, files, func(name string, d *analysis.Device) (any, func(io.Writer) error, error) {
		a, err := d.PeakAnswer(analysis.PeakOptions{At: *at, LiveOptions: f.LiveOptions, Capacity: capacity})
		if err != nil {
			return nil, nil, err
		}
		a.File = name
		t0, ok := d.TraceStartUS()
		return a, func(w io.Writer) error { return report.WriteLive(w, name, a, t0, ok) }, nil
	})
}

// parse reads the arguments (flags anywhere) and checks the shared flags.
func (f *answerFlags) parse(env *Env, fs *flag.FlagSet, args []string) ([]string, error) {
	files, err := parseSnapshots(env, fs, args, &f.useDemo)
	if err != nil {
		return nil, err
	}
	env.noVersions = true // peak's and oom's answers do not read address versions
	if err := f.Validate(); err != nil {
		return nil, usageError(fs, env.Stderr, err.Error())
	}
	if f.Rules, err = loadCategories(f.categories); err != nil {
		return nil, err
	}
	return files, nil
}

// runAnswers loads each snapshot in turn (the demo first) and prints one
// answer for every device of it, or only --device: one computes it (its
// JSON value and how to write it as text).
func runAnswers(env *Env, f *answerFlags, files []string, one func(name string, d *analysis.Device) (any, func(io.Writer) error, error)) error {
	out := report.Answers{W: env.Stdout, JSON: f.asJSON}
	if f.useDemo {
		files = append([]string{demoArg}, files...)
	}
	for _, p := range files {
		s, err := loadDemoOr(env, p)
		if err != nil {
			return err
		}
		name := demoName(p)
		devs, err := f.Devices(s, name)
		if err != nil {
			return err
		}
		if len(devs) == 0 {
			if err := out.None(name); err != nil {
				return err
			}
		}
		for _, d := range devs {
			v, text, err := one(name, d)
			if err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			if err := out.Add(v, text); err != nil {
				return err
			}
		}
	}
	return writeStdout(env, func(w io.Writer) error { out.W = w; return out.Flush() })
}
