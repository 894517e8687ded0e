package cli

import (
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/steps"
)

func init() {
	Register(&Command{
		Name:    "steps",
		Summary: "per training step: peak, its phase, and live memory growing from step to step (leaks)",
		Run:     runSteps,
	})
}

func runSteps(env *Env, args []string) error {
	fs := newFlagSet(env, "steps", "[--json] [--device N] [--demo] FILE", help.About("steps"))
	asJSON := fs.Bool("json", false, "print JSON")
	device := deviceFlag(fs, "device")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	files, err := parseOneSnapshot(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	if len(files) == 1 && inputKind(files[0]) == analysis.KindMonitor { // monitor_input.go
		return runMonitorSteps(env, files[0], *asJSON)
	}
	s, err := loadOne(env, files, *useDemo)
	if err != nil {
		return err
	}
	dev, err := analysis.OneDevice(s, *device)
	if err != nil {
		return err
	}
	out, err := steps.Answer(analysis.NewDevice(s, dev))
	if err != nil {
		return err
	}
	return writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			return report.WriteJSON(w, out)
		}
		return report.Steps(w, report.BaseName(s.Source.Name), out.Report, out.Steps)
	})
}
