package web

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

// slidesCheckJS decodes pairs of window answers with the page's reader
// (wincode.js) and says, for each, where the two decoded windows differ
// ("" if in nothing, every float compared by its bits).
const slidesCheckJS = `import { decodeWindow } from './wincode.mjs';
import { readFileSync } from 'node:fs';
const read = (p) => { const b = readFileSync(p); return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength); };
const bits = (a) => a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset, a.length) : a;
const out = [];
for (const [pa, pb] of JSON.parse(readFileSync(process.argv[2], 'utf8'))) {
  const ba = read(pa), t0 = performance.now();
  const a = decodeWindow(ba), ms = performance.now() - t0, b = decodeWindow(read(pb));
  let d = '';
  for (const f of ['x0', 'x1', 'y0', 'y1', 'peak', 'summarized', 'truncated', 'exact', 'n', 'w']) {
    if (!d && !Object.is(a[f], b[f])) d = f + ': ' + a[f] + ' against ' + b[f];
  }
  for (const f of ['ids', 'kinds', 'counts', 'starts', 'xs', 'ys', 'colX', 'colMax', 'colMin']) {
    if (d) break;
    const x = bits(a[f]), y = bits(b[f]);
    if (x.length !== y.length) { d = f + ': ' + x.length + ' values against ' + y.length; break; }
    for (let i = 0; i < x.length; i++) {
      if (x[i] !== y[i]) { d = f + '[' + i + ']: ' + a[f][i] + ' against ' + b[f][i]; break; }
    }
  }
  out.push({ diff: d, polygons: b.n, points: b.xs.length, ms, bytes: [ba.byteLength, read(pb).byteLength] });
}
console.log(JSON.stringify(out));
`

