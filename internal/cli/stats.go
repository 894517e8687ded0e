package cli

import (
	"io"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "stats",
		Summary: "segment page map and totals, as python -m torch.cuda._memory_viz stats",
		Run:     runStats,
	})
}

func runStats(env *Env, args []string) error {
	fs := newFlagSet(env, "stats", "[--device N] [--demo] FILE", help.About("stats"))
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	device := deviceFlag(fs, "summarize only the segments of device")
	files, err := parseOneSnapshot(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	env.noVersions = true // its answers do not read address versions
	s, err := loadOne(env, files, *useDemo)
	if err != nil {
		return err
	}
	if err := alloc.NeedSegments(s, "stats"); err != nil {
		return err
	}
	if *device >= 0 {
		if _, err := analysis.OneDevice(s, *device); err != nil {
			return err
		}
	}
	return writeStdout(env, func(w io.Writer) error { return report.Stats(w, report.OnlyDevice(s, *device)) })
}
