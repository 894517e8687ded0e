package analysis

import (
	"cmp"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/monitor"
	"github.com/gpumem/gpumem/snapshot"
)

// RankRow is one rank's row of gpumem ranks (and of the viewer's Ranks
// view): its peaks, when the peak happens, the fragmentation and the top
// site at the peak.
type RankRow struct {
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

	HasTrace bool `json:"-"` // the device has trace events (else its peak is the dump's state)

	*RankInput // rows from info summaries and monitor files
}

// RankInput is what a row made from something other than a snapshot
// adds: gpumem ranks also reads "gpumem info --json" summaries and the
// monitor's JSON lines (gpumem record --monitor).
type RankInput struct {
	Source   string         `json:"source"` // "info summary" or "monitor"
	PeakStep *int           `json:"peak_step,omitempty"`
	Jumps    []monitor.Jump `json:"peak_jumps,omitempty"`

	PeakAt string `json:"-"` // the "peak at" column
	NoFrag bool   `json:"-"` // no fragmentation figure (the monitor has none)
}

// Ranks is the answer of gpumem ranks: the rows sorted by rank, the
// spread of the peaks and the rank furthest from the median.
type Ranks struct {
	Ranks           []RankRow    `json:"ranks"`
	MedianPeakBytes uint64       `json:"median_peak_allocated_bytes"`
	SpreadBytes     uint64       `json:"spread_bytes"`
	SpreadPercent   float64      `json:"spread_percent_of_median"`
	Outlier         *RankOutlier `json:"outlier"`
}

// RankOutlier is the rank furthest from the median peak, when more than
// 5% away.
type RankOutlier struct {
	Rank         int     `json:"rank"`
	File         string  `json:"file"`
	FromMedian   int64   `json:"bytes_from_median"`
	PercentOfMed float64 `json:"percent_from_median"`
}

// RankInName finds the rank in a file name ("rank3", "rank_3", "RANK-3").
var RankInName = regexp.MustCompile(`(?i)rank[_\-. ]?(\d+)`)

// RankOf makes the row of one snapshot's device dev: its rank is the
// number in "rank N" in the file's name, else pos.
func RankOf(s *snapshot.Snapshot, pos, dev int) (RankRow, error) {
	return RankOfDevice(NewDevice(s, dev), pos)
}

// RankOfDevice is RankOf for a device already analysed.
func RankOfDevice(dv *Device, pos int) (RankRow, error) {
	s, dev := dv.S, dv.Index
	m, err := dv.Resolve("peak")
	if err != nil {
		return RankRow{}, fmt.Errorf("%s: %v", s.Source.Name, err)
	}
	// The row holds copies only: a pointer or substring into the device
	// would keep the whole decoded file alive (200 files of 3 MB held
	// 569 MB in gpumem ranks).
	name := strings.Clone(s.Source.Name)
	row := RankRow{Rank: pos, File: name, Device: dev, HasTrace: len(dv.Events()) > 0,
		PeakAllocatedBytes: dv.Active.PeakBytes, PeakReservedBytes: dv.Segments.PeakBytes}
	if m.Event >= 0 {
		ev := m.Event
		row.PeakEvent = &ev
	}
	row.Rank = RankFromNames(pos, name)
	if t0, ok := dv.TraceStartUS(); ok && m.HasTime {
		d := m.TimeUS - t0
		row.PeakTimeUS = &d
	}
	if len(dv.Events()) > 0 {
		row.Fragmentation = dv.FragmentationAt(m).Headline
	} else {
		row.Fragmentation = DumpFragmentation(s, dev).Headline
	}
	p := dv.LiveProfile(m).Fold(2, 0)
	p.Sort()
	if len(p.Samples) > 0 {
		row.TopSite = strings.Clone(SiteString(p.FrameStrings(&p.Samples[0])[:min(1, len(p.Samples[0].Frames))]))
		row.TopSiteBytes = p.Samples[0].Bytes
	}
	return row, nil
}

// SummarizeRanks sorts rows by rank (stably) and finds the median peak,
// the spread and the outlier: the rank furthest from the median when it
// is more than 5% away, given at least three ranks. rows must not be
// empty.
func SummarizeRanks(rows []RankRow) *Ranks {
	slices.SortStableFunc(rows, func(a, b RankRow) int { return cmp.Compare(a.Rank, b.Rank) })
	r := &Ranks{Ranks: rows}
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
	abs := func(v int64) int64 { return max(v, -v) }
	for _, row := range rows {
		d := int64(row.PeakAllocatedBytes) - int64(r.MedianPeakBytes)
		pct := 100 * float64(d) / float64(r.MedianPeakBytes)
		if abs(d)*20 > int64(r.MedianPeakBytes) && (r.Outlier == nil || abs(d) > abs(r.Outlier.FromMedian)) {
			r.Outlier = &RankOutlier{Rank: row.Rank, File: row.File, FromMedian: d, PercentOfMed: pct}
		}
	}
	return r
}

// RankFromNames is a file's rank: the one in the first of names that has
// "rank N" in its base name (RankInName), else its position pos.
func RankFromNames(pos int, names ...string) int {
	for _, n := range names {
		if m := RankInName.FindStringSubmatch(filepath.Base(n)); m != nil {
			r, _ := strconv.Atoi(m[1])
			return r
		}
	}
	return pos
}
