package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// SimScript writes the text of "gpumem sim --script": the settings, then
// per command its line, the change of the totals and what the allocator
// did, then the peaks (final: the allocator's statistics at the end).
func SimScript(w io.Writer, cfg alloc.Config, capacity uint64, steps []alloc.Step, final alloc.MemoryStats) {
	fmt.Fprintf(w, "config: %s", cfg.String())
	if capacity > 0 {
		fmt.Fprintf(w, ", capacity %s", units.C10(capacity))
	}
	fmt.Fprintln(w)
	for i := range steps {
		st := &steps[i]
		fmt.Fprintf(w, "line %-4d %s\n", st.Line, st.Op)
		if st.Error != "" {
			fmt.Fprintf(w, "          OOM: %s\n", st.Error)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "          requested %s  allocated %s  reserved %s",
			units.HumanSigned(st.Delta(func(s *alloc.MemoryStats) *alloc.StatArray { return &s.RequestedBytes })),
			units.HumanSigned(st.Delta(func(s *alloc.MemoryStats) *alloc.StatArray { return &s.AllocatedBytes })),
			units.HumanSigned(st.Delta(func(s *alloc.MemoryStats) *alloc.StatArray { return &s.ReservedBytes })))
		if strings.HasPrefix(st.Op, "alloc") && st.Error == "" && st.Addr != 0 {
			fmt.Fprintf(&b, "  at %#x", st.Addr)
		}
		switch {
		case st.NewSegment:
			fmt.Fprintf(&b, "  new %s-pool segment of %s", PoolName(st.Small), units.Human(st.SegmentSize))
		case st.MappedBytes > 0:
			fmt.Fprintf(&b, "  mapped %s of %s-pool pages", units.Human(st.MappedBytes), PoolName(st.Small))
		case strings.HasPrefix(st.Op, "alloc") && st.Error == "" && st.Addr != 0:
			b.WriteString("  reused a cached block")
		}
		fmt.Fprintln(w, b.String())
		s := &st.Stats
		fmt.Fprintf(w, "          totals: requested %s  allocated %s  reserved %s  segments %d  inactive split %s\n",
			units.Human(uint64(s.RequestedBytes[alloc.PoolAll].Current)),
			units.Human(uint64(s.AllocatedBytes[alloc.PoolAll].Current)),
			units.Human(uint64(s.ReservedBytes[alloc.PoolAll].Current)),
			s.Segment[alloc.PoolAll].Current,
			units.Human(uint64(s.InactiveSplitBytes[alloc.PoolAll].Current)))
	}
	st := final
	fmt.Fprintf(w, "peak: allocated %s  reserved %s  requested %s; cudaMalloc %d, cudaFree %d, OOMs %d\n",
		units.Human(uint64(st.AllocatedBytes[alloc.PoolAll].Peak)), units.Human(uint64(st.ReservedBytes[alloc.PoolAll].Peak)),
		units.Human(uint64(st.RequestedBytes[alloc.PoolAll].Peak)), st.NumDeviceAlloc, st.NumDeviceFree, st.NumOOMs)
}

// PoolName names the pool of a block: "small" or "large".
func PoolName(small bool) string {
	if small {
		return "small"
	}
	return "large"
}

