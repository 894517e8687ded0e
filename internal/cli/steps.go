package cli

import (
	"encoding/json"
	"fmt"
	"github.com/gpumem/gpumem/internal/report"
	"io"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/steps"
	"github.com/gpumem/gpumem/internal/units"
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
		return writeStepsText(w, report.BaseName(s.Source.Name), out.Report, out.Steps)
	})
}

func writeStepsText(w io.Writer, name string, r *steps.Report, js []steps.StepRow) error {
	if len(r.Steps) == 0 {
		_, err := fmt.Fprintf(w, "%s device %d: no steps found (no ProfilerStep or optimizer annotations, no repeating allocation sites)\n", name, r.Device)
		return err
	}
	plural := "s"
	if len(r.Steps) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "%s device %d: %d step%s (from %s)\n\n", name, r.Device, len(r.Steps), plural, r.Source)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\tevents\tlive at start\tpeak\tpeak phase\tend of forward\tend of backward\tend of optimizer\tduration\n")
	phase := func(st steps.StepRow, v uint64, has bool) string {
		if !has {
			return "-"
		}
		return units.Human(v)
	}
	for i, st := range js {
		s := r.Steps[i]
		dur := "-"
		if st.TimeUS != 0 {
			dur = analysis.FormatDurationUS(st.DurationUS)
		}
		fmt.Fprintf(tw, "%s\t%d..%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", st.Name, st.FirstEvent, st.LastEvent,
			units.Human(st.StartBytes), units.Human(st.PeakBytes), st.PeakPhase,
			phase(st, st.ForwardEnd, s.HasPhase[steps.Forward]), phase(st, st.BackwardEnd, s.HasPhase[steps.Backward]),
			phase(st, st.OptimizerEnd, s.HasPhase[steps.Optimizer]), dur)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case len(r.Steps) < 3:
		fmt.Fprintf(w, "\nleak check: needs at least 3 steps (the first is warm-up)\n")
	case r.Leak:
		fmt.Fprintf(w, "\nLEAK: live memory at the start of every step from step 1 on, and at the end, grows by %s per step\n", units.HumanSigned(r.GrowthPerStep))
		fmt.Fprintf(w, "sites that grew from the start of step 1 to the end:\n")
		for _, g := range r.Sites[:min(len(r.Sites), 10)] {
			fmt.Fprintf(w, "  %s  %s\n", units.HumanSigned(g.Bytes), analysis.SiteString(g.Frames))
		}
	default:
		fmt.Fprintf(w, "\nno leak: live memory at the start of steps 1..%d and at the end does not keep growing (%s per step on average)\n", len(r.Steps)-1, units.HumanSigned(r.GrowthPerStep))
	}
	return nil
}
