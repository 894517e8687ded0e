package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/gpumem/gpumem/internal/analysis"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/gpumem/gpumem/internal/units"
)

// RankInput is what a row made from something other than a snapshot
// adds (analysis.RankInput): gpumem ranks also reads "gpumem info --json"
// summaries (so a cluster's scheduler can reduce each rank's snapshot
// where it lies and one machine merges kilobytes) and the monitor's JSONL
// (gpumem record --monitor).
type RankInput = analysis.RankInput

// rankOfAny makes the row of one input: a snapshot, an info summary or a
// monitor file.
func rankOfAny(env *Env, path string, pos, device int) (rankRow, error) {
	switch inputKind(path) {
	case kindSummary:
		return rankOfSummary(path, pos, device)
	case kindMonitor:
		return rankOfMonitor(path, pos, device)
	}
	return rankOf(env, path, pos, device)
}

// maxSummary bounds an info summary: one is a few KiB; a file far larger
// is not one.
const maxSummary = 16 << 20

// infoSummary is the part of "gpumem info --json" (report.Info) a row
// needs.
type infoSummary struct {
	File       string `json:"file"`
	Generation string `json:"generation"`
	Devices    []struct {
		Device        int    `json:"device"`
		ActivePeak    uint64 `json:"active_timeline_peak_bytes"`
		SegmentPeak   uint64 `json:"segment_timeline_peak_bytes"`
		Reserved      uint64 `json:"reserved_bytes"`
		TraceEntries  int    `json:"trace_entries"`
		Fragmentation struct {
			Headline float64 `json:"headline"`
		} `json:"fragmentation"`
	} `json:"devices"`
}

func rankOfSummary(path string, pos, device int) (rankRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return rankRow{}, prefixError(path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSummary+1))
	if err != nil {
		return rankRow{}, prefixError(path, err)
	}
	if len(b) > maxSummary {
		return rankRow{}, fmt.Errorf("%s: over %d MiB: not a gpumem info --json summary", path, maxSummary>>20)
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return rankRow{}, fmt.Errorf("%s: holds the summaries of several snapshots; write one per rank (gpumem info --json FILE > rankN.json)", path)
	}
	var s infoSummary
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&s); err != nil {
		return rankRow{}, fmt.Errorf("%s: not a gpumem info --json summary: %v", path, err)
	}
	if s.Generation == "" || len(s.Devices) == 0 {
		return rankRow{}, fmt.Errorf("%s: not a gpumem info --json summary (no generation or devices)", path)
	}
	// The device: --device N, else the one Snapshot.DefaultDevice picks,
	// from the same figures (the longest trace, then the most reserved).
	best := -1
	for i, d := range s.Devices {
		switch {
		case device >= 0:
			if d.Device == device {
				best = i
			}
		case best < 0 || d.TraceEntries > s.Devices[best].TraceEntries ||
			d.TraceEntries == s.Devices[best].TraceEntries && d.Reserved > s.Devices[best].Reserved:
			best = i
		}
	}
	if best < 0 {
		var have []int
		for _, d := range s.Devices {
			have = append(have, d.Device)
		}
		return rankRow{}, fmt.Errorf("%s: no device %d (devices: %s)", path, device, joinInts(have))
	}
	d := s.Devices[best]
	row := rankRow{Rank: rankFromNames(pos, path, s.File), File: path, Device: d.Device,
		PeakAllocatedBytes: d.ActivePeak, PeakReservedBytes: d.SegmentPeak, Fragmentation: d.Fragmentation.Headline,
		HasTrace: d.TraceEntries > 0, RankInput: &RankInput{Source: "info summary", PeakAt: "-"}}
	return row, nil
}

func rankOfMonitor(path string, pos, device int) (rankRow, error) {
	s, err := readMonitor(path)
	if err != nil {
		return rankRow{}, err
	}
	if device >= 0 && s.Device != device {
		return rankRow{}, fmt.Errorf("%s: no device %d (the monitor reported device %d)", path, device, s.Device)
	}
	step := s.MaxStep
	row := rankRow{Rank: s.Rank, File: path, Device: s.Device, PeakAllocatedBytes: s.MaxPeak, PeakReservedBytes: s.MaxReserve,
		RankInput: &RankInput{Source: "monitor", PeakStep: &step, Jumps: s.Jumps, PeakAt: "step " + strconv.Itoa(step), NoFrag: true}}
	return row, nil
}

// rankFromNames is the rank in the first of names that has "rank N" in
// its base name, else pos.
func rankFromNames(pos int, names ...string) int {
	for _, n := range names {
		if m := analysis.RankInName.FindStringSubmatch(filepath.Base(n)); m != nil {
			r, _ := strconv.Atoi(m[1])
			return r
		}
	}
	return pos
}

// fragText is the fragmentation column: "-" where the input has none.
func fragText(row rankRow) string {
	if row.RankInput != nil && row.NoFrag {
		return "-"
	}
	return strconv.FormatFloat(row.Fragmentation, 'f', 3, 64)
}

// writeRankNotes says what the table's rows from other inputs mean, and
// lists the monitor's peak jumps.
func writeRankNotes(w io.Writer, r *ranksResult) {
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