// SimReplay writes the text of "gpumem sim FILE" for one device: the
// validation of the model against the recorded trace, or a what-if
// replay under other settings. name is the file's base name.
func SimReplay(w io.Writer, name string, s *snapshot.Snapshot, r *alloc.ReplayResult, capacity uint64) {
	own := alloc.ConfigFromSettings(s.AllocatorSettings)
	if r.Validation {
		src := "snapshot's allocator_settings"
		if s.AllocatorSettings == nil {
			src = "defaults; the snapshot has no allocator_settings"
		}
		fmt.Fprintf(w, "%s device %d: validation with its own settings: %s (%s)\n", name, r.Device, r.Config.String(), src)
	} else {
		fmt.Fprintf(w, "%s device %d: what-if %s (recorded with %s)\n", name, r.Device, r.Config.String(), own.String())
	}
	fmt.Fprintf(w, "  trace: %d events; state at trace start: %d segments, %d live blocks, %s reserved\n",
		r.Events, r.InitialSegments, r.InitialBlocks, units.Human(r.InitialReserved))
	if r.Validation {
		fmt.Fprintf(w, "  alloc addresses predicted:   %d/%d (%s)\n", r.AllocAddrsMatched, r.AllocAddrsTotal, pct(r.AllocAddrsMatched, r.AllocAddrsTotal))
		fmt.Fprintf(w, "  segment_alloc/map predicted: %d/%d (%s)\n", r.SegEventsMatched, r.SegEventsTotal, pct(r.SegEventsMatched, r.SegEventsTotal))
		fmt.Fprintf(w, "  segment_free/unmap applied:  %d/%d (%s)\n", r.ReleasesMatched, r.ReleasesTotal, pct(r.ReleasesMatched, r.ReleasesTotal))
		if r.FinalStateMatches {
			fmt.Fprintf(w, "  final segments and blocks:   identical to the snapshot\n")
		} else {
			fmt.Fprintf(w, "  final segments and blocks:   DIFFER from the snapshot\n")
		}
		fmt.Fprintf(w, "  peak reserved %s (trace %s), peak allocated %s\n",
			units.Human(r.PeakReserved), units.Human(r.RecordedPeakReserved), units.Human(r.PeakAllocated))
		if r.MismatchCount > 0 {
			fmt.Fprintf(w, "  %d mismatches; first %d:\n", r.MismatchCount, len(r.Mismatches))
			for _, m := range r.Mismatches {
				fmt.Fprintf(w, "    %s\n", m)
			}
		}
		return
	}
	delta := int64(r.PeakReserved) - int64(r.RecordedPeakReserved)
	rel := ""
	if r.RecordedPeakReserved > 0 {
		rel = fmt.Sprintf(", %+.1f%%", 100*float64(delta)/float64(r.RecordedPeakReserved))
	}
	fmt.Fprintf(w, "  peak reserved:   %s (recorded %s: %s%s)\n", units.Human(r.PeakReserved), units.Human(r.RecordedPeakReserved), units.HumanSigned(delta), rel)
	fmt.Fprintf(w, "  peak allocated:  %s\n", units.Human(r.PeakAllocated))
	fmt.Fprintf(w, "  cudaMalloc/map:  %d (recorded %d); cudaFree/unmap: %d (recorded %d)\n",
		r.CudaMallocs, r.RecordedCudaMallocs, r.CudaFrees, r.RecordedCudaFrees)
	fmt.Fprintf(w, "  unallocated at peak reserved: %.1f%% of reserved memory\n", 100*r.UnallocatedAtPeak)
	for _, o := range r.RecordedOOMs {
		switch {
		case capacity == 0:
			fmt.Fprintf(w, "  recorded OOM at event %d (%s): give --capacity to test whether it still happens\n", o.Event, units.Human(o.Size))
		case o.StillOOM:
			fmt.Fprintf(w, "  recorded OOM at event %d (%s): still out of memory at %s\n", o.Event, units.Human(o.Size), units.Human(capacity))
		default:
			fmt.Fprintf(w, "  recorded OOM at event %d (%s): would fit at %s\n", o.Event, units.Human(o.Size), units.Human(capacity))
		}
	}
	if len(r.ModelOOMs) > 0 {
		o := r.ModelOOMs[0]
		where := fmt.Sprintf("at event %d", o.Event)
		if o.AtStart {
			where = "while allocating the blocks live at trace start"
		}
		fmt.Fprintf(w, "  the model runs out of memory %d times, first %s (%s)\n", len(r.ModelOOMs), where, units.Human(o.Size))
	} else if capacity > 0 {
		if r.OOMs() > 0 {
			fmt.Fprintf(w, "  no other request of the trace fails at %s\n", units.Human(capacity))
		} else {
			fmt.Fprintf(w, "  no allocation fails at %s\n", units.Human(capacity))
		}
	}
}

