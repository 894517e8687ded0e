package report

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/steps"
	"github.com/gpumem/gpumem/internal/units"
)

// Steps writes "gpumem steps" as text: a row per step, then the leak
// check and the sites that grew.
func Steps(w io.Writer, name string, r *steps.Report, js []steps.StepRow) error {
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
