package report

import (
	"bufio"
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

// size prints "1.5 GiB (1610612736 B)".
func size(n uint64) string { return fmt.Sprintf("%s (%d B)", units.Human(n), n) }

// moment prints where a moment lies: "event 1234, +12.5ms, timestep 2345".
func moment(a analysis.At, t0 int64, hasT0 bool) string {
	ev := "before the first event"
	if a.Event >= 0 {
		ev = fmt.Sprintf("after event e%d", a.Event)
	}
	s := ev
	if a.TimeUS != nil && hasT0 {
		s += ", +" + analysis.FormatDurationUS(*a.TimeUS-t0)
	}
	return s + fmt.Sprintf(", timestep %d", a.Timestep)
}

// WriteLive prints `gpumem peak` for one device.
func WriteLive(w io.Writer, file string, a *analysis.Live, t0 int64, hasT0 bool) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s device %d at %s (%s)\n", file, a.Device, a.At.Spec, moment(a.At, t0, hasT0))
	fmt.Fprintf(bw, "  peak active     %s  (Active Memory Timeline, requested bytes, as info)\n", size(a.PeakAllocatedBytes))
	if a.NoSegments == "" {
		fmt.Fprintf(bw, "  peak reserved   %s  (Active Cached Segment Timeline)\n", size(a.PeakReservedBytes))
	} else {
		fmt.Fprintf(bw, "  peak reserved   not recorded\n")
	}
	fmt.Fprintf(bw, "  live            %s requested in %d allocations\n", size(a.LiveBytes), a.LiveCount)
	if a.CategoryReason != "" {
		fmt.Fprintf(bw, "  categories      %s\n", a.CategoryReason)
	}
	writeCategories(bw, a.Categories, a.LiveBytes)
	writeSites(bw, fmt.Sprintf("sites (%d of %d, by the %d innermost user frames)", len(a.Sites), len(a.Sites)+a.SitesOmitted, a.Profile.Depth), a.Sites)
	fmt.Fprintf(bw, "\nsize classes\n")
	for _, c := range a.SizeClasses {
		fmt.Fprintf(bw, "  %-22s %6d  %s\n", c.Name, c.Count, units.Human(c.Bytes))
	}
	if a.NoSegments != "" {
		fmt.Fprintf(bw, "\nfragmentation not known: %s\n", a.NoSegments)
		return bw.Flush()
	}
	writeFragmentation(bw, &a.Fragmentation)
	if len(a.BatchWhatIf) > 0 {
		writeBatch(bw, a.BatchWhatIf, a.BatchCapacity, "given", "fits", "runs out")
	}
	return bw.Flush()
}

func writeCategories(bw *bufio.Writer, cats map[string]uint64, total uint64) {
	fmt.Fprintf(bw, "\ncategories\n")
	for _, c := range analysis.CategoryOrder(cats) {
		n := cats[c]
		fmt.Fprintf(bw, "  %-16s %12s  %5.1f%%\n", c, units.Human(n), percentOf(n, total))
	}
}

func percentOf(n, total uint64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(n) / float64(total)
}

func writeSites(bw *bufio.Writer, title string, sites []analysis.Site) {
	fmt.Fprintf(bw, "\n%s\n", title)
	fmt.Fprintf(bw, "  %10s %6s %6s  %-16s %s\n", "bytes", "share", "count", "category", "site (innermost first)")
	for _, s := range sites {
		fmt.Fprintf(bw, "  %10s %5.1f%% %6d  %-16s %s\n", units.Human(s.Bytes), 100*s.Share, s.Count, s.Category, analysis.SiteString(s.Frames))
	}
}

