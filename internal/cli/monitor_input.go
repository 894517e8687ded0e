package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/monitor"
	"github.com/gpumem/gpumem/internal/units"
)

// Inputs that are not snapshots but that steps and ranks read: the
// per-interval monitor's JSON lines (gpumem record --monitor) and the
// summaries "gpumem info --json" writes.
const (
	kindSnapshot = iota
	kindMonitor
	kindSummary
)

// inputKind tells from the first bytes of path what it holds; anything
// that is neither a monitor file nor an info summary (including standard
// input and unreadable paths) is left to the snapshot loader, which says
// what is wrong with it.
func inputKind(path string) int {
	if path == "-" || path == demoArg {
		return kindSnapshot
	}
	f, err := os.Open(path)
	if err != nil {
		return kindSnapshot
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, buf)
	if monitor.Sniff(buf[:n]) {
		return kindMonitor
	}
	return summaryOrSnapshot(buf[:n])
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
		return kindSnapshot
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return kindSnapshot
		}
		switch k {
		case "generation", "pytorch_version_hint", "decoded_bytes", "file_bytes":
			return kindSummary
		case "segments", "device_traces":
			return kindSnapshot
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return kindSnapshot
		}
	}
	return kindSnapshot
}

// readMonitor reads one monitor file.
func readMonitor(path string) (*monitor.Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, prefixError(path, err)
	}
	defer f.Close()
	return monitor.Read(f, path)
}

// runMonitorSteps is "gpumem steps FILE.jsonl": one row per report, the
// interval peaks and the reports whose peak jumps.
func runMonitorSteps(env *Env, path string, asJSON bool) error {
	s, err := readMonitor(path)
	if err != nil {
		return err
	}
	return writeStdout(env, func(w io.Writer) error {
		if asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			if s.Jumps == nil {
				s.Jumps = []monitor.Jump{} // [] not null
			}
			return enc.Encode(s)
		}
		return writeMonitorSteps(w, s)
	})
}

func writeMonitorSteps(w io.Writer, s *monitor.Series) error {
	first, last := s.Reports[0], s.Reports[len(s.Reports)-1]
	fmt.Fprintf(w, "%s: rank %d, device %d, %d report%s (steps %d..%d), device total %s\n\n", baseName(s.File), s.Rank, s.Device,
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
