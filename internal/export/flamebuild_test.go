package export

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// checkFlame writes f as SVG and folded stacks and checks that the folded
// lines sum to the SVG root's bytes and, with parse, that the SVG parses as
// XML (slow on big SVGs, so the corpus test samples it).
func checkFlame(t *testing.T, name string, f *Flame, parse bool) int64 {
	t.Helper()
	var svg, folded bytes.Buffer
	if err := WriteFlameSVG(&svg, f, FlameOptions{Title: name}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFolded(&folded, f); err != nil {
		t.Fatal(err)
	}
	var values []int64
	if parse {
		_, values = svgFrames(t, svg.Bytes())
	} else {
		_, values = svgFrames(t, rootOnly(svg.Bytes()))
	}
	_, sum := foldedSum(t, folded.Bytes())
	if len(values) == 0 || values[0] != sum || sum != f.Root.Value {
		t.Errorf("%s: SVG root %v bytes, folded lines sum to %d, tree %d", name, values[:min(1, len(values))], sum, f.Root.Value)
	}
	return sum
}

// rootOnly cuts an SVG flamegraph after its root frame and closes it.
func rootOnly(svg []byte) []byte {
	i := bytes.Index(svg, []byte("</g>\n"))
	if i < 0 {
		return svg
	}
	return append(svg[:i+5:i+5], "</g></svg>"...)
}

func reserved(s *snapshot.Snapshot) (n int64) {
	for _, seg := range s.Segments {
		n += int64(seg.TotalSize)
	}
	return n
}

// TestFlameCorpus: memory, segments and peak flamegraphs of a third of the real
// snapshot; memory and segments cover the reserved bytes exactly (blocks
// tile their segments) except for PyTorch 2.0's history records.
func TestFlameCorpus(t *testing.T) {
	for i, path := range corpus.Files(t) {
		if i%3 != 0 {
			continue // a third of the corpus: the flamegraphs are slow to check
		}
		s := load(t, path)
		name := filepath.Base(path)
		parse := i%9 == 0
		legacy := s.Source.Generation == snapshot.GenD1
		for kind, f := range map[string]*Flame{"memory": MemoryFlame(s, -1, StackOptions{}), "segments": SegmentsFlame(s, -1, StackOptions{})} {
			if got := checkFlame(t, name+" "+kind, f, parse); got != reserved(s) && !legacy {
				t.Errorf("%s %s: %d bytes, reserved %d", name, kind, got, reserved(s))
			}
		}
		for _, d := range s.Devices() {
			dv := analysis.NewDevice(s, d)
			m, err := dv.Resolve("peak")
			if err != nil {
				t.Fatal(err)
			}
			if got := checkFlame(t, name+" peak", ProfileFlame(dv.LiveProfile(m), StackOptions{}), parse); got != int64(dv.Active.PeakBytes) {
				t.Errorf("%s device %d: peak flamegraph %d bytes, Active Memory Timeline peak %d", name, d, got, dv.Active.PeakBytes)
			}
		}
	}
}

// TestCompareSegmentsGenerations runs _memory_viz.py compare (which
// raises TypeError on every dict snapshot) on two files of each
// generation.
func TestCompareSegmentsGenerations(t *testing.T) {
	pairs := map[string][2]string{
		"L":  {"LayoutEditing__memory_snapshot.pickle", "LayoutEditing__dump_snapshot__3f83a65b.pickle"},
		"D1": {"flexgen-Yiyi__1.3b_snapshot__4bf3cd41.pickle", "flexgen-Yiyi__1.3b_snapshot__66f06b43.pickle"},
		"D2": {"select_n__snapshot__5a601013.pickle", "select_n__snapshot__ec5be110.pickle"},
		"D3": {"LayoutEditing__dump_snapshot__7bced596.pickle", "diffusion-jogregoire__my_snapshot.pickle"},
		"D4": {"octree-nca__my_snapshot__1e496ac8.pickle", "octree-nca__my_snapshot__796241fb.pickle"},
		"D5": {"cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle", "cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle"},
		"D6": {"BlockZero__cuda_snapshot.pickle", "octree-nca__my_snapshot__cdcdc05a.pickle"},
		"D7": {"cs336-MAGMA27__memory_snapshot.pickle", "cs336-bcrafton__memory_snapshot.pickle"},
	}
	for gen, p := range pairs {
		a, b := load(t, realFile(p[0])), load(t, realFile(p[1]))
		if string(a.Source.Generation) != gen && gen != "D6" && gen != "L" {
			t.Errorf("%s is %s, not %s", p[0], a.Source.Generation, gen)
		}
		self := CompareSegments(a, -1, a, -1)
		if len(self.OnlyBefore)+len(self.OnlyAfter) != 0 || self.Flame.Root.Value != 0 {
			t.Errorf("%s: a file against itself has %d/%d segments only on one side", gen, len(self.OnlyBefore), len(self.OnlyAfter))
		}
		c := CompareSegments(a, -1, b, -1)
		if len(c.OnlyBefore) == 0 || len(c.OnlyAfter) == 0 {
			t.Errorf("%s: %d only before, %d only after", gen, len(c.OnlyBefore), len(c.OnlyAfter))
		}
		// The flamegraph's only_before/only_after cover those segments.
		sizes := func(s *snapshot.Snapshot, addrs []uint64) (n int64) {
			for _, seg := range s.Segments {
				if _, ok := slices.BinarySearch(addrs, seg.Address); ok {
					n += int64(seg.TotalSize)
				}
			}
			return n
		}
		for _, side := range []struct {
			label string
			s     *snapshot.Snapshot
			addrs []uint64
		}{{"only_before", a, c.OnlyBefore}, {"only_after", b, c.OnlyAfter}} {
			var got int64
			for _, n := range c.Flame.Root.Children() {
				if n.Name == side.label {
					got = n.Value
				}
			}
			if want := sizes(side.s, side.addrs); got != want && side.s.Source.Generation != snapshot.GenD1 {
				t.Errorf("%s %s: flamegraph %d bytes, segments %d", gen, side.label, got, want)
			}
		}
		checkFlame(t, gen+" compare", c.Flame, true)
	}
}
