package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// TestRanks runs ranks on six real snapshots two at a time: one row per
// file with info's peaks, the spread, the outlier, and never more than two
// files decoded at once.
func TestRanks(t *testing.T) {
	names := []string{
		"cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle",
		"cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle",
		"cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle",
		"cs336-kkaitlyn111__memory_ctx128_fullstep.pickle",
		"cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep.pickle",
		"cs336-notHanmin__memory_snapshot.pickle",
	}
	var paths []string
	for _, n := range names {
		paths = append(paths, corpus.File(t, n))
	}
	ranksMaxInFlight.Store(0)
	code, out, stderr := runCLI(append([]string{"ranks", "--json", "-j", "2"}, paths...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if m := ranksMaxInFlight.Load(); m < 1 || m > 2 {
		t.Errorf("%d files were decoded at once, want at most -j 2", m)
	}
	var r analysis.Ranks
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Ranks) != len(paths) {
		t.Fatalf("%d rows for %d files", len(r.Ranks), len(paths))
	}
	for i, row := range r.Ranks {
		s, err := snapshot.Open(paths[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		active, reserved := replay.Peaks(s, s.DefaultDevice())
		if row.Rank != i || row.PeakAllocatedBytes != active || row.PeakReservedBytes != reserved || row.TopSite == "" {
			t.Errorf("row %d: %+v; want rank %d, peaks %d / %d", i, row, i, active, reserved)
		}
	}
	// notHanmin's run is the 21 GiB one among five 51 GiB runs.
	if r.Outlier == nil || r.Outlier.Rank != 5 || r.Outlier.FromMedian >= 0 {
		t.Errorf("outlier %+v, want rank 5 below the median", r.Outlier)
	}
	code, text, _ := runCLI(append([]string{"ranks"}, paths[:3]...)...)
	if code != 0 || !strings.Contains(text, "peak active: median") || strings.Count(text, ".pickle") != 3 {
		t.Errorf("text table (exit %d):\n%s", code, text)
	}
}