// SimSweep writes the table of "gpumem sim FILE --sweep" for one device.
func SimSweep(w io.Writer, name string, dev int, rows []alloc.SweepRow, fromEmpty bool) {
	mode := "from the recorded layout"
	if fromEmpty {
		mode = "from an empty allocator"
	}
	fmt.Fprintf(w, "%s device %d: replayed %s under %d settings, best first by peak reserved\n", name, dev, mode, len(rows))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "config\tpeak reserved\tvs default\tpeak allocated\tunalloc@peak\tcudaMalloc\tcudaFree\tOOMs")
	var base *alloc.SweepRow
	for i := range rows {
		if rows[i].Name == "default" {
			base = &rows[i]
		}
	}
	for _, row := range rows {
		r := row.Result
		rel := "-"
		if base != nil && base.Result.PeakReserved > 0 && row.Name != "default" {
			rel = fmt.Sprintf("%s (%+.1f%%)", units.HumanSigned(row.DeltaReserved), 100*float64(row.DeltaReserved)/float64(base.Result.PeakReserved))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.1f%%\t%d\t%d\t%d\n", row.Name, units.Human(r.PeakReserved), rel,
			units.Human(r.PeakAllocated), 100*r.UnallocatedAtPeak, r.CudaMallocs, r.CudaFrees, r.OOMs())
	}
	tw.Flush()
	best := rows[0]
	switch {
	case base == nil:
	case best.Name == "default" || best.DeltaReserved >= 0:
		fmt.Fprintf(w, "No setting lowers peak reserved below the default (%s).\n", units.Human(base.Result.PeakReserved))
	default:
		fmt.Fprintf(w, "Best: %s lowers peak reserved by %s (%.1f%%) versus the default %s.\n", best.Name,
			units.Human(uint64(-best.DeltaReserved)), -100*float64(best.DeltaReserved)/float64(base.Result.PeakReserved),
			units.Human(base.Result.PeakReserved))
	}
}

// SimOOMWhatIf writes the table of "gpumem sim FILE --capacity oom":
// per setting, whether the recorded OOM still happens.
func SimOOMWhatIf(w io.Writer, name string, dev int, s *snapshot.Snapshot, c alloc.OOMCapacity, res []alloc.OOMOutcome) {
	fmt.Fprintf(w, "%s device %d: recorded OOM at event %d (%s); capacity it implies: %s reserved + %s free = %s\n",
		name, dev, c.Event, units.Human(c.Size), units.Human(c.Reserved), units.Human(c.DeviceFree), units.Human(c.Capacity))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "config\trecorded OOM\tfirst OOM of the model\tpeak reserved")
	fits := 0
	for _, o := range res {
		name := o.Config
		if name == "recorded" {
			name = "recorded (" + alloc.ConfigFromSettings(s.AllocatorSettings).String() + ")"
		}
		verdict := "fits"
		if o.StillOOM {
			verdict = "still OOM"
		} else {
			fits++
		}
		first := "none"
		switch {
		case o.FirstOOM < 0:
		case o.OOMAtStart:
			first = "at trace start"
		default:
			first = fmt.Sprintf("event %d (%s)", o.FirstOOM, units.Human(o.FirstOOMSize))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, verdict, first, units.Human(o.Result.PeakReserved))
	}
	tw.Flush()
	if fits == 0 {
		fmt.Fprintf(w, "No setting avoids the OOM at %s.\n", units.Human(c.Capacity))
	} else {
		fmt.Fprintf(w, "%d of %d settings serve the request that ran out of memory at %s.\n", fits, len(res), units.Human(c.Capacity))
	}
}

// pct is a/b as a percentage with two decimals, "-" when b is 0.
func pct(a, b int) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*float64(a)/float64(b))
}
