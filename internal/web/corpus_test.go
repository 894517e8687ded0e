package web

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

type expectedView struct {
	Peak      float64 `json:"peak_bytes"`
	Elements  int     `json:"elements"`
	Timesteps int     `json:"timesteps"`
}

// TestServedPeaksMatchMemoryViz asks the HTTP API, as the page does
// (/api/meta, then the full /api/window), for the Active Memory and Active
// Cached Segment timelines of every device of every real snapshot, and
// compares the peaks it serves with PyTorch's process_alloc_data
// (timeline.jsonl) and with replay.Peaks (what gpumem info reports).
func TestServedPeaksMatchMemoryViz(t *testing.T) {
	dir := corpus.Shared(t)
	f, err := os.Open(filepath.Join(dir, "snapshots", "expected", "timeline.jsonl"))
	if err != nil {
		corpus.Missing(t, "no expected timelines: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	srv := New(Options{Addr: "127.0.0.1:1"})
	h := srv.Handler()
	n := 0
	for sc.Scan() {
		var line struct {
			File    string                             `json:"file"`
			Devices map[string]map[string]expectedView `json:"devices"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		if testing.Short() && n >= 8 {
			break
		}
		n++
		path := filepath.Join(dir, "snapshots", "real", line.File)
		t.Run(line.File, func(t *testing.T) {
			s, err := snapshot.Open(path, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			id := srv.Add(line.File, s)
			for dev, views := range line.Devices {
				d, _ := strconv.Atoi(dev)
				active, segments := replay.Peaks(s, d)
				for name, want := range views {
					view, peak := ViewActive, active
					if name == "segments" {
						view, peak = ViewSegments, segments
					}
					q := "file=" + strconv.Itoa(id) + "&device=" + dev + "&view=" + view
					var m metaJSON
					decodeJSON(t, get(t, h, "127.0.0.1:1", "/api/meta?"+q), &m)
					win := readWindow(t, get(t, h, "127.0.0.1:1", "/api/window?"+q+"&w=800&h=400").Body.Bytes())
					if m.Peak != want.Peak || win.peak != want.Peak || uint64(m.Peak) != peak {
						t.Errorf("device %d %s: served meta peak %.0f, window peak %.0f; memory_viz %.0f, replay.Peaks %d",
							d, name, m.Peak, win.peak, want.Peak, peak)
					}
				}
			}
		})
	}
	if n == 0 {
		corpus.Missing(t, "timeline.jsonl is empty")
	}
}

// TestAxes checks the page's x axes on every real snapshot: every
// element's alloc event maps to its start timestep and its free event to
// one before its end, and the time axis never goes backwards.
func TestAxes(t *testing.T) {
	dir := corpus.Shared(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "snapshots", "real", "*.pickle"))
	if testing.Short() && len(paths) > 8 {
		paths = paths[:8]
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := snapshot.Open(path, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, d := range s.Devices() {
				for _, view := range []string{ViewActive, ViewSegments} {
					tl := newTimeline(s, d, view, nil, nil)
					if _, total, ok := vizSteps(s, d, view == ViewSegments, tl.tl); !ok || (int(total) != tl.tl.Timesteps() && !(total == 0 && tl.tl.Timesteps() == 1)) {
						t.Fatalf("device %d %s: vizSteps counts %d timesteps (ok %v), replay %d", d, view, total, ok, tl.tl.Timesteps())
					}
					tl.axes()
					// Every event's timestep, against a second pairing and
					// stack of the trace's own.
					want, wantTotal := pairedSteps(s, d, view == ViewSegments)
					if tl.vizStep.len() != len(want) || (int(wantTotal) != tl.tl.Timesteps() && wantTotal != 0) {
						t.Fatalf("device %d %s: axis of %d events, want %d (timesteps %d, want %d)", d, view, tl.vizStep.len(), len(want), tl.tl.Timesteps(), wantTotal)
					}
					for i, w := range want {
						if got := tl.vizStep.at(i); got != w {
							t.Fatalf("device %d %s: event %d at step %d, want %d", d, view, i, got, w)
						}
					}
					vizOf := map[int]int{}
					if d < len(s.Traces) {
						for i, r := range s.Traces[d].Viz {
							vizOf[int(r)] = i
						}
					}
					for i := 0; i < tl.tl.Len(); i += max(1, tl.tl.Len()/500) {
						e := tl.tl.Element(i)
						if v, ok := vizOf[e.AllocEvent]; ok && int(tl.vizStep.at(v)) != e.Start {
							t.Fatalf("device %d %s element %d: alloc at step %d, starts at %d", d, view, i, tl.vizStep.at(v), e.Start)
						}
						if v, ok := vizOf[e.FreeEvent]; ok && int(tl.vizStep.at(v)) != e.End-1 {
							t.Fatalf("device %d %s element %d: free at step %d, ends at %d", d, view, i, tl.vizStep.at(v), e.End)
						}
					}
					tl.timeAxis() // made on first use of the time axis
					for i := 1; i < len(tl.stepTime); i++ {
						if tl.stepTime[i] < tl.stepTime[i-1] {
							t.Fatalf("device %d %s: time axis goes back at step %d", d, view, i)
						}
					}
					if tl.hasTime() {
						lo, hi := tl.xRange("time")
						for _, x := range []float64{lo, (lo + hi) / 2, hi} {
							if back := tl.fromStep(tl.toStep(x, "time"), "time"); math.Abs(back-x) > 1+1e-6*(hi-lo) {
								t.Fatalf("device %d %s: time %v -> step -> %v", d, view, x, back)
							}
						}
					}
				}
			}
		})
	}
}

// TestStateAgreesWithUndo checks the state history's totals against a
// naive undo on every real snapshot.
func TestStateAgreesWithUndo(t *testing.T) {
	dir := corpus.Shared(t)
	paths, _ := filepath.Glob(filepath.Join(dir, "snapshots", "real", "*.pickle"))
	if len(paths) == 0 {
		corpus.Missing(t, "no real snapshots in %s", dir)
	}
	if testing.Short() {
		paths = paths[:8]
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := snapshot.Open(path, nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, d := range s.Devices() {
				dd := newDeviceData(s, d)
				n := len(dd.viz)
				for _, idx := range []int{-1, 0, n / 3, n / 2, n - 2, n - 1} {
					if idx >= n || idx < -1 {
						continue
					}
					hist, err := dd.stateHist()
					if err != nil {
						t.Fatal(err)
					}
					got := hist.stateJSON(idx)
					alloc, res := naiveTotals(s, d, idx)
					if got.Allocated != alloc || got.Reserved != res {
						t.Errorf("device %d state after %d: allocated %.0f reserved %.0f; naive undo %.0f %.0f", d, idx,
							got.Allocated, got.Reserved, alloc, res)
					}
				}
			}
		})
	}
}

// naiveTotals undoes the trace from the snapshot back to just after event
// idx, as memory_viz's simulate_memory does, keeping only the two totals.
func naiveTotals(s *snapshot.Snapshot, dev, idx int) (allocated, reserved float64) {
	blocks := map[uint64]uint64{}
	for i := range s.Segments {
		if int(s.Segments[i].Device) != dev {
			continue
		}
		reserved += float64(s.Segments[i].TotalSize)
		for _, b := range s.SegmentBlocks(i) {
			if b.State != snapshot.BlockInactive {
				req := b.RequestedSize
				if !b.HasRequestedSize {
					req = b.Size
				}
				blocks[b.Addr] = req
			}
		}
	}
	if dev < len(s.Traces) {
		tr := s.Traces[dev]
		for i := len(tr.Viz) - 1; i > idx; i-- {
			e := tr.Events[tr.Viz[i]]
			switch e.VizAction() {
			case snapshot.ActionFree, snapshot.ActionFreeCompleted:
				blocks[e.Addr] = e.Size
			case snapshot.ActionFreeRequested:
				if _, ok := blocks[e.Addr]; !ok {
					blocks[e.Addr] = e.Size
				}
			case snapshot.ActionAlloc:
				delete(blocks, e.Addr)
			case snapshot.ActionSegmentFree, snapshot.ActionSegmentUnmap:
				reserved += float64(e.Size)
			case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
				reserved -= float64(e.Size)
			}
		}
	}
	for _, v := range blocks {
		allocated += float64(v)
	}
	return allocated, reserved
}

// TestShownBeforeVersions loads a real snapshot the way gpumem serve does
// and holds the decoder right after Options.Early, before the address
// versions: the file list, meta and the first window are answered then,
// while a request that shows a version waits for them, and then gives
// what a fully decoded snapshot gives. Run with -race, it also checks
// that nothing the early requests read is being written meanwhile.
func TestShownBeforeVersions(t *testing.T) {
	path := filepath.Join(corpus.Shared(t), "snapshots", "real", "cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle")
	full, err := snapshot.Open(corpus.Need(t, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	// An element whose address version is not 0, so that a missing
	// version would show.
	d := full.DefaultDevice()
	ref := replay.NewTimeline(full, d, replay.KindActive)
	elem := -1
	for i := ref.Len() - 1; i >= 0 && elem < 0; i-- {
		if ref.Element(i).Version > 0 {
			elem = i
		}
	}
	if elem < 0 {
		t.Fatal("no element with a nonzero version")
	}

	srv := New(Options{Addr: "127.0.0.1:8123"})
	h := srv.Handler()
	shown, release := make(chan struct{}), make(chan struct{})
	id, done := srv.Load("f.pickle", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
		early := opt.Early
		opt.Early = func(s *snapshot.Snapshot) {
			early(s)
			close(shown)
			<-release // the versions wait
		}
		return snapshot.Open(path, opt)
	})
	srv.Warm(id)
	<-shown
	q := fmt.Sprintf("file=%d&device=%d&view=active", id, d)
	elemDone := make(chan *httptest.ResponseRecorder, 1)
	go func() { elemDone <- get(t, h, "127.0.0.1:8123", fmt.Sprintf("/api/elem?%s&id=%d", q, elem)) }()
	var files struct {
		Files []fileInfo `json:"files"`
	}
	decodeJSON(t, get(t, h, "127.0.0.1:8123", fmt.Sprintf("/api/files?wait=%d", id)), &files)
	if len(files.Files) != 1 || files.Files[0].Loading || len(files.Files[0].Devices) == 0 {
		t.Fatalf("file list while the versions wait: %+v", files.Files)
	}
	var meta metaJSON
	decodeJSON(t, get(t, h, "127.0.0.1:8123", "/api/meta?"+q), &meta)
	if meta.Peak != float64(ref.PeakBytes()) {
		t.Errorf("meta peak %v, want %d", meta.Peak, ref.PeakBytes())
	}
	for _, u := range []string{"/api/window?" + q + "&w=800&h=400", "/api/curves?" + q + "&w=800", "/api/markers?" + q} {
		if w := get(t, h, "127.0.0.1:8123", u); w.Code != 200 {
			t.Errorf("%s while the versions wait: %d %s", u, w.Code, w.Body)
		}
	}
	select {
	case w := <-elemDone:
		t.Fatalf("an element's details were answered before the versions: %d %s", w.Code, w.Body)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w := <-elemDone
	var e elemJSON
	decodeJSON(t, w, &e)
	if want := ref.Element(elem).Addr; e.Addr != want {
		t.Errorf("element %d address %q, want %q", elem, e.Addr, want)
	}
}

// TestVersionsWaitForFirstView checks when a served file's address
// versions are filled in: after the page's first request past its first
// window (the markers), at once for a request that needs them, and after
// versionsWait when no page asks.
func TestVersionsWaitForFirstView(t *testing.T) {
	path := filepath.Join(corpus.Shared(t), "snapshots", "real", "cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle")
	corpus.Need(t, path)
	for _, tc := range []struct {
		name  string
		wait  time.Duration
		first string // the request after the first window; "" none
	}{
		{"markers", time.Hour, "/api/markers"},
		{"a request for the versions", time.Hour, "/api/events"},
		{"nobody asks", 20 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(Options{Addr: "127.0.0.1:8123"})
			srv.versionsWait = tc.wait
			h := srv.Handler()
			shown := make(chan struct{})
			id, done := srv.Load("f.pickle", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
				early := opt.Early
				opt.Early = func(s *snapshot.Snapshot) {
					go func() {
						// Shown, the file waits for the page before its versions.
						<-srv.file(0).shown
						close(shown)
					}()
					early(s)
				}
				return snapshot.Open(path, opt)
			})
			srv.Warm(id)
			<-shown
			q := fmt.Sprintf("file=%d&view=active", id)
			if w := get(t, h, "127.0.0.1:8123", "/api/window?"+q+"&w=800&h=400"); w.Code != 200 {
				t.Fatalf("window: %d %s", w.Code, w.Body)
			}
			if tc.first == "" {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				return
			}
			select {
			case err := <-done:
				t.Fatalf("the versions did not wait for the page (%v)", err)
			case <-time.After(50 * time.Millisecond):
			}
			if w := get(t, h, "127.0.0.1:8123", tc.first+"?"+q); w.Code != 200 {
				t.Fatalf("%s: %d %s", tc.first, w.Code, w.Body)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the versions still wait after the page's request")
			}
		})
	}
}

// TestCorpusDumpStateJSON: the state view's first answer, laid out from
// the snapshot's own segments and blocks (dumpState), is byte for byte
// what the history gives at the end of the trace, on every real snapshot
// with segments.
func TestCorpusDumpStateJSON(t *testing.T) {
	checked := 0
	for _, path := range corpus.Files(t) {
		s, err := snapshot.Open(path, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(s.Segments) == 0 {
			continue
		}
		checked++
		for _, d := range s.Devices() {
			checkDumpStateJSON(t, filepath.Base(path), s, d)
		}
	}
	if checked == 0 {
		corpus.Missing(t, "no real snapshot with segments")
	}
}

// checkDumpStateJSON fails when dumpState's JSON differs from the
// history's at the last event, or the served history's (started from the
// dump) at the view's steps back and jumps.
func checkDumpStateJSON(t *testing.T, name string, s *snapshot.Snapshot, device int) {
	t.Helper()
	dd := newDeviceData(s, device)
	got, err := dd.dumpState()
	if err != nil {
		t.Fatal(err)
	}
	h := &stateHistory{d: dd, h: replay.NewHistory(s, device)}
	want := h.build(h.h.Len() - 1)
	if g, w := string(got.appendJSON(nil)), string(want.appendJSON(nil)); g != w {
		t.Fatalf("%s device %d: the dump's state answer (%d bytes) differs from the history's (%d bytes) at byte %d",
			name, device, len(g), len(w), firstDiff(g, w))
	}
	// The steps the view asks next, from the history the open started
	// from the dump it laid out (replay.Dump.StartHistory), as a
	// history of its own answers them.
	dd.startHistory()
	served, err := dd.stateHist()
	if err != nil {
		t.Fatal(err)
	}
	n := h.h.Len()
	for _, idx := range []int{n - 2, n - 3, n - 4, n - 5, n - 6, n - 3, n / 2, n/2 - 1, 0, -1} {
		if idx < -1 {
			continue
		}
		g, w := string(served.stateJSON(idx).appendJSON(nil)), string(h.build(idx).appendJSON(nil))
		if g != w {
			t.Fatalf("%s device %d: the state answer at %d (%d bytes) differs from a history of its own's (%d bytes) at byte %d",
				name, device, idx, len(g), len(w), firstDiff(g, w))
		}
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// pairedSteps is the event axis computed on its own, as
// process_alloc_data does it: allocations paired with their frees by
// address, then stacked, the live elements above a freed one found by
// dropping dead entries off the top. It is TestAxes' oracle for vizSteps,
// which reads which frees slid from the timeline.
func pairedSteps(s *snapshot.Snapshot, device int, segmentsView bool) (steps []int32, total int32) {
	if device < 0 || device >= len(s.Traces) {
		return nil, 0
	}
	events, viz := s.Traces[device].Events, s.Traces[device].Viz
	allocAct, freeAct, freeAct2 := snapshot.ActionAlloc, snapshot.ActionFree, snapshot.ActionFreeCompleted
	if segmentsView {
		allocAct, freeAct, freeAct2 = snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentFree
	}
	act := make([]int32, len(viz)) // element id, -1 for no action
	var initial []int32            // frees whose alloc is not in the trace
	open := map[uint64]int32{}
	n := int32(0)
	for i, raw := range viz {
		e := &events[raw]
		act[i] = -1
		switch e.VizAction() {
		case allocAct:
			act[i] = n
			open[e.Addr] = n
			n++
		case freeAct, freeAct2:
			if id, found := open[e.Addr]; found {
				act[i] = id
				delete(open, e.Addr)
			} else {
				act[i] = n
				initial = append(initial, n)
				n++
			}
		}
	}
	pushed := make([]bool, n)
	dead := make([]bool, n)
	stack := make([]int32, 0, n)
	for k := len(initial) - 1; k >= 0; k-- {
		stack = append(stack, initial[k])
		pushed[initial[k]] = true
	}
	steps = make([]int32, len(viz))
	for i, id := range act {
		steps[i] = total
		if id < 0 {
			continue
		}
		total++
		if !pushed[id] {
			pushed[id] = true
			stack = append(stack, id)
			continue
		}
		for len(stack) > 0 && dead[stack[len(stack)-1]] {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1] == id {
			stack = stack[:len(stack)-1]
		} else {
			dead[id] = true
			total += 3
		}
	}
	return steps, total
}
