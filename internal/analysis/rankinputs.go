package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gpumem/gpumem/internal/monitor"
)

// Inputs that are not snapshots but that steps and ranks read: the
// per-interval monitor's JSON lines (gpumem record --monitor) and the
// summaries "gpumem info --json" writes.
const (
	KindSnapshot = iota
	KindMonitor
	KindSummary
)

// InputKind tells from the first bytes of a file (64 KiB suffice) what it
// holds; anything that is neither a monitor file nor an info summary is
// left to the snapshot loader, which says what is wrong with it.
func InputKind(head []byte) int {
	if monitor.Sniff(head) {
		return KindMonitor
	}
	return summaryOrSnapshot(head)
}

// summaryOrSnapshot reads the top-level keys of the JSON object head
// starts with (or of the first object of an array): keys only "gpumem info
// --json" writes make it a summary; a snapshot's own keys, anything else,
// or running out of head make it a snapshot.
func summaryOrSnapshot(head []byte) int {
	dec := json.NewDecoder(bytes.NewReader(head))
	tok, err := dec.Token()
	if d, ok := tok.(json.Delim); err == nil && ok && d == '[' {
		tok, err = dec.Token()
	}
	if d, ok := tok.(json.Delim); err != nil || !ok || d != '{' {
		return KindSnapshot
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return KindSnapshot
		}
		switch k {
		case "generation", "pytorch_version_hint", "decoded_bytes", "file_bytes":
			return KindSummary
		case "segments", "device_traces":
			return KindSnapshot
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return KindSnapshot
		}
	}
	return KindSnapshot
}

// MaxSummary bounds an info summary: one is a few KiB; a file far larger
// is not one.
const MaxSummary = 16 << 20

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

// RankOfSummary makes the row of a "gpumem info --json" summary read from
// path (b: at most MaxSummary+1 of its bytes) at position pos; device < 0
// picks the device DefaultDevice would.
func RankOfSummary(b []byte, path string, pos, device int) (RankRow, error) {
	if len(b) > MaxSummary {
		return RankRow{}, fmt.Errorf("%s: over %d MiB: not a gpumem info --json summary", path, MaxSummary>>20)
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return RankRow{}, fmt.Errorf("%s: holds the summaries of several snapshots; write one per rank (gpumem info --json FILE > rankN.json)", path)
	}
	var s infoSummary
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&s); err != nil {
		return RankRow{}, fmt.Errorf("%s: not a gpumem info --json summary: %v", path, err)
	}
	if s.Generation == "" || len(s.Devices) == 0 {
		return RankRow{}, fmt.Errorf("%s: not a gpumem info --json summary (no generation or devices)", path)
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
		return RankRow{}, noDevice(path, device, have)
	}
	d := s.Devices[best]
	row := RankRow{Rank: RankFromNames(pos, path, s.File), File: path, Device: d.Device,
		PeakAllocatedBytes: d.ActivePeak, PeakReservedBytes: d.SegmentPeak, Fragmentation: d.Fragmentation.Headline,
		HasTrace: d.TraceEntries > 0, RankInput: &RankInput{Source: "info summary", PeakAt: "-"}}
	return row, nil
}

// RankOfMonitor makes the row of a monitor file's series (gpumem record
// --monitor) read from path.
func RankOfMonitor(s *monitor.Series, path string, device int) (RankRow, error) {
	if device >= 0 && s.Device != device {
		return RankRow{}, fmt.Errorf("%s: no device %d (the monitor reported device %d)", path, device, s.Device)
	}
	step := s.MaxStep
	row := RankRow{Rank: s.Rank, File: path, Device: s.Device, PeakAllocatedBytes: s.MaxPeak, PeakReservedBytes: s.MaxReserve,
		RankInput: &RankInput{Source: "monitor", PeakStep: &step, Jumps: s.Jumps, PeakAt: "step " + strconv.Itoa(step), NoFrag: true}}
	return row, nil
}
