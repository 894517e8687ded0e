package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

func init() {
	Register(&Command{
		Name:    "ranks",
		Summary: "one row per rank's snapshot: peaks, time of peak, fragmentation, top site; spread and outlier",
		Run:     runRanks,
	})
}

const ranksAbout = `
Compares the snapshots of the ranks of one distributed job (one file per
rank, e.g. snapshot_rank3.pickle): per file its rank (from "rank N" in the
name, else its position), peak active (Active Memory Timeline) and peak
reserved (Active Cached Segment Timeline), when the peak happens (from the
trace's first event), the fragmentation of the cache at the peak
(1 - largest free block / free cached bytes) and the site holding the most
memory at the peak; then the spread of the peaks across ranks and the
rank furthest from the median when it is more than 5% away. Files are read
-j at a time (default 2), each dropped once its row is made, so memory
stays that of -j snapshots. A FILE may also be a rank's "gpumem info
--json" summary or its monitor file (gpumem record --monitor): see
docs/record.md. A file that cannot be read is named on standard error
and left out of the table; the command then exits 1.`

type rankRow struct {
	Rank               int     `json:"rank"`
	File               string  `json:"file"`
	Device             int     `json:"device"`
	PeakAllocatedBytes uint64  `json:"peak_allocated_bytes"`
	PeakReservedBytes  uint64  `json:"peak_reserved_bytes"`
	PeakEvent          *int    `json:"peak_event"`
	PeakTimeUS         *int64  `json:"peak_time_us_from_start"`
	Fragmentation      float64 `json:"fragmentation_at_peak"`
	TopSite            string  `json:"top_site"`
	TopSiteBytes       uint64  `json:"top_site_bytes"`

	hasTrace bool // the device has trace events (else its peak is the dump's state)

	*RankInput // rows from info summaries and monitor files (ranks_inputs.go)
}

type ranksResult struct {
	Ranks           []rankRow `json:"ranks"`
	MedianPeakBytes uint64    `json:"median_peak_allocated_bytes"`
	SpreadBytes     uint64    `json:"spread_bytes"`
	SpreadPercent   float64   `json:"spread_percent_of_median"`
	Outlier         *outlier  `json:"outlier"`
}

type outlier struct {
	Rank         int     `json:"rank"`
	File         string  `json:"file"`
	FromMedian   int64   `json:"bytes_from_median"`
	PercentOfMed float64 `json:"percent_from_median"`
}

// ranksInFlight and ranksMaxInFlight count snapshots being decoded or
// analysed at once (read by the test of bounded memory).
var ranksInFlight, ranksMaxInFlight atomic.Int32

var rankInName = regexp.MustCompile(`(?i)rank[_\-. ]?(\d+)`)

func runRanks(env *Env, args []string) error {
	fs := newFlagSet(env, "ranks", "[--json] [-j N] [--device N] FILE...", ranksAbout)
	asJSON := fs.Bool("json", false, "print JSON")
	jobs := fs.Int("j", 2, "files decoded at once")
	device := deviceFlag(fs, "device of every file (default each file's DefaultDevice)")
	useDemo := fs.Bool("demo", false, "include the embedded demo snapshot as one rank")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *useDemo {
		files = append([]string{demoArg}, files...)
	}
	if len(files) == 0 {
		return usageError(fs, env.Stderr, "no snapshot given")
	}
	if err := stdinOnce(env, fs, files); err != nil {
		return err
	}
	if *jobs < 1 {
		return usageError(fs, env.Stderr, "-j wants at least 1")
	}
	rows := make([]rankRow, len(files))
	errs := make([]error, len(files))
	sem := make(chan struct{}, min(*jobs, runtime.GOMAXPROCS(0)*2, len(files)))
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n := ranksInFlight.Add(1)
			for m := ranksMaxInFlight.Load(); n > m && !ranksMaxInFlight.CompareAndSwap(m, n); m = ranksMaxInFlight.Load() {
			}
			defer ranksInFlight.Add(-1)
			rows[i], errs[i] = rankOfAny(env, f, i, *device)
		}()
	}
	wg.Wait()
	if ranksRowsMade != nil {
		ranksRowsMade()
	}
	// A file that cannot be read costs its row, not the table: the others
	// are printed, each failure is one line on standard error, and the
	// command exits 1.
	good, failed := rows[:0:0], 0
	for i, err := range errs {
		if err == nil {
			good = append(good, rows[i])
			continue
		}
		if failed++; len(files) == 1 {
			return err
		}
		fmt.Fprintf(env.Stderr, "gpumem ranks: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if len(good) == 0 {
		return fmt.Errorf("none of the %d files could be read", len(files))
	}
	r := summarizeRanks(good)
	warnSameRank(env, r.Ranks)
	err = writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		}
		return writeRanksText(w, r)
	})
	if err == nil && failed > 0 {
		err = fmt.Errorf("%d of %d files could not be read (above); the table has the other %d", failed, len(files), len(good))
	}
	return err
}

// ranksRowsMade, when set (by a test), is called once every row is made,
// before the table: what is still allocated then is what the rows hold.
var ranksRowsMade func()