// TestSlidesDecodeAsPoints: a window answer that carries the slides
// (windowSlides) decodes in the page (wincode.js) to the polygons of the
// answer with the points (window), bit for bit: the same ids, counts and
// every x and y, for synthetic timelines (random stacks with frees that
// ramp inside narrow windows, a training run), real snapshots, and, with
// GPUMEM_TILE=FILE, a large snapshot's widest windows (the viewer bench's).
func TestSlidesDecodeAsPoints(t *testing.T) {
	node := corpus.Tool(t, "node", "the page's window reader is checked with it; Debian: apt-get install nodejs")
	dir := t.TempDir()
	src, err := staticFS.ReadFile("static/wincode.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wincode.mjs"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "check.mjs"), []byte(slidesCheckJS), 0o644); err != nil {
		t.Fatal(err)
	}
	slidesAlways = true
	defer func() { slidesAlways = false }()
	var pairs [][2]string
	var names []string
	var groups, ramps, slides int
	add := func(name string, tl *timeline, q windowQuery) {
		q.Slides = false
		pts := tl.window(q)
		q.Slides = true
		sl := tl.window(q)
		if f := math.Float64frombits(binary.LittleEndian.Uint64(sl[72:])); int(f)&4 != 0 {
			slides++
			groups += int(math.Float64frombits(binary.LittleEndian.Uint64(sl[80+8*3:])))
			ramps += int(math.Float64frombits(binary.LittleEndian.Uint64(sl[80+8*5:])))
		}
		i := len(pairs)
		a, b := filepath.Join(dir, fmt.Sprintf("%d.slides", i)), filepath.Join(dir, fmt.Sprintf("%d.points", i))
		if err := os.WriteFile(a, sl, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(b, pts, 0o644); err != nil {
			t.Fatal(err)
		}
		pairs = append(pairs, [2]string{a, b})
		names = append(names, fmt.Sprintf("%s %s x [%g, %g] y [%g, %g] %dx%d detail %d", name, q.Mode, q.X0, q.X1, q.Y0, q.Y1, q.W, q.H, q.Detail))
	}
	r := rand.New(rand.NewPCG(32, 25))
	windows := func(name string, s *snapshot.Snapshot, n int) {
		for _, view := range []string{ViewActive, ViewSegments} {
			tl := newTimeline(s, s.DefaultDevice(), view, nil, nil)
			modes := []string{"event"}
			if tl.hasTime() {
				modes = append(modes, "time")
			}
			for _, mode := range modes {
				lo, hi := tl.xRange(mode)
				peak := float64(max(tl.tl.PeakBytes(), 1))
				add(name+" "+view, tl, windowQuery{X0: lo, X1: hi, W: 1600, H: 600, Mode: mode, Detail: 15000})
				for range n {
					q := windowQuery{W: 50 + r.IntN(1600), H: 100 + r.IntN(900), Mode: mode, Detail: []int{3, 40, 15000}[r.IntN(3)]}
					// Spans from the whole trace to a few timesteps, where
					// the marks fall inside columns and frees ramp across
					// them.
					span := (hi - lo) * math.Pow(r.Float64(), 3)
					q.X0 = lo + r.Float64()*(hi-lo-span)
					q.X1 = q.X0 + span
					if r.IntN(2) == 0 {
						q.Y0 = r.Float64() * peak / 2
						q.Y1 = q.Y0 + r.Float64()*peak
					}
					add(name+" "+view, tl, q)
				}
			}
		}
	}
	for i := range 4 {
		windows(fmt.Sprintf("random %d", i), slidingSnapshot(r, 400+600*i), 25)
	}
	for _, w := range []synth.Workload{{Model: "mlp", Layers: 3, Hidden: 256, Batch: 4, Steps: 3}, {Model: "transformer", Layers: 2, Steps: 2, Seed: 7}} {
		s, _, err := synth.Generate(w, synth.Options{})
		if err != nil {
			t.Fatal(err)
		}
		windows(w.Model, s, 15)
	}
	for _, name := range []string{"cs336-notHanmin__memory_snapshot.pickle"} {
		path := corpus.File(t, name)
		s := openSnapshot(t, path)
		windows(name, s, 15)
	}
	if path := os.Getenv("GPUMEM_TILE"); path != "" {
		s := openSnapshot(t, path)
		tl := newTimeline(s, s.DefaultDevice(), ViewActive, nil, nil)
		lo, hi := tl.xRange("event")
		P := float64(tl.tl.PeakBytes())
		span, h := (hi-lo)/1.5, P/1.5
		mid := (lo + hi) / 2
		add("tile", tl, windowQuery{X0: lo, X1: hi, W: 1600, H: 600, Mode: "event", Detail: 15000})
		add("tile", tl, windowQuery{X0: mid - span/2, X1: mid + span/2, Y0: P/2 - h/2, Y1: P/2 + h/2, W: 1600, H: 600, Mode: "event", Detail: 15000})
		x0 := min(mid-span/2+8*0.2*span/math.Pow(1.5, 7), hi-span)
		add("tile", tl, windowQuery{X0: x0, X1: x0 + span, Y0: P/2 - h/2, Y1: P/2 + h/2, W: 1600, H: 600, Mode: "event", Detail: 15000})
	}
	list, _ := json.Marshal(pairs)
	if err := os.WriteFile(filepath.Join(dir, "pairs.json"), list, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "check.mjs", "pairs.json")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []struct {
		Diff             string
		Polygons, Points int
		Ms               float64 // the slides answer's decode in node
		Bytes            [2]int  // the two answers' sizes
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(pairs) {
		t.Fatalf("node printed %d results (%v): %.200s", len(got), err, out)
	}
	var polygons, points, bad int
	for i, g := range got {
		polygons += g.Polygons
		points += g.Points
		if strings.HasPrefix(names[i], "tile") {
			t.Logf("%s: %d polygons, %d points; %d bytes as slides (decoded in %.1f ms), %d as points", names[i], g.Polygons, g.Points, g.Bytes[0], g.Ms, g.Bytes[1])
		}
		if g.Diff != "" {
			if bad++; bad <= 10 {
				t.Errorf("%s: slides decode to %s", names[i], g.Diff)
			}
		}
	}
	t.Logf("%d windows (%d as slides: %d groups of slides, %d ramping frees), %d polygons, %d points, %d differ",
		len(pairs), slides, groups, ramps, polygons, points, bad)
	// Not a check of nothing: the windows draw, slide and ramp.
	if slides < len(pairs)/3 || groups == 0 || ramps == 0 || points == 0 {
		t.Errorf("%d of %d windows as slides, %d groups, %d ramping frees, %d points: the check checks too little", slides, len(pairs), groups, ramps, points)
	}
	if strings.Contains(string(out), "NaN") {
		t.Errorf("a decoded window holds NaN")
	}
}

// slidingSnapshot is a random stack of n allocations whose frees slide
// the long-lived ones above them: each step allocates or frees, most
// frees the recent allocations below the old ones.
func slidingSnapshot(r *rand.Rand, n int) *snapshot.Snapshot {
	s := &snapshot.Snapshot{
		Source:  snapshot.Source{Generation: snapshot.GenD6},
		Strings: []string{""},
		Streams: []int64{0},
		Stacks:  snapshot.StackTable{Offsets: []int32{0, 0}},
	}
	var tr snapshot.Trace
	type live struct{ addr, size uint64 }
	var alive []live
	next := uint64(0x100000)
	for range n {
		if len(alive) < 3 || r.IntN(9) < 5 {
			size := uint64(1 + r.IntN(1<<(4+r.IntN(18))))
			tr.Events = append(tr.Events, snapshot.Event{Action: snapshot.ActionAlloc, Addr: next, Size: size})
			alive = append(alive, live{next, size})
			next += 1 << 23
			continue
		}
		k := r.IntN(len(alive))
		if r.IntN(4) > 0 { // the old ones stay longer
			k = len(alive) - 1 - r.IntN(min(len(alive), 4))
		}
		e := alive[k]
		alive = append(alive[:k], alive[k+1:]...)
		tr.Events = append(tr.Events, snapshot.Event{Action: snapshot.ActionFreeRequested, Addr: e.addr, Size: e.size},
			snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: e.addr, Size: e.size})
	}
	s.Traces = []snapshot.Trace{tr}
	return s
}

