package alloc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// TestCorpusReplay is the acceptance test: for every device trace with
// alloc events, the free-running replay with the snapshot's own settings
// predicts every alloc address and segment_alloc/segment_map, applies
// every segment_free/unmap, and ends on the snapshot's final layout. It
// prints a per-trace table.
func TestCorpusReplay(t *testing.T) {
	files := corpus.Files(t)
	var table strings.Builder
	fmt.Fprintf(&table, "%-72s %3s %6s %13s %11s %5s\n", "snapshot", "dev", "events", "alloc addrs", "seg events", "final")
	var totA, totAM, totS, totSM, traces, finals int
	for _, f := range files {
		s, err := snapshot.Open(f, nil)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		for _, d := range Replayable(s) {
			r, err := Simulate(s, d, ReplayOptions{Curve: 97})
			if err != nil {
				t.Errorf("%s device %d: %v", filepath.Base(f), d, err)
				continue
			}
			traces++
			totA += r.AllocAddrsTotal
			totAM += r.AllocAddrsMatched
			totS += r.SegEventsTotal
			totSM += r.SegEventsMatched
			if r.FinalStateMatches {
				finals++
			}
			fmt.Fprintf(&table, "%-72s %3d %6d %6d/%-6d %5d/%-5d %5v\n", filepath.Base(f), d, r.Events,
				r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal, r.FinalStateMatches)
			if msg := curveMismatch(s, d, r); msg != "" {
				t.Errorf("%s device %d: reserved curve: %s", filepath.Base(f), d, msg)
			}
			if msg := statsMismatch(s, d, &r.Stats); msg != "" {
				t.Errorf("%s device %d: model memory_stats differ from the snapshot: %s", filepath.Base(f), d, msg)
			}
			if !exact(r) {
				t.Errorf("%s device %d: allocs %d/%d, segment events %d/%d, releases %d/%d, final state %v; first mismatches: %s",
					filepath.Base(f), d, r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal,
					r.ReleasesMatched, r.ReleasesTotal, r.FinalStateMatches, strings.Join(r.Mismatches[:min(5, len(r.Mismatches))], "; "))
			}
		}
	}
	fmt.Fprintf(&table, "TOTAL %d traces: alloc addresses %d/%d, segment events %d/%d, final state %d/%d\n",
		traces, totAM, totA, totSM, totS, finals, traces)
	t.Log("\n" + table.String())
	if os.Getenv("GPUMEM_PRINT_TABLE") != "" {
		fmt.Print(table.String())
	}
}

// curveMismatch checks a validation's reserved curve: its recorded
// curve is the timeline's (replay.Curves, computed apart from the model,
// on the same buckets), and an exact replay's model curve is the
// recorded one.
func curveMismatch(s *snapshot.Snapshot, d int, r *ReplayResult) string {
	c := r.Curve
	ds := replay.NewCurves(s, d).Downsample(0, r.Events, 97)
	switch {
	case !slices.Equal(c.Bounds, ds.Bounds):
		return fmt.Sprintf("buckets %v, the timeline's %v", c.Bounds, ds.Bounds)
	case !slices.Equal(c.Recorded, ds.ReservedMax):
		return fmt.Sprintf("recorded %v, the timeline's %v", c.Recorded, ds.ReservedMax)
	case exact(r) && !slices.Equal(c.Reserved, c.Recorded):
		return fmt.Sprintf("an exact replay's %v, recorded %v", c.Reserved, c.Recorded)
	case len(c.Reserved) > 0 && max(slices.Max(c.Reserved), r.InitialReserved) != r.PeakReserved:
		return fmt.Sprintf("highest %d (start %d), peak reserved %d", slices.Max(c.Reserved), r.InitialReserved, r.PeakReserved)
	}
	return ""
}

// statsMismatch checks the model's current memory_stats against the values
// PyTorch's _check_memory_stat_consistency derives from a snapshot's
// segments (per pool): counts and byte sums of segments and blocks.
func statsMismatch(s *snapshot.Snapshot, dev int, st *MemoryStats) string {
	var want MemoryStats
	for i := range s.Segments {
		sg := &s.Segments[i]
		if int(sg.Device) != dev || (sg.HasPoolID && sg.PoolID != [2]int64{0, 0}) {
			continue
		}
		small := !sg.Large
		want.ReservedBytes.inc(small, sg.TotalSize)
		if !sg.IsExpandable {
			want.Segment.inc(small, 1)
		}
		blocks := s.SegmentBlocks(i)
		for _, b := range blocks {
			switch b.State {
			case snapshot.BlockActiveAllocated:
				want.Allocation.inc(small, 1)
				want.AllocatedBytes.inc(small, b.Size)
			case snapshot.BlockInactive:
				if len(blocks) > 1 && !sg.IsExpandable {
					want.InactiveSplit.inc(small, 1)
					want.InactiveSplitBytes.inc(small, b.Size)
				}
			}
			if b.State != snapshot.BlockInactive {
				want.Active.inc(small, 1)
				want.ActiveBytes.inc(small, b.Size)
				want.RequestedBytes.inc(small, b.RequestedSize)
			}
		}
	}
	var diffs []string
	for _, c := range []struct {
		name      string
		got, want *StatArray
	}{
		{"segment", &st.Segment, &want.Segment}, {"reserved_bytes", &st.ReservedBytes, &want.ReservedBytes},
		{"allocation", &st.Allocation, &want.Allocation}, {"allocated_bytes", &st.AllocatedBytes, &want.AllocatedBytes},
		{"active", &st.Active, &want.Active}, {"active_bytes", &st.ActiveBytes, &want.ActiveBytes},
		{"requested_bytes", &st.RequestedBytes, &want.RequestedBytes},
		{"inactive_split", &st.InactiveSplit, &want.InactiveSplit},
		{"inactive_split_bytes", &st.InactiveSplitBytes, &want.InactiveSplitBytes},
	} {
		for p := range poolNames {
			if c.got[p].Current != c.want[p].Current {
				diffs = append(diffs, fmt.Sprintf("%s.%s.current %d != %d", c.name, poolNames[p], c.got[p].Current, c.want[p].Current))
			}
		}
	}
	return strings.Join(diffs, ", ")
}