func writeFragmentation(bw *bufio.Writer, f *analysis.Fragmentation) {
	fmt.Fprintf(bw, "\nfragmentation %.3f  (1 − largest free block / all free cached bytes)\n", f.Headline)
	fmt.Fprintf(bw, "  reserved               %s\n", size(f.Reserved))
	fmt.Fprintf(bw, "  allocated              %s  (blocks, rounded sizes)\n", size(f.Allocated))
	fmt.Fprintf(bw, "  reserved − allocated   %s\n", size(f.ReservedUnallocated))
	fmt.Fprintf(bw, "  free cached            %s\n", size(f.Free))
	fmt.Fprintf(bw, "  inactive split         %s\n", size(f.InactiveSplit))
	fmt.Fprintf(bw, "  rounding waste         %s  (allocated − requested)\n", size(f.RoundingWaste))
	fmt.Fprintf(bw, "  largest free block     %s  (%.1f%% of free)\n", size(f.LargestFreeBlock), 100*f.LargestFreeShare)
}

// WriteOOM prints `gpumem oom` for one device.
func WriteOOM(w io.Writer, file string, a *analysis.OOMAnswer, t0 int64, hasT0 bool) error {
	bw := bufio.NewWriter(w)
	switch a.Verdict {
	case analysis.VerdictNoOOM:
		// One line: the device did not run out (peak says what was live).
		h := a.Headroom
		fmt.Fprintf(bw, "%s device %d: no_oom (the trace records no out-of-memory); peak allocated %s, peak reserved %s",
			file, a.Device, units.Human(h.PeakAllocatedBytes), units.Human(h.PeakReservedBytes))
		if h.HeadroomBytes != nil {
			fmt.Fprintf(bw, ", headroom %s of %s", units.HumanSigned(*h.HeadroomBytes), units.Human(*h.CapacityBytes))
			if *h.HeadroomBytes < 0 {
				fmt.Fprintf(bw, " (the run reserved more than this capacity: check --capacity / --gpu)")
			}
		}
		fmt.Fprintln(bw)
		return bw.Flush()
	case analysis.VerdictNoTrace:
		fmt.Fprintf(bw, "%s device %d: verdict %s (no trace: the state at the dump is the OOM's moment, the request is not recorded)\n", file, a.Device, a.Verdict)
		fmt.Fprintf(bw, "  reserved                 %s\n", size(a.ReservedBytes))
		fmt.Fprintf(bw, "  allocated                %s\n", size(a.AllocatedBytes))
		fmt.Fprintf(bw, "  reserved − allocated     %s\n", size(a.ReservedUnallocatedBytes))
		writeFreeBlocks(bw, a.FreeBlocks)
		fmt.Fprintf(bw, "\nwhy\n")
		for _, l := range a.Arithmetic {
			fmt.Fprintf(bw, "  %s\n", l)
		}
		writeCategories(bw, a.Categories, sum(a.Categories))
		writeSites(bw, "sites live at the dump", a.Sites)
		return bw.Flush()
	}
	for k := range a.OOMs {
		o := &a.OOMs[k]
		if k > 0 {
			fmt.Fprintln(bw)
		}
		if o.AtDump {
			fmt.Fprintf(bw, "%s device %d: OOM at the dump (%s), as given: verdict %s\n", file, a.Device, moment(o.At, t0, hasT0), o.Verdict)
			fmt.Fprintf(bw, "  request (as given)       %s  (a new segment would be %s)\n", size(o.RequestedBytes), units.Human(o.SegmentBytes))
		} else {
			fmt.Fprintf(bw, "%s device %d: OOM %d of %d (%s): verdict %s\n", file, a.Device, k+1, len(a.OOMs), moment(o.At, t0, hasT0), o.Verdict)
			fmt.Fprintf(bw, "  request (rounded)        %s  (a new segment would be %s)\n", size(o.RequestedBytes), units.Human(o.SegmentBytes))
		}
		fmt.Fprintf(bw, "  CUDA free                %s\n", size(o.DeviceFreeBytes))
		fmt.Fprintf(bw, "  reserved                 %s\n", size(o.ReservedBytes))
		fmt.Fprintf(bw, "  allocated                %s\n", size(o.AllocatedBytes))
		fmt.Fprintf(bw, "  reserved − allocated     %s\n", size(o.ReservedUnallocatedBytes))
		fmt.Fprintf(bw, "  largest free block       %s  (stream %d, %s pool)\n", size(o.LargestFreeBlockBytes), o.Stream, o.Pool)
		if o.AtDump && len(a.FreeBlocks) > 0 {
			writeFreeBlocks(bw, a.FreeBlocks)
		}
		if o.CapacityBytes != nil {
			fmt.Fprintf(bw, "  capacity                 %s\n", size(*o.CapacityBytes))
			fmt.Fprintf(bw, "  outside the allocator    %s\n", size(*o.OutsideAllocatorBytes))
		} else {
			fmt.Fprintf(bw, "  capacity                 unknown (give --capacity SIZE or --gpu NAME)\n")
		}
		fmt.Fprintf(bw, "\nwhy\n")
		for _, l := range o.Arithmetic {
			fmt.Fprintf(bw, "  %s\n", l)
		}
		writeCategories(bw, o.Categories, sum(o.Categories))
		writeSites(bw, "sites live at the OOM", o.Sites)
		if len(o.Settings) > 0 {
			fmt.Fprintf(bw, "\nallocator settings replayed at %s (reserved + CUDA free)\n", size(o.Settings[0].CapacityBytes))
			for _, s := range o.Settings {
				switch {
				case s.ReplayDeclined != "":
					fmt.Fprintf(bw, "  replay not possible: %s\n", s.ReplayDeclined)
				case s.AvoidsOOM:
					fmt.Fprintf(bw, "  %-60s avoids it (peak reserved %s)\n", s.Config, units.Human(s.PeakReserved))
				default:
					fmt.Fprintf(bw, "  %-60s still OOMs\n", s.Config)
				}
			}
		}
		if len(o.BatchWhatIf) > 0 {
			writeBatch(bw, o.BatchWhatIf, o.ReservedBytes+o.DeviceFreeBytes, "reserved + CUDA free", "avoids it", "still OOMs")
			if !o.BatchWhatIfReproduced {
				fmt.Fprintf(bw, "  (at the recorded batch the same replay does not run out: these prove nothing)\n")
			}
		}
		fmt.Fprintf(bw, "\nsuggestions\n")
		for _, s := range o.Suggestions {
			fmt.Fprintf(bw, "  - %s\n", s.Text)
		}
		if len(o.Suggestions) == 0 {
			fmt.Fprintf(bw, "  (none: nothing live at the OOM explains the shortfall)\n")
		}
	}
	return bw.Flush()
}

