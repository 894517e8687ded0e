package report

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

// DiffText writes "gpumem diff" as text. The tables pad every cell, empty
// last ones too, so lines are trimmed on the way out.
func DiffText(w io.Writer, r *analysis.Diff, top int) error {
	var buf bytes.Buffer
	diffText(&buf, r, top)
	for line := range bytes.Lines(buf.Bytes()) {
		if _, err := w.Write(append(bytes.TrimRight(line, " \n"), '\n')); err != nil {
			return err
		}
	}
	return nil
}

// diffText writes the text of DiffText (writes to a buffer cannot fail).
func diffText(w *bytes.Buffer, r *analysis.Diff, top int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "A  %s (cuda:%d)\nB  %s (cuda:%d)\n\n", r.A.File, r.A.Device, r.B.File, r.B.Device)
	row := func(name string, a, b uint64) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, units.Human(a), units.Human(b), units.HumanSigned(int64(b)-int64(a)))
	}
	fmt.Fprintf(tw, "\tA\tB\tB - A\t\n")
	row("peak active", r.A.PeakAllocatedBytes, r.B.PeakAllocatedBytes)
	row("peak reserved", r.A.PeakReservedBytes, r.B.PeakReservedBytes)
	row("allocated over the trace", r.A.AllocatedTotalBytes, r.B.AllocatedTotalBytes)
	fmt.Fprintf(tw, "allocations\t%d\t%d\t%+d\t\n", r.A.Allocations, r.B.Allocations, r.B.Allocations-r.A.Allocations)
	at := func(sd analysis.DiffSide) string {
		if sd.Event != nil {
			return fmt.Sprintf("%s (event %d)", sd.At, *sd.Event)
		}
		return sd.At
	}
	fmt.Fprintf(tw, "\t\t\t\t\n")
	fmt.Fprintf(tw, "live at\t%s\t%s\t\t\n", at(r.A), at(r.B))
	row("live", r.A.LiveBytes, r.B.LiveBytes)
	for _, n := range analysis.DiffCategories(r) {
		if r.A.Categories[n] != 0 || r.B.Categories[n] != 0 {
			row("  "+n, r.A.Categories[n], r.B.Categories[n])
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nsites by change of live bytes (innermost user frames; %d of %d):\n", min(top, len(r.Sites)), len(r.Sites))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  B - A\tA\tB\tallocs A/B\tsite\n")
	for _, s := range r.Sites[:min(top, len(r.Sites))] {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d/%d\t%s\n", units.HumanSigned(s.DeltaBytes), units.Human(s.ABytes), units.Human(s.BBytes), s.AAllocs, s.BAllocs, analysis.SiteString(s.Frames))
	}
	tw.Flush()
	if len(r.Settings) == 0 {
		fmt.Fprintf(w, "\nallocator settings: the same\n")
		return
	}
	fmt.Fprintf(w, "\nallocator settings that differ:\n")
	for _, s := range r.Settings {
		fmt.Fprintf(w, "  %s: %s -> %s\n", s.Key, s.A, s.B)
	}
}
