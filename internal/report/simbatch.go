package report

import (
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

// SimBatch writes the text of "gpumem sim --batch-scale" for one device.
func SimBatch(w io.Writer, name string, j *analysis.BatchAnswer) error {
	events, elapsed := j.Events, j.Elapsed
	capText := "unlimited"
	if j.CapacityBytes != nil {
		capText = units.Human(*j.CapacityBytes)
		if j.CapacitySource == "recorded_oom" {
			capText += " (what the recorded OOM implies: reserved + CUDA free)"
		}
	}
	oomText := func(b analysis.BatchOutcome) string {
		switch {
		case b.AvoidsOOM:
			return "every request fits"
		case b.RecordedOOM:
			return fmt.Sprintf("the recorded OOM still happens (%s)", failCount(b.OOMs))
		default:
			return failCount(b.OOMs)
		}
	}
	fmt.Fprintf(w, "%s device %d: batch ×%g replayed (recorded settings, from an empty allocator)\n", name, j.Device, j.Scale)
	fmt.Fprintf(w, "  capacity            %s\n", capText)
	fmt.Fprintf(w, "  scaled              %d of %d allocations (activations, temporaries and autograd buffers of the passes, inputs): %s → %s requested in all\n",
		j.ScaledAllocations, j.Allocations, units.Human(j.ScaledBytes), units.Human(j.ScaledBytesAfter))
	fmt.Fprintf(w, "  ×1 (the recording)  peak allocated %s, peak reserved %s; %s\n", units.Human(j.Control.PeakAllocatedBytes), units.Human(j.Control.PeakReservedBytes), oomText(j.Control))
	fmt.Fprintf(w, "  ×%-17g peak allocated %s, peak reserved %s; %s\n", j.Scale, units.Human(j.Scaled.PeakAllocatedBytes), units.Human(j.Scaled.PeakReservedBytes), oomText(j.Scaled))
	switch {
	case j.RecordedOOM && j.Control.AvoidsOOM:
		fmt.Fprintf(w, "  the model, started empty, does not reproduce the recorded OOM at ×1: the what-if proves nothing about it\n")
	case j.RecordedOOM && j.Scaled.AvoidsOOM:
		fmt.Fprintf(w, "  at ×%g the run gets past the recorded OOM (the trace ends there: later steps are not replayed)\n", j.Scale)
	case j.RecordedOOM:
		fmt.Fprintf(w, "  at ×%g the recorded OOM still happens\n", j.Scale)
	}
	_, err := fmt.Fprintf(w, "  the ×%g replay: %d trace events in %.3fs (%.1f M events/s)\n", j.Scale, events, elapsed.Seconds(), float64(events)/elapsed.Seconds()/1e6)
	return err
}

func failCount(n int) string {
	if n == 1 {
		return "1 request fails"
	}
	return fmt.Sprintf("%d requests fail", n)
}
