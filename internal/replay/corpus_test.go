package replay

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// sharedDir is ../shared next to the repository root.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshots", "expected", "timeline.jsonl")); err != nil {
		t.Skipf("real snapshots not available (%v); they live in ../shared next to the repository", err)
	}
	return dir
}

type expectedView struct {
	PeakBytes uint64 `json:"peak_bytes"`
	Elements  int    `json:"elements"`
	Timesteps int    `json:"timesteps"`
}

type expectedFile struct {
	File    string `json:"file"`
	Devices map[string]struct {
		Active   expectedView `json:"active"`
		Segments expectedView `json:"segments"`
	} `json:"devices"`
}

func loadExpected(t testing.TB, dir string) []expectedFile {
	f, err := os.Open(filepath.Join(dir, "snapshots", "expected", "timeline.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []expectedFile
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e expectedFile
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// TestCorpusPeaks checks peak bytes, element and timestep counts of both
// timelines against memory_viz's own output for every real snapshot, and
// that a full Timeline agrees with ComputeStats.
func TestCorpusPeaks(t *testing.T) {
	dir := sharedDir(t)
	files := loadExpected(t, dir)
	if len(files) == 0 {
		t.Fatal("timeline.jsonl is empty")
	}
	for _, ef := range files {
		t.Run(ef.File, func(t *testing.T) {
			s, err := snapshot.Open(filepath.Join(dir, "snapshots", "real", ef.File), nil)
			if err != nil {
				t.Fatal(err)
			}
			for ds, want := range ef.Devices {
				d, _ := strconv.Atoi(ds)
				active, segments := Peaks(s, d)
				if active != want.Active.PeakBytes || segments != want.Segments.PeakBytes {
					t.Errorf("device %d: peaks %d/%d, memory_viz %d/%d", d, active, segments, want.Active.PeakBytes, want.Segments.PeakBytes)
				}
				for _, c := range []struct {
					kind Kind
					want expectedView
				}{{KindActive, want.Active}, {KindSegments, want.Segments}} {
					st := ComputeStats(s, d, c.kind, DefaultMaxEntries)
					if st.Elements != c.want.Elements || st.Timesteps != c.want.Timesteps {
						t.Errorf("device %d %v: elements %d timesteps %d, memory_viz %d %d", d, c.kind, st.Elements, st.Timesteps, c.want.Elements, c.want.Timesteps)
					}
					tl := NewTimeline(s, d, c.kind)
					if tl.PeakBytes() != st.PeakBytes || tl.Len() != st.Elements {
						t.Errorf("device %d %v: Timeline peak %d len %d, stats %d %d", d, c.kind, tl.PeakBytes(), tl.Len(), st.PeakBytes, st.Elements)
					}
					if st.Elements <= DefaultMaxEntries && tl.Timesteps() != st.Timesteps {
						t.Errorf("device %d %v: Timeline timesteps %d, stats %d", d, c.kind, tl.Timesteps(), st.Timesteps)
					}
				}
			}
		})
	}
}
