package alloc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpumem/gpumem/snapshot"
)

// SweepRow is one configuration's replay in a sweep.
type SweepRow struct {
	Name   string // config string as shown
	Result *ReplayResult
	// DeltaReserved is PeakReserved minus the default's (negative = better).
	DeltaReserved int64
}

// SweepConfigs are the settings a sweep compares. GC thresholds act only
// with a memory fraction; the sweep runs them with
// per_process_memory_fraction 1.0 of the capacity it is given.
var SweepConfigs = []string{
	"default",
	"expandable_segments:True",
	"max_split_size_mb:64",
	"max_split_size_mb:128",
	"max_split_size_mb:256",
	"max_split_size_mb:512",
	"roundup_power2_divisions:4",
	"roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
	"garbage_collection_threshold:0.6,per_process_memory_fraction:1.0",
	"garbage_collection_threshold:0.8,per_process_memory_fraction:1.0",
	"expandable_segments:True,max_split_size_mb:128",
}

// Sweep replays device dev of s under each of SweepConfigs (what-if) and
// returns the rows best first by peak reserved. capacity bounds the device
// for every row; 0 uses the recorded peak reserved for the GC rows (so
// that their threshold means something) and unlimited for the others.
func Sweep(s *snapshot.Snapshot, dev int, capacity uint64) ([]SweepRow, error) {
	var rows []SweepRow
	var base *ReplayResult
	gcCap := capacity
	for _, name := range SweepConfigs {
		conf := name
		if conf == "default" {
			conf = ""
		}
		cfg, err := ParseConfig(conf)
		if err != nil {
			return nil, fmt.Errorf("sweep config %q: %v", name, err)
		}
		cap := capacity
		if cfg.MemoryFraction > 0 {
			if gcCap == 0 && base != nil {
				gcCap = max(base.RecordedPeakReserved, base.PeakReserved)
			}
			cap = gcCap
		}
		r, err := Replay(s, dev, ReplayOptions{Config: &cfg, Capacity: cap})
		if err != nil {
			return nil, err
		}
		if base == nil {
			base = r
		}
		label := name
		if cfg.MemoryFraction > 0 {
			// Show the fraction as the size it allows.
			label = fmt.Sprintf("%s (fraction of %s)", strings.TrimSuffix(name, ",per_process_memory_fraction:1.0"), FormatSize(cap))
		}
		rows = append(rows, SweepRow{Name: label, Result: r, DeltaReserved: int64(r.PeakReserved) - int64(base.PeakReserved)})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		oi, oj := len(rows[i].Result.ModelOOMs) > 0, len(rows[j].Result.ModelOOMs) > 0
		if oi != oj {
			return !oi
		}
		return rows[i].Result.PeakReserved < rows[j].Result.PeakReserved
	})
	return rows, nil
}
