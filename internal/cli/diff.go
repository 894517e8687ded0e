package cli

import (
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "diff",
		Summary: "compare two runs: live bytes by category and site, peaks, allocation counts, settings",
		Run:     runDiff,
	})
}

func runDiff(env *Env, args []string) error {
	fs := newFlagSet(env, "diff", "[--at MOMENT] [--segments] [--json] [--device-a N] [--device-b N] [--demo] A B", help.About("diff"))
	at := fs.String("at", "peak", "compare at `MOMENT`: peak, reserved-peak, end, eN or a time such as 12.5ms")
	asJSON := fs.Bool("json", false, "print JSON")
	segments := fs.Bool("segments", false, "_memory_viz.py compare: segments only in A / only in B")
	out := fs.String("o", "", "--segments: write the flamegraph SVG to `FILE`")
	collapsed := fs.Bool("collapsed", false, "--segments: write folded stacks instead of SVG")
	da, db := -1, -1
	fs.Var(deviceValue{&da}, "device-a", "device `N` of A")
	fs.Var(deviceValue{&db}, "device-b", "device `N` of B")
	device := deviceFlag(fs, "device of A and B")
	depth := fs.Int("depth", analysis.DefaultDiffDepth, "frames per allocation site (innermost user frames)")
	top := fs.Int("top", 15, "sites to print (text)")
	useDemo := fs.Bool("demo", false, "use the embedded demo for a missing A or B")
	var categories string
	categoriesFlag(fs, &categories)
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	files, err = withDemo(env, fs, files, *useDemo, 2, "want two snapshots A and B")
	if err != nil {
		return err
	}
	if !*segments && (*out != "" || *collapsed) {
		return usageError(fs, env.Stderr, "-o and --collapsed go with --segments (a flamegraph of two runs: gpumem flame diff A B)")
	}
	if err := stdinOnce(env, fs, files); err != nil {
		return err
	}
	if *depth < 1 || *top < 0 {
		return usageError(fs, env.Stderr, "--depth must be at least 1 and --top at least 0")
	}
	if err := analysis.CheckMomentSpec(*at); err != nil { // malformed, before any file is read
		return usageError(fs, env.Stderr, err.Error())
	}
	if da < 0 {
		da = *device
	}
	if db < 0 {
		db = *device
	}
	if *segments {
		return runCompareSegments(env, files, da, db, *out, *collapsed, *asJSON)
	}
	rules, err := loadCategories(categories)
	if err != nil {
		return err
	}
	a, err := liveProfile(env, files[0], da, *at, rules)
	if err != nil {
		return err
	}
	b, err := liveProfile(env, files[1], db, *at, rules)
	if err != nil {
		return err
	}
	r := analysis.NewDiff(a, b, *depth)
	return writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			return report.WriteJSON(w, r)
		}
		return report.DiffText(w, r, *top)
	})
}

// runCompareSegments is _memory_viz.py compare.
func runCompareSegments(env *Env, files []string, da, db int, out string, collapsed, asJSON bool) error {
	a, err := loadDemoOr(env, files[0])
	if err != nil {
		return err
	}
	b, err := loadDemoOr(env, files[1])
	if err != nil {
		return err
	}
	c := export.CompareSegments(a, da, b, db)
	if out == "" { // with -o only the file is written, as flame -o
		return writeStdout(env, func(w io.Writer) error { return c.WriteText(w, asJSON) })
	}
	return writeOutput(env, out, func(w io.Writer) error {
		if collapsed {
			return export.WriteFolded(w, c.Flame)
		}
		return export.WriteFlameSVG(w, c.Flame, export.CompareFlameTitles(a, b, c))
	})
}
