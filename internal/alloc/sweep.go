package alloc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
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

// SweepOptions configure Sweep.
type SweepOptions struct {
	// Capacity bounds the device for every row; 0 uses the recorded peak
	// reserved for the GC rows (so that their threshold means something)
	// and unlimited for the others.
	Capacity uint64
	// FromEmpty replays every row from an empty allocator
	// (ReplayOptions.FromEmpty).
	FromEmpty bool
	// Curve keeps each row's reserved bytes over the trace in at most
	// that many buckets (ReplayOptions.Curve).
	Curve int
}

// Sweep replays device dev of s under each of SweepConfigs (what-if) and
// returns the rows best first by peak reserved (rows that run out of
// memory last). The rows replay in parallel.
func Sweep(s *snapshot.Snapshot, dev int, o SweepOptions) ([]SweepRow, error) {
	cfgs := make([]Config, len(SweepConfigs))
	for k, name := range SweepConfigs {
		conf := name
		if conf == "default" {
			conf = ""
		}
		cfg, err := ParseConfig(conf)
		if err != nil {
			return nil, fmt.Errorf("sweep config %q: %v", name, err)
		}
		cfgs[k] = cfg
	}
	// The default runs first: the GC rows need its peak when no capacity
	// is given.
	start, err := rebuildStart(s, dev)
	if err != nil {
		return nil, err
	}
	base, err := Simulate(s, dev, ReplayOptions{Config: &cfgs[0], Capacity: o.Capacity, FromEmpty: o.FromEmpty, Curve: o.Curve, start: start})
	if err != nil {
		return nil, err
	}
	gcCap := o.Capacity
	if gcCap == 0 {
		gcCap = max(base.RecordedPeakReserved, base.PeakReserved)
	}
	rows := make([]SweepRow, len(cfgs))
	rows[0] = SweepRow{Name: SweepConfigs[0], Result: base}
	opts := make([]ReplayOptions, len(cfgs)-1)
	for k := 1; k < len(cfgs); k++ {
		capacity := o.Capacity
		rows[k].Name = SweepConfigs[k]
		if cfgs[k].MemoryFraction > 0 {
			capacity = gcCap
			// Show the fraction as the size it allows.
			rows[k].Name = fmt.Sprintf("%s (fraction of %s)", strings.TrimSuffix(SweepConfigs[k], ",per_process_memory_fraction:1.0"), units.C10(capacity))
		}
		opts[k-1] = ReplayOptions{Config: &cfgs[k], Capacity: capacity, FromEmpty: o.FromEmpty, Curve: o.Curve, start: start}
	}
	res, err := replayEach(s, dev, opts)
	if err != nil {
		return nil, err
	}
	for k, r := range res {
		rows[k+1].Result = r
	}
	for k := range rows {
		rows[k].DeltaReserved = int64(rows[k].Result.PeakReserved) - int64(base.PeakReserved)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		oi, oj := rows[i].Result.OOMs() > 0, rows[j].Result.OOMs() > 0
		if oi != oj {
			return !oi
		}
		return rows[i].Result.PeakReserved < rows[j].Result.PeakReserved
	})
	return rows, nil
}
