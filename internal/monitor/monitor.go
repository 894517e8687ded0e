// Package monitor reads the per-interval memory monitor's JSON lines
// (gpumem record --monitor, gpumem.Monitor(jsonl=...)) and finds the
// intervals whose peak jumps.
package monitor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Report is one line: the monitor's report after an optimizer step, with
// the seed's quantities (DeviceMemoryMonitor.report) in bytes.
type Report struct {
	Rank   int     `json:"rank"`
	Device int     `json:"device"`
	Step   int     `json:"step"`
	Time   float64 `json:"time"` // Unix seconds
	// Allocated is torch.cuda.memory_allocated() at the report; Peak is
	// max_memory_allocated(): the most allocated since the previous report
	// (the monitor resets the peak statistics after each report).
	Allocated   uint64  `json:"allocated_bytes"`
	Peak        uint64  `json:"peak_allocated_bytes"`
	Reserved    uint64  `json:"reserved_bytes"`
	Total       uint64  `json:"total_bytes"`
	Utilization float64 `json:"utilization"` // Peak / Total
}

// Jump is a report whose interval peak stands above the file's median
// interval peak by more than JumpFraction.
type Jump struct {
	Step      int     `json:"step"`
	PeakBytes uint64  `json:"peak_allocated_bytes"`
	OverBytes uint64  `json:"over_median_bytes"`
	Percent   float64 `json:"percent_over_median"`
}

// JumpFraction: an interval peak more than 10% above the median interval
// peak is a jump (and at least JumpMinBytes above it: a few KiB on a tiny
// model are noise).
const (
	JumpFraction = 0.10
	JumpMinBytes = 1 << 20
)

// Series is one rank's reports, in file order.
type Series struct {
	File    string   `json:"file"`
	Rank    int      `json:"rank"`
	Device  int      `json:"device"`
	Reports []Report `json:"reports"`
	// MedianPeak and MaxPeak are over the interval peaks; MaxStep is the
	// first report with the highest.
	MedianPeak uint64 `json:"median_interval_peak_bytes"`
	MaxPeak    uint64 `json:"max_interval_peak_bytes"`
	MaxStep    int    `json:"max_interval_peak_step"`
	MaxReserve uint64 `json:"max_reserved_bytes"`
	Jumps      []Jump `json:"peak_jumps"`
}

// Sniff reports whether data (the start of a file) is the monitor's JSONL:
// its first object's first key is "gpumem_monitor".
func Sniff(data []byte) bool {
	return firstKey(data) == "gpumem_monitor"
}

// firstKey is the first key of the JSON object data starts with (after
// white space, and after a '[' for an array of objects), or "".
func firstKey(data []byte) string {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) > 0 && data[0] == '[' {
		data = bytes.TrimLeft(data[1:], " \t\r\n")
	}
	if len(data) == 0 || data[0] != '{' {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimLeft(data[1:], " \t\r\n")))
	var k string
	if dec.Decode(&k) != nil {
		return ""
	}
	return k
}

// maxLine bounds one line: a report is about 250 bytes.
const maxLine = 64 << 10

// Read reads one file of reports; name is for errors, which say the line.
// The reports must be one rank's (one file per rank).
func Read(r io.Reader, name string) (*Series, error) {
	s := &Series{File: name}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var raw struct {
			Report
			Mark *int `json:"gpumem_monitor"`
		}
		if err := json.Unmarshal(line, &raw); err != nil {
			return nil, fmt.Errorf("%s:%d: not a monitor report: %v", name, n, err)
		}
		if raw.Mark == nil {
			return nil, fmt.Errorf("%s:%d: not a monitor report (no \"gpumem_monitor\" key)", name, n)
		}
		if len(s.Reports) > 0 && raw.Rank != s.Rank {
			return nil, fmt.Errorf("%s:%d: rank %d after rank %d: one file per rank (gpumem ranks compares them)", name, n, raw.Rank, s.Rank)
		}
		s.Rank, s.Device = raw.Rank, raw.Device
		s.Reports = append(s.Reports, raw.Report)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s:%d: line longer than %d bytes: not a monitor report", name, n+1, maxLine)
		}
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(s.Reports) == 0 {
		return nil, fmt.Errorf("%s: no monitor reports", name)
	}
	s.analyze()
	return s, nil
}

func (s *Series) analyze() {
	s.Jumps = []Jump{} // none is [] in JSON, not null
	peaks := make([]uint64, len(s.Reports))
	for i, r := range s.Reports {
		peaks[i] = r.Peak
		if r.Peak > s.MaxPeak || i == 0 {
			s.MaxPeak, s.MaxStep = r.Peak, r.Step
		}
		s.MaxReserve = max(s.MaxReserve, r.Reserved)
	}
	slices.Sort(peaks)
	n := len(peaks)
	s.MedianPeak = peaks[n/2]
	if n%2 == 0 {
		s.MedianPeak = peaks[n/2-1]/2 + peaks[n/2]/2 + (peaks[n/2-1]%2+peaks[n/2]%2)/2
	}
	if n < 3 {
		return // a median of one or two intervals says nothing
	}
	for _, r := range s.Reports {
		if r.Peak > s.MedianPeak && float64(r.Peak-s.MedianPeak) > JumpFraction*float64(s.MedianPeak) && r.Peak-s.MedianPeak >= JumpMinBytes {
			over := r.Peak - s.MedianPeak
			pct := 0.0
			if s.MedianPeak > 0 {
				pct = 100 * float64(over) / float64(s.MedianPeak)
			}
			s.Jumps = append(s.Jumps, Jump{Step: r.Step, PeakBytes: r.Peak, OverBytes: over, Percent: pct})
		}
	}
}