// openSnapshot opens a snapshot file or fails the test.
func openSnapshot(t *testing.T, path string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWindowSlidesByCounts: a timeline's windows come as slides once one
// of its answers was point-heavy (slidesMinPoints, slidesPerPolygon), and
// only to a reader that takes them; that answer says so (flag 8). A
// timeline whose answers are not (the demo's) stays with the points.
func TestWindowSlidesByCounts(t *testing.T) {
	defer func(n int) { slidesMinPoints = n }(slidesMinPoints)
	minPoints := slidesMinPoints
	slidesMinPoints = 1000
	flags := func(b []byte) int { return int(math.Float64frombits(binary.LittleEndian.Uint64(b[72:]))) }
	// Five large allocations above 400 small ones, which are then freed
	// one by one: each free slides the five down.
	s := &snapshot.Snapshot{Source: snapshot.Source{Generation: snapshot.GenD6}, Strings: []string{""}, Streams: []int64{0},
		Stacks: snapshot.StackTable{Offsets: []int32{0, 0}}}
	var tr snapshot.Trace
	for i := range 405 {
		size := uint64(512 + i)
		if i >= 400 {
			size = 1 << 30
		}
		tr.Events = append(tr.Events, snapshot.Event{Action: snapshot.ActionAlloc, Addr: uint64(i+1) << 32, Size: size})
	}
	for i := range 400 {
		tr.Events = append(tr.Events, snapshot.Event{Action: snapshot.ActionFreeCompleted, Addr: uint64(i+1) << 32, Size: uint64(512 + i)})
	}
	s.Traces = []snapshot.Trace{tr}
	tl := newTimeline(s, 0, ViewActive, nil, nil)
	q := windowQuery{W: 800, H: 300, Mode: "event", Detail: 5, Slides: true}
	if f := flags(tl.window(q)); f&4 != 0 || f&8 == 0 {
		t.Fatalf("first window: flags %d, want the points (no 4) and 8", f)
	}
	if f := flags(tl.window(q)); f&4 == 0 {
		t.Fatalf("second window: flags %d, want the slides (4)", f)
	}
	q.Slides = false
	if f := flags(tl.window(q)); f&(4|8) != 0 {
		t.Fatalf("a reader that takes no slides: flags %d, want neither 4 nor 8", f)
	}
	dm, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	light := newTimeline(dm, dm.DefaultDevice(), ViewActive, nil, nil)
	slidesMinPoints = minPoints
	q = windowQuery{W: 800, H: 300, Mode: "event", Detail: 15000, Slides: true}
	for i := range 2 {
		if f := flags(light.window(q)); f&(4|8) != 0 {
			t.Fatalf("light timeline, window %d: flags %d, want the points", i, f)
		}
	}
}
