package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

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
	dir := corpus.Shared(t)
	files := loadExpected(t, dir)
	if len(files) == 0 {
		t.Fatal("timeline.jsonl is empty")
	}
	for _, ef := range files {
		t.Run(ef.File, func(t *testing.T) {
			s := openCached(t, filepath.Join(dir, "snapshots", "real", ef.File))
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

// corpusFiles opens the real snapshots whose devices have traces, largest
// traces first, at most limit of them.
func corpusSnapshots(t *testing.T, limit int) map[string]*snapshot.Snapshot {
	dir := corpus.Shared(t)
	out := map[string]*snapshot.Snapshot{}
	type cand struct {
		name string
		n    int
		s    *snapshot.Snapshot
	}
	var cands []cand
	for _, ef := range loadExpected(t, dir) {
		s := openCached(t, filepath.Join(dir, "snapshots", "real", ef.File))
		n := 0
		for _, tr := range s.Traces {
			n += len(tr.Events)
		}
		if n > 0 {
			cands = append(cands, cand{ef.File, n, s})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].n > cands[j].n })
	for i := 0; i < len(cands) && i < limit; i++ {
		out[cands[i].name] = cands[i].s
	}
	return out
}

// TestCorpusStateHistory checks checkpointed StateAt against memory_viz's
// simulate_memory (undo from the dump) at random events of real traces,
// and that the last state is the dump.
func TestCorpusStateHistory(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	for name, s := range corpusSnapshots(t, 12) {
		for _, d := range s.Devices() {
			h := NewHistory(s, d)
			last := h.StateAt(h.Len() - 1)
			var reserved uint64
			blocks := 0
			for i := range s.Segments {
				if int(s.Segments[i].Device) == d {
					reserved += s.Segments[i].TotalSize
					for _, b := range s.SegmentBlocks(i) {
						if b.State != snapshot.BlockInactive {
							blocks++
						}
					}
				}
			}
			if last.Reserved != reserved || len(last.Blocks) != blocks {
				t.Errorf("%s dev %d: last state reserved %d blocks %d, dump %d %d", name, d, last.Reserved, len(last.Blocks), reserved, blocks)
			}
			checkBlockSegments(t, name, last)
			checkCheckpoints(t, fmt.Sprintf("%s dev %d", name, d), h)
			for k := 0; k < 6; k++ {
				// A jump, steps back, then forward through the states
				// passed (journal.redo).
				at := r.Intn(h.Len()+1) - 1
				for _, idx := range []int{at, at - 5, at - 2, at - 1, at} {
					idx = max(idx, -1)
					got := h.StateAt(idx)
					if want := naiveState(h, idx); !reflect.DeepEqual(got, want) {
						t.Errorf("%s dev %d: StateAt(%d) differs from naive replay", name, d, idx)
					}
					checkBlockSegments(t, name, got)
				}
			}
		}
	}
}

// TestCorpusStateHistoryPools: each segment of the dump's state is the
// dump's, its pool id included (the history keeps pool ids as indices
// into a table), on every real snapshot, some with private pools.
func TestCorpusStateHistoryPools(t *testing.T) {
	pooled := 0 // segments in private pools checked
	for _, s := range corpusSnapshotsAll(t) {
		for _, d := range s.Devices() {
			h := NewHistory(s, d)
			last := h.StateAt(h.Len() - 1)
			dumpSeg := map[uint64]*snapshot.Segment{}
			for i := range s.Segments {
				if int(s.Segments[i].Device) == d {
					dumpSeg[s.Segments[i].Address] = &s.Segments[i]
				}
			}
			if len(last.Segments) != len(dumpSeg) {
				t.Errorf("%s dev %d: %d segments in the last state, %d in the dump", s.Source.Name, d, len(last.Segments), len(dumpSeg))
			}
			for _, sg := range last.Segments {
				if sg.PoolID != [2]int64{} {
					pooled++
				}
				if ds := dumpSeg[sg.Addr]; ds == nil || ds.PoolID != sg.PoolID || ds.TotalSize != sg.Size || ds.Stream != sg.Stream || ds.Version != sg.Version {
					t.Errorf("%s dev %d: the last state's segment at %#x differs from the dump's", s.Source.Name, d, sg.Addr)
					break
				}
			}
		}
	}
	if pooled == 0 {
		t.Error("no segment of a private pool checked")
	}
}

// checkBlockSegments checks each block's Segment with a binary search over
// the segments by address (the last one starting at or below the block,
// when the block starts inside it), and the segments' block ranges.
func checkBlockSegments(t *testing.T, name string, st *State) {
	t.Helper()
	byAddr := make([]int, len(st.Segments))
	for i := range byAddr {
		byAddr[i] = i
	}
	sort.SliceStable(byAddr, func(a, b int) bool { return st.Segments[byAddr[a]].Addr < st.Segments[byAddr[b]].Addr })
	count := make([]int32, len(st.Segments))
	for i, b := range st.Blocks {
		k := sort.Search(len(byAddr), func(k int) bool { return st.Segments[byAddr[k]].Addr > b.Addr }) - 1
		want := int32(-1)
		if k >= 0 && b.Addr < st.Segments[byAddr[k]].Addr+st.Segments[byAddr[k]].Size {
			want = int32(byAddr[k])
		}
		if b.Segment != want {
			t.Fatalf("%s: state %d block %d at %#x in segment %d, want %d", name, st.Event, i, b.Addr, b.Segment, want)
		}
		if want >= 0 {
			if sg := &st.Segments[want]; i < int(sg.FirstBlock) || i >= int(sg.FirstBlock+sg.NumBlocks) {
				t.Fatalf("%s: state %d block %d outside its segment's range", name, st.Event, i)
			}
			count[want]++
		}
	}
	for i := range st.Segments {
		if count[i] != st.Segments[i].NumBlocks {
			t.Fatalf("%s: state %d segment %d has %d blocks, %d point at it", name, st.Event, i, st.Segments[i].NumBlocks, count[i])
		}
	}
}

// TestCorpusQuery checks Query, Offset and HitTest against memory_viz's
// polygons built the naive way on real traces.
func TestCorpusQuery(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for name, s := range corpusSnapshots(t, 4) {
		for _, d := range s.Devices() {
			for _, kind := range []Kind{KindActive, KindSegments} {
				tl := NewTimeline(s, d, kind)
				nv := naiveTimeline(s, d, kind == KindSegments)
				if tl.Timesteps() == 0 {
					continue
				}
				t.Logf("%s dev %d %v: %d elements, %d timesteps", name, d, kind, tl.Len(), tl.Timesteps())
				for q := 0; q < 5; q++ {
					checkRandomQuery(t, tl, nv, r)
				}
				for k := 0; k < 200; k++ {
					i := r.Intn(tl.Len())
					x := float64(tl.start[i]) + r.Float64()*float64(tl.end[i]-tl.start[i])
					if got, want := tl.Offset(i, x), nv.at(i, x); math.Abs(got-want) > 1e-6*math.Max(1, want) {
						t.Fatalf("%s: Offset(%d, %v) = %v, naive %v", name, i, x, got, want)
					}
				}
			}
		}
	}
}

var opened = map[string]*snapshot.Snapshot{}

// openCached opens a real snapshot once per test binary.
func openCached(t testing.TB, path string) *snapshot.Snapshot {
	t.Helper()
	if s, ok := opened[path]; ok {
		return s
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	opened[path] = s
	return s
}

// corpusSnapshotsAll opens every real snapshot.
func corpusSnapshotsAll(t *testing.T) []*snapshot.Snapshot {
	dir := corpus.Shared(t)
	var out []*snapshot.Snapshot
	for _, ef := range loadExpected(t, dir) {
		out = append(out, openCached(t, filepath.Join(dir, "snapshots", "real", ef.File)))
	}
	return out
}

// TestCorpusCurvesAgreeWithHistory checks the totals curves (running sums
// of trace deltas) against the state history (sets of segments and blocks
// undone from the dump), two independent computations, on real traces.
func TestCorpusCurvesAgreeWithHistory(t *testing.T) {
	r := rand.New(rand.NewSource(8))
	checked := 0
	for name, s := range corpusSnapshots(t, 20) {
		for _, d := range s.Devices() {
			c := NewCurves(s, d)
			h := NewHistory(s, d)
			if h.Len() == 0 {
				continue
			}
			for k := 0; k < 20; k++ {
				idx := r.Intn(h.Len()+1) - 1
				raw := c.Len() - 1 // raw events up to the next memory_viz event
				if idx+1 < h.Len() {
					raw = int(h.viz[idx+1]) - 1
				}
				st, tot := h.StateAt(idx), c.At(raw)
				if st.Reserved != tot.Reserved || st.Allocated != tot.Requested {
					t.Errorf("%s dev %d after event %d (raw %d): history reserved %d requested %d, curves %d %d",
						name, d, idx, raw, st.Reserved, st.Allocated, tot.Reserved, tot.Requested)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no trace checked")
	}
}

// TestCorpusPoolsTimeline checks "Allocated Memory (incl. Private Pools)"
// against PyTorch's process_alloc_data(snapshot, device, false, 15000,
// include_private_inactive=true), run in node on every real snapshot by
// testdata/pools_memoryviz.mjs (its output is testdata/pools_memoryviz.jsonl).
// verl__mem.pickle is the case that settles the private pool envelopes:
// PyTorch's peak there is 24,996,909,904 (the Active Memory Timeline's is
// 24,886,778,000).
func TestCorpusPoolsTimeline(t *testing.T) {
	dir := corpus.Shared(t)
	data, err := os.ReadFile(filepath.Join("testdata", "pools_memoryviz.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var files []expectedPools
	for _, line := range splitLines(data) {
		var e expectedPools
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatal(err)
		}
		files = append(files, e)
	}
	if len(files) < 60 {
		t.Fatalf("only %d files in pools_memoryviz.jsonl", len(files))
	}
	private := 0
	for _, e := range files {
		s, err := snapshot.Open(filepath.Join(dir, "snapshots", "real", e.File), nil)
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		for d, want := range e.Devices {
			dev, _ := strconv.Atoi(d)
			if hasPrivatePools(s, dev) {
				private++
			}
			got := ComputeStats(s, dev, KindActiveWithPools, DefaultMaxEntries)
			if got.PeakBytes != want.PeakBytes || got.Elements != want.Elements || got.Timesteps != want.Timesteps {
				t.Errorf("%s device %d: got %+v, PyTorch %+v", e.File, dev, got, want)
			}
		}
	}
	if private == 0 {
		t.Error("no device with private pools checked")
	}
}

type expectedPools struct {
	File    string                  `json:"file"`
	Devices map[string]expectedView `json:"devices"`
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		b = b[min(i+1, len(b)):]
	}
	return out
}
