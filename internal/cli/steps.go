package cli

import (
	"encoding/json"
	"github.com/gpumem/gpumem/internal/report"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/steps"
)

func init() {
	Register(&Command{
		Name:    "steps",
		Summary: "per training step: peak, its phase, and live memory growing from step to step (leaks)",
		Run:     runSteps,
	})
}

const stepsAbout = `
Splits the trace into training steps — from ProfilerStep#N annotations,
else optimizer.step annotations, else the repeating pattern of allocation
sites — and prints per step its events, the live bytes at its start, its
peak (Active Memory Timeline total, requested bytes), the phase the peak
is in (forward, backward or optimizer, from the allocating stack), the live
bytes when each phase ends, and its duration. Live memory at the start of
steps 1.. (after the warm-up step that creates optimizer state) and at the
end that grows at every step is flagged as a leak, with the growth per
step and the allocation sites that grew. Given the monitor's JSON lines
(gpumem record --monitor), prints its per-interval peaks and the steps
whose peak jumps.`

func runSteps(env *Env, args []string) error {
	fs := newFlagSet(env, "steps", "[--json] [--device N] [--demo] FILE", stepsAbout)
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
	dev, err := oneDevice(s, *device)
	if err != nil {
		return err
	}
	out, err := steps.Answer(analysis.NewDevice(s, dev))
	if err != nil {
		return err
	}
	return writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(out)
		}
		return report.Steps(w, report.BaseName(s.Source.Name), out.Report, out.Steps)
	})
}