// rankOf decodes one file and makes its row; the snapshot is garbage once
// it returns.
func rankOf(env *Env, path string, pos, device int) (rankRow, error) {
	lv, err := liveProfile(env, path, device, "peak")
	if err != nil {
		return rankRow{}, err
	}
	// The row holds copies only: a pointer or substring into lv would
	// keep the whole decoded file alive (200 files of 3 MB held 569 MB).
	name := strings.Clone(lv.s.Source.Name)
	row := rankRow{Rank: pos, File: name, Device: lv.device, hasTrace: len(lv.dv.Events()) > 0,
		PeakAllocatedBytes: lv.dv.Active.PeakBytes, PeakReservedBytes: lv.dv.Segments.PeakBytes}
	if lv.m.Event >= 0 {
		ev := lv.m.Event
		row.PeakEvent = &ev
	}
	if m := rankInName.FindStringSubmatch(filepath.Base(name)); m != nil {
		row.Rank, _ = strconv.Atoi(m[1])
	}
	if t0, ok := lv.dv.TraceStartUS(); ok && lv.m.HasTime {
		d := lv.m.TimeUS - t0
		row.PeakTimeUS = &d
	}
	if len(lv.dv.Events()) > 0 {
		row.Fragmentation = lv.dv.FragmentationAt(lv.m).Headline
	} else {
		row.Fragmentation = analysis.DumpFragmentation(lv.s, lv.device).Headline
	}
	p := lv.prof.Fold(2, 0)
	p.Sort()
	if len(p.Samples) > 0 {
		row.TopSite = strings.Clone(analysis.SiteString(p.FrameStrings(&p.Samples[0])[:min(1, len(p.Samples[0].Frames))]))
		row.TopSiteBytes = p.Samples[0].Bytes
	}
	return row, nil
}

func summarizeRanks(rows []rankRow) *ranksResult {
	slices.SortStableFunc(rows, func(a, b rankRow) int { return cmp.Compare(a.Rank, b.Rank) })
	r := &ranksResult{Ranks: rows}
	peaks := make([]uint64, len(rows))
	for i, row := range rows {
		peaks[i] = row.PeakAllocatedBytes
	}
	slices.Sort(peaks)
	n := len(peaks)
	r.MedianPeakBytes = peaks[n/2]
	if n%2 == 0 {
		r.MedianPeakBytes = (peaks[n/2-1] + peaks[n/2]) / 2
	}
	r.SpreadBytes = peaks[n-1] - peaks[0]
	if r.MedianPeakBytes > 0 {
		r.SpreadPercent = 100 * float64(r.SpreadBytes) / float64(r.MedianPeakBytes)
	}
	if n < 3 || r.MedianPeakBytes == 0 {
		return r
	}
	for _, row := range rows {
		d := int64(row.PeakAllocatedBytes) - int64(r.MedianPeakBytes)
		pct := 100 * float64(d) / float64(r.MedianPeakBytes)
		if abs(d)*20 > int64(r.MedianPeakBytes) && (r.Outlier == nil || abs(d) > abs(r.Outlier.FromMedian)) {
			r.Outlier = &outlier{Rank: row.Rank, File: row.File, FromMedian: d, PercentOfMed: pct}
		}
	}
	return r
}

func writeRanksText(w io.Writer, r *ranksResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "rank\tpeak active\tpeak reserved\tpeak at\tfragmentation\ttop site at peak\tfile\n")
	for _, row := range r.Ranks {
		at := peakAtText(row)
		site := "-"
		if row.TopSite != "" {
			site = units.Human(row.TopSiteBytes) + " " + row.TopSite
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Rank, units.Human(row.PeakAllocatedBytes), units.Human(row.PeakReservedBytes),
			at, fragText(row), site, baseName(row.File))
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
		fmt.Fprintf(w, "outlier: rank %d (%s), %s from the median (%+.1f%%)\n", r.Outlier.Rank, baseName(r.Outlier.File),
			units.HumanSigned(r.Outlier.FromMedian), r.Outlier.PercentOfMed)
	}
	writeRankNotes(w, r)
	return nil
}

// peakAtText is when a rank's peak happens: the time from the trace's first
// event, else the event, else "before trace" (the state the trace starts
// from) or "dump" (a file without a trace: the peak is the dump's state).
func peakAtText(row rankRow) string {
	switch {
	case row.RankInput != nil:
		return row.peakAt
	case row.PeakTimeUS != nil:
		return analysis.FormatDurationUS(*row.PeakTimeUS)
	case row.PeakEvent != nil:
		return fmt.Sprintf("event %d", *row.PeakEvent)
	case row.hasTrace:
		return "before trace"
	}
	return "dump"
}

// warnSameRank warns on standard error when files give the same rank
// number (rows sorted by rank): the same file twice, or names without
// "rank N" mixed with ones that have it.
func warnSameRank(env *Env, rows []rankRow) {
	for i := 0; i < len(rows); {
		j := i + 1
		for j < len(rows) && rows[j].Rank == rows[i].Rank {
			j++
		}
		if j-i > 1 {
			names := make([]string, 0, j-i)
			for _, row := range rows[i:j] {
				names = append(names, baseName(row.File))
			}
			fmt.Fprintf(env.Stderr, "gpumem ranks: warning: %d files give rank %d: %s\n", j-i, rows[i].Rank, strings.Join(names, ", "))
		}
		i = j
	}
}
