package gpumon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gpumem/gpumem/internal/units"
)

// WriteReplay prints the reports of a log read from path as watch printed
// them (as one JSON document with asJSON); device >= 0 keeps one GPU's.
func WriteReplay(w io.Writer, lg *Log, path string, device int, asJSON bool) error {
	if len(lg.Starts) == 0 && len(lg.Samples) == 0 {
		return fmt.Errorf("%s: no gpumem watch records", path)
	}
	reports := lg.Reports
	if device >= 0 {
		// A GPU the log never saw is an error, as a missing --device is
		// for a snapshot, not an empty replay.
		seen := map[int]bool{}
		for _, st := range lg.Starts {
			for _, d := range st.Devices {
				seen[d.GPU] = true
			}
		}
		for _, r := range lg.Samples {
			seen[r.Device().Index] = true
		}
		if !seen[device] {
			gpus := make([]int, 0, len(seen))
			for g := range seen {
				gpus = append(gpus, g)
			}
			slices.Sort(gpus)
			return fmt.Errorf("%s: no GPU %d in the log (GPUs: %s)", path, device, units.List(gpus))
		}
		reports = reports[:0:0]
		for _, r := range lg.Reports {
			if r.GPU == device {
				reports = append(reports, r)
			}
		}
	}
	if asJSON {
		out := struct {
			Starts  []StartRecord  `json:"starts"`
			Reports []ReportRecord `json:"reports"`
			Alerts  []AlertRecord  `json:"alerts"`
			Samples int            `json:"samples"`
		}{lg.Starts, reports, lg.Alerts, len(lg.Samples)}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	for _, s := range lg.Starts {
		fmt.Fprintf(w, "run started %s  backend %s  every %dms  report every %s\n",
			s.Time.Format("2006-01-02 15:04:05"), s.Backend, s.IntervalMS, time.Duration(s.ReportMS)*time.Millisecond)
		for _, d := range s.Devices {
			fmt.Fprintf(w, "  GPU %d%s  %s  %s  %s\n", d.GPU, migSuffix(d.MIG), d.Name, d.UUID, units.PythonU(d.Total))
		}
	}
	// Records with the same end time are one report (one per device), and
	// records with the same time one sample.
	times, devs := map[int64]bool{}, map[string]bool{}
	for _, r := range lg.Samples {
		times[r.Time.UnixNano()] = true
		devs[DeviceKey(r.Device())] = true
	}
	var groups [][]Interval
	for i, r := range reports {
		if i == 0 || !r.Time.Equal(reports[i-1].Time) || !r.Start.Equal(reports[i-1].Start) {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], r.Interval())
	}
	fmt.Fprintf(w, "%d samples of %d devices, %d reports, %d alerts\n", len(times), len(devs), len(groups), len(lg.Alerts))
	for _, ivs := range groups {
		WriteReportLines(w, ivs)
	}
	for _, a := range lg.Alerts {
		fmt.Fprintf(w, "%s  alert: GPU %d%s at %.1f%% (%s of %s), threshold %g%%\n",
			a.Time.Format("15:04:05"), a.GPU, migSuffix(a.MIG), a.Percent, units.PythonU(a.Used), units.PythonU(a.Total), a.Threshold)
	}
	if lg.TruncatedTail {
		fmt.Fprintf(w, "note: the last line of %s is cut off (the watcher stopped mid-write); it was skipped\n", path)
	}
	return nil
}

// IsLogFile says whether path is a gpumem watch log: named *.jsonl, or a
// regular file starting with a watch record.
func IsLogFile(path string) bool {
	if strings.HasSuffix(strings.ToLower(path), ".jsonl") {
		return true
	}
	// Only a regular file is probed: the probe would consume the first
	// bytes of a pipe or FIFO, which the snapshot decoder then misses.
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 20)
	k, _ := io.ReadFull(f, head)
	head = head[:k]
	return bytes.HasPrefix(head, []byte(`{"type":"start"`)) || bytes.HasPrefix(head, []byte(`{"type":"sample"`))
}
