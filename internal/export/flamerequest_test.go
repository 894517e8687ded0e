package export

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

// TestFlameRequest: each kind's check, how many snapshots it opens and
// in what order, and the flamegraph it makes: the one its builder makes
// from the same snapshot (peak: what is live at the moment).
func TestFlameRequest(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	prof, err := snapshot.Open(corpus.Need(t, corpus.Path("snapshots", "profiler_exports", "optimizer-memory-profiles__modal_gpu_sgd__profile.raw.json.gz")), nil)
	if err != nil {
		t.Fatal(err)
	}
	ok := FlameRequest{At: "peak", Width: 1200, Device: -1}
	for _, tc := range []struct {
		name   string
		edit   func(q *FlameRequest)
		snaps  []*snapshot.Snapshot
		check  string // Check's error
		make   string // Make's error
		opened int
	}{
		{"memory", func(q *FlameRequest) { q.Kind = "memory" }, []*snapshot.Snapshot{s}, "", "", 1},
		{"segments", func(q *FlameRequest) { q.Kind = "segments" }, []*snapshot.Snapshot{s}, "", "", 1},
		{"peak", func(q *FlameRequest) { q.Kind = "peak" }, []*snapshot.Snapshot{s}, "", "", 1},
		{"diff", func(q *FlameRequest) { q.Kind = "diff" }, []*snapshot.Snapshot{s, s}, "", "", 2},
		{"narrow", func(q *FlameRequest) { q.Kind, q.Width = "peak", 100 }, nil, "--width must be at least 200", "", 0},
		{"bad moment", func(q *FlameRequest) { q.Kind, q.At = "peak", "soon" }, nil, "soon", "", 0},
		{"unknown kind", func(q *FlameRequest) { q.Kind = "icicle" }, nil, `unknown kind "icicle"`, "", 0},
		{"no such device", func(q *FlameRequest) { q.Kind, q.Device = "memory", 9 }, []*snapshot.Snapshot{s}, "", "no device 9", 1},
		{"no segments", func(q *FlameRequest) { q.Kind = "segments" }, []*snapshot.Snapshot{prof}, "", "flame segments: a ", 1},
		{"B fails", func(q *FlameRequest) { q.Kind = "diff" }, []*snapshot.Snapshot{s, nil}, "", "B: truncated", 2},
	} {
		q := ok
		tc.edit(&q)
		err := q.Check()
		if (err == nil) != (tc.check == "") || err != nil && !strings.Contains(err.Error(), tc.check) {
			t.Errorf("%s: Check %v, want %q", tc.name, err, tc.check)
		}
		if err != nil {
			continue
		}
		if q.Snapshots() != len(tc.snaps) {
			t.Errorf("%s: %d snapshots, want %d", tc.name, q.Snapshots(), len(tc.snaps))
		}
		opened := 0
		f, fo, err := q.Make(func(i int) (*snapshot.Snapshot, error) {
			if opened++; i != opened-1 || tc.snaps[i] == nil {
				return nil, errors.New("B: truncated")
			}
			return tc.snaps[i], nil
		})
		if opened != tc.opened {
			t.Errorf("%s: opened %d, want %d", tc.name, opened, tc.opened)
		}
		if (err == nil) != (tc.make == "") || err != nil && !strings.Contains(err.Error(), tc.make) {
			t.Errorf("%s: Make %v, want %q", tc.name, err, tc.make)
		}
		if err != nil {
			continue
		}
		if fo.Width != q.Width || f == nil {
			t.Errorf("%s: width %d, flame %v", tc.name, fo.Width, f)
		}
		if q.Kind == "peak" {
			run, err := analysis.NewDevice(s, s.DefaultDevice()).RunAt("peak")
			if err != nil {
				t.Fatal(err)
			}
			if want := ProfileFlame(run.Profile, q.Stacks); f.Root.Value != want.Root.Value || want.Root.Value == 0 {
				t.Errorf("peak: %d bytes, want %d", f.Root.Value, want.Root.Value)
			}
		}
		if q.Kind == "diff" && (!f.Diff || f.Root.Value != f.Root.ValueA || f.Root.Value == 0) {
			t.Errorf("diff of a run with itself: A %d bytes, B %d", f.Root.ValueA, f.Root.Value)
		}
	}
}