// writeFreeBlocks prints the largest free block of each stream and pool.
func writeFreeBlocks(bw *bufio.Writer, pools []analysis.PoolFree) {
	fmt.Fprintf(bw, "  largest free block per stream and pool:\n")
	for _, p := range pools {
		where := fmt.Sprintf("stream %d, %s pool", p.Stream, p.Pool)
		if p.Private != "" {
			where = fmt.Sprintf("stream %d, private pool %s, %s blocks", p.Stream, p.Private, p.Pool)
		}
		fmt.Fprintf(bw, "    %-40s %s of %s free\n", where, size(p.LargestFreeBytes), units.Human(p.FreeBytes))
	}
	if len(pools) == 0 {
		fmt.Fprintf(bw, "    (no free cached block)\n")
	}
}

// writeBatch prints a batch what-if table at capacity (how it was found).
func writeBatch(bw *bufio.Writer, outs []analysis.BatchOutcome, capacity uint64, how, fits, fails string) {
	fmt.Fprintf(bw, "\nbatch what-if: the trace replayed with the allocations that scale with the batch scaled, recorded settings, at %s (%s)\n", size(capacity), how)
	fmt.Fprintf(bw, "  %-6s  %-16s  %s\n", "scale", "peak allocated", "peak reserved")
	for _, b := range outs {
		verdict := fails
		if b.AvoidsOOM {
			verdict = fits
		}
		fmt.Fprintf(bw, "  %-6s  %-16s  %-16s  %s\n", fmt.Sprintf("%g×", b.Scale), units.Human(b.PeakAllocatedBytes), units.Human(b.PeakReservedBytes), verdict)
	}
}

func sum(m map[string]uint64) uint64 {
	var t uint64
	for _, v := range m {
		t += v
	}
	return t
}
