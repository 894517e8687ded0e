package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/monitor"
	"github.com/gpumem/gpumem/internal/units"
)

// BaseName is the file name of a path, as the texts name files (the JSON
// keeps the path as given).
func BaseName(path string) string {
	if i := strings.LastIndexAny(path, `/\`); i >= 0 && i+1 < len(path) {
		return path[i+1:]
	}
	return path
}

// Ranks writes "gpumem ranks" as text: a row per rank, the spread, the
// outlier and notes on rows from other inputs.
func Ranks(w io.Writer, r *analysis.Ranks) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "rank\tpeak active\tpeak reserved\tpeak at\tfragmentation\ttop site at peak\tfile\n")
	for _, row := range r.Ranks {
		at := peakAtText(row)
		site := "-"
		if row.TopSite != "" {
			site = units.Human(row.TopSiteBytes) + " " + row.TopSite
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Rank, units.Human(row.PeakAllocatedBytes), units.Human(row.PeakReservedBytes),
			at, fragText(row), site, BaseName(row.File))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\npeak active: median %s, spread %s (%.1f%% of the median)\n", units.Human(r.MedianPeakBytes), units.Human(r.SpreadBytes), r.SpreadPercent)
	switch {
	case len(r.Ranks) < 3:
		fmt.Fprintf(w, "outlier: needs at least 3 ranks\n")
	case r.Outlier == nil:
		fmt.Fprintf(w, "outlier: none (every rank within 5%% of the median)\n")
	default:
		fmt.Fprintf(w, "outlier: rank %d (%s), %s from the median (%+.1f%%)\n", r.Outlier.Rank, BaseName(r.Outlier.File),
			units.HumanSigned(r.Outlier.FromMedian), r.Outlier.PercentOfMed)
	}
	writeRankNotes(w, r)
	return nil
}

// peakAtText is when a rank's peak happens: the time from the trace's first
// event, else the event, else "before trace" (the state the trace starts
// from) or "dump" (a file without a trace: the peak is the dump's state).
func peakAtText(row analysis.RankRow) string {
	switch {
	case row.RankInput != nil:
		return row.PeakAt
	case row.PeakTimeUS != nil:
		return analysis.FormatDurationUS(*row.PeakTimeUS)
	case row.PeakEvent != nil:
		return fmt.Sprintf("event %d", *row.PeakEvent)
	case row.HasTrace:
		return "before trace"
	}
	return "dump"
}

// fragText is the fragmentation column: "-" where the input has none.
func fragText(row analysis.RankRow) string {
	if row.RankInput != nil && row.NoFrag {
		return "-"
	}
	return strconv.FormatFloat(row.Fragmentation, 'f', 3, 64)
}

// writeRankNotes says what the table's rows from other inputs mean, and
// lists the monitor's peak jumps.
func writeRankNotes(w io.Writer, r *analysis.Ranks) {
	var summaries, monitors int
	for _, row := range r.Ranks {
		if row.RankInput == nil {
			continue
		}
		switch row.Source {
		case "info summary":
			summaries++
		case "monitor":
			monitors++
			for _, j := range row.Jumps {
				fmt.Fprintf(w, "peak jump: rank %d step %d: %s, %s over its median interval peak (+%.1f%%)\n", row.Rank, j.Step,
					units.Human(j.PeakBytes), units.Human(j.OverBytes), j.Percent)
			}
		}
	}
	if summaries > 0 {
		fmt.Fprintf(w, "%d row%s from info --json summaries: fragmentation is the dump's, no time or site of the peak\n", summaries, map[bool]string{true: "", false: "s"}[summaries == 1])
	}
	if monitors > 0 {
		fmt.Fprintf(w, "%d row%s from monitor files: peak active is the highest interval peak (max_memory_allocated), peak reserved the highest reserved at a report\n", monitors, map[bool]string{true: "", false: "s"}[monitors == 1])
	}
}

// SameRankWarnings are the warnings when files give the same rank number
// (rows sorted by rank): the same file twice, or names without "rank N"
// mixed with ones that have it.
func SameRankWarnings(rows []analysis.RankRow) (out []string) {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].Rank == rows[i].Rank {
			j++
		}
		if j-i > 1 {
			names := make([]string, 0, j-i)
			for _, row := range rows[i:j] {
				names = append(names, BaseName(row.File))
			}
			out = append(out, fmt.Sprintf("warning: %d files give rank %d: %s", j-i, rows[i].Rank, strings.Join(names, ", ")))
		}
		i = j
	}
	return out
}

// MonitorSteps writes "gpumem steps FILE.jsonl": a row per report, the
// interval peaks and the reports whose peak jumps.
func MonitorSteps(w io.Writer, s *monitor.Series) error {
	first, last := s.Reports[0], s.Reports[len(s.Reports)-1]
	fmt.Fprintf(w, "%s: rank %d, device %d, %d report%s (steps %d..%d), device total %s\n\n", BaseName(s.File), s.Rank, s.Device,
		len(s.Reports), map[bool]string{true: "", false: "s"}[len(s.Reports) == 1], first.Step, last.Step, units.Human(last.Total))
	jump := map[int]bool{}
	for _, j := range s.Jumps {
		jump[j.Step] = true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "step\tallocated\tinterval peak\t\treserved\tpeak/total\n")
	for _, r := range s.Reports {
		mark := ""
		if jump[r.Step] {
			mark = "jump"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.1f%%\n", r.Step, units.Human(r.Allocated), units.Human(r.Peak), mark, units.Human(r.Reserved), 100*r.Utilization)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ninterval peak: median %s, highest %s after step %d\n", units.Human(s.MedianPeak), units.Human(s.MaxPeak), s.MaxStep)
	switch {
	case len(s.Reports) < 3:
		fmt.Fprintf(w, "peak jumps: need at least 3 reports\n")
	case len(s.Jumps) == 0:
		fmt.Fprintf(w, "peak jumps: none (every interval peak within 10%% of the median)\n")
	default:
		for _, j := range s.Jumps {
			fmt.Fprintf(w, "peak jump: step %d: %s, %s over the median interval peak (+%.1f%%)\n", j.Step, units.Human(j.PeakBytes),
				units.Human(j.OverBytes), j.Percent)
		}
	}
	if last.Reserved > last.Allocated {
		fmt.Fprintf(w, "at the last report the cache holds %s more than the tensors (reserved %s, allocated %s)\n",
			units.Human(last.Reserved-last.Allocated), units.Human(last.Reserved), units.Human(last.Allocated))
	}
	return nil
}
