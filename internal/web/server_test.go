package web

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

const segSize = 2 << 20

// tinySnapshot is one 2 MiB segment; A (512 B) and B (1000 B) are
// allocated, then A is freed (a merged free_requested/free_completed pair).
func tinySnapshot() *snapshot.Snapshot {
	ev := func(a snapshot.Action, addr, size uint64, t int64) snapshot.Event {
		return snapshot.Event{Action: a, Addr: addr, Size: size, TimeUS: t, Stack: 1, Flags: snapshot.FlagHasTime | snapshot.FlagHasFrames}
	}
	events := []snapshot.Event{
		ev(snapshot.ActionSegmentAlloc, 0x1000, segSize, 100),
		ev(snapshot.ActionAlloc, 0x1000, 512, 200),
		ev(snapshot.ActionAlloc, 0x1200, 1000, 300),
		ev(snapshot.ActionFreeRequested, 0x1000, 512, 400),
		ev(snapshot.ActionFreeCompleted, 0x1000, 512, 400),
	}
	events[3].Flags |= snapshot.FlagMergedFree
	s := &snapshot.Snapshot{
		Segments: []snapshot.Segment{{Device: 0, Address: 0x1000, TotalSize: segSize, AllocatedSize: 1024, ActiveSize: 1024,
			RequestedSize: 1000, Large: true, HasPoolID: true, FirstBlock: 0, NumBlocks: 3}},
		Blocks: []snapshot.Block{
			{Addr: 0x1000, Size: 512, HasRequestedSize: true, State: snapshot.BlockInactive, Version: 1},
			{Addr: 0x1200, Size: 1024, RequestedSize: 1000, HasRequestedSize: true, State: snapshot.BlockActiveAllocated, Stack: 1},
			{Addr: 0x1600, Size: segSize - 1536, HasRequestedSize: true, State: snapshot.BlockInactive},
		},
		Traces:  []snapshot.Trace{{Events: events, Viz: []int32{0, 1, 2, 3}}},
		Frames:  []snapshot.Frame{{Filename: "train.py", Name: "forward", Line: 10}, {Filename: "Python/ceval.c", Name: "_PyEval_EvalFrame", Line: 1}},
		Stacks:  snapshot.StackTable{Offsets: []int32{0, 0, 5}, FrameIDs: []snapshot.FrameID{0, 1, 0, 0, 0}},
		Strings: []string{""},
		Streams: []int64{0},
		Extras:  []snapshot.KeyValues{nil},
		AllocatorSettings: &snapshot.AllocatorSettings{Raw: snapshot.KeyValues{
			{Key: "PYTORCH_CUDA_ALLOC_CONF", JSON: `"expandable_segments:False"`}, {Key: "max_split_size", JSON: "-1"}}},
	}
	s.Traces[0].SetVersions([]int32{0, 0, 0, 0, 1})
	return s
}

func newTestServer(t *testing.T) (*Server, http.Handler) {
	s := New(Options{Addr: "127.0.0.1:8123", Decode: func(name string, b []byte) (*snapshot.Snapshot, error) {
		return snapshot.DecodeBytes(b, name, nil)
	}})
	s.Add("tiny.pickle", tinySnapshot())
	return s, s.Handler()
}

func get(t *testing.T, h http.Handler, host, url string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", url, nil)
	r.Host = host
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHostCheck(t *testing.T) {
	_, h := newTestServer(t)
	for _, tc := range []struct {
		host string
		want int
	}{
		{"127.0.0.1:8123", 200},
		{"localhost:8123", 200},
		{"LOCALHOST:8123", 200},
		{"[::1]:8123", 200},
		{"localhost", 200},
		{"evil.example.com", 403},
		{"evil.example.com:8123", 403},
		{"127.0.0.1.evil.com:8123", 403},
		{"localhost:9999", 403},
		{"", 403},
	} {
		for _, path := range []string{"/api/files", "/", "/app.js"} {
			if got := get(t, h, tc.host, path).Code; got != tc.want {
				t.Errorf("Host %q, %s: status %d, want %d", tc.host, path, got, tc.want)
			}
		}
	}
}

// TestIndexInlined checks that the page comes with its style and script
// (the viewer's modules, bundled) inline (one request), and that they are
// still served on their own.
func TestIndexInlined(t *testing.T) {
	_, h := newTestServer(t)
	w := get(t, h, "localhost:8123", "/")
	body := w.Body.String()
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("status %d, type %q", w.Code, w.Header().Get("Content-Type"))
	}
	js, err := appScript()
	if err != nil {
		t.Fatal(err)
	}
	css, _ := staticFS.ReadFile("static/style.css")
	// The served page's module holds its first frame (page).
	if !strings.Contains(body, "<script type=\"module\" blocking=\"render\">\n"+js+"</script>") || !strings.Contains(body, "<style>\n"+string(css)+"</style>") {
		t.Errorf("index does not inline the viewer's modules and style.css")
	}
	if strings.Contains(body, `src="app.js"`) || strings.Contains(body, `href="style.css"`) || strings.Contains(body, `<script id="gpumem-data"`) {
		t.Errorf("index still links its assets or carries export data")
	}
	for _, path := range []string{"/app.js", "/store.js", "/timeline.js", "/style.css"} {
		if w := get(t, h, "localhost:8123", path); w.Code != 200 || w.Body.Len() == 0 {
			t.Errorf("%s: status %d", path, w.Code)
		}
	}
}

func decodeJSON(t *testing.T, w *httptest.ResponseRecorder, v any) {
	t.Helper()
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		t.Fatalf("%v: %s", err, w.Body.String())
	}
}

// decodedWindow is the /api/window answer read back from its arrays.
type decodedWindow struct {
	x0, x1, y0, y1, peak float64
	summarized           int
	truncated, exact     bool
	ids, kinds, counts   []int32
	xs, ys               []float32
	colX, colMax, colMin []float32
}

// polygon returns polygon i's points.
func (d *decodedWindow) polygon(i int) (xs, ys []float32) {
	start := 0
	for _, c := range d.counts[:i] {
		start += int(c)
	}
	n := int(d.counts[i])
	return d.xs[start : start+n], d.ys[start : start+n]
}

func readWindow(t *testing.T, b []byte) decodedWindow {
	t.Helper()
	if len(b) < windowHeader {
		t.Fatalf("window answer is %d bytes", len(b))
	}
	f64 := func(i int) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])) }
	nS, nP, w := int(f64(4)), int(f64(5)), int(f64(6))
	if want := windowHeader + 12*nS + 8*nP + 4*(3*w+1); len(b) != want {
		t.Fatalf("window answer is %d bytes, header says %d", len(b), want)
	}
	off := windowHeader
	i32 := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
		return out
	}
	f32 := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
		return out
	}
	flags := int(f64(9))
	d := decodedWindow{x0: f64(0), x1: f64(1), y0: f64(2), y1: f64(3), peak: f64(7),
		summarized: int(f64(8)), truncated: flags&1 != 0, exact: flags&2 != 0}
	d.ids, d.kinds, d.counts = i32(nS), i32(nS), i32(nS)
	d.xs, d.ys = f32(nP), f32(nP)
	d.colX, d.colMax, d.colMin = f32(w+1), f32(w), f32(w)
	return d
}

func minMax(v []float32) (lo, hi float32) {
	lo, hi = float32(math.Inf(1)), float32(math.Inf(-1))
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

func TestWindowAndMeta(t *testing.T) {
	_, h := newTestServer(t)
	var m metaJSON
	decodeJSON(t, get(t, h, "localhost:8123", "/api/meta?file=0&device=0&view=active"), &m)
	if m.Elements != 2 || m.Steps != 6 || m.Peak != 1512 || m.Events != 4 {
		t.Errorf("meta = %+v; want 2 elements, 6 steps, peak 1512, 4 events", m)
	}
	w := get(t, h, "localhost:8123", "/api/window?file=0&device=0&view=active&x0=0&x1=6&w=120&h=100")
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	d := readWindow(t, w.Body.Bytes())
	if len(d.ids) != 2 || d.peak != 1512 {
		t.Fatalf("window has %d polygons, peak %v; want 2, peak 1512", len(d.ids), d.peak)
	}
	// The answer's server time, for the page's resource timings.
	if st := w.Header().Get("Server-Timing"); !regexp.MustCompile(`^window;dur=[0-9.]+(, cpu;dur=[0-9.]+)?, index;desc=(none|blocks|built)$`).MatchString(st) {
		t.Errorf("Server-Timing %q, want window;dur=MS[, cpu;dur=MS], index;desc=STATE", st)
	}
	// B (element 1) is pushed on A at 512 and slides to 0 once A is freed.
	for i, id := range d.ids {
		xs, ys := d.polygon(i)
		lo, hi := minMax(ys)
		xlo, xhi := minMax(xs)
		switch id {
		case 0:
			if lo != 0 || hi != 512 || xlo != 0 || xhi != 3 {
				t.Errorf("A spans x %v..%v y %v..%v; want 0..3, 0..512", xlo, xhi, lo, hi)
			}
		case 1:
			if ys[0] != 512 || lo != 0 || hi != 1512 || xlo != 1 || xhi != 6 {
				t.Errorf("B: starts at %v, spans x %v..%v y %v..%v; want 512, 1..6, 0..1512", ys[0], xlo, xhi, lo, hi)
			}
		default:
			t.Errorf("unexpected polygon %d", id)
		}
	}
	if _, hi := minMax(d.colMax); hi != 1512 || d.colX[0] != 0 || d.colX[120] != 6 {
		t.Errorf("columns: max %v, edges %v..%v; want 1512, 0..6", hi, d.colX[0], d.colX[120])
	}
	// However thin at this size, both are drawn.
	w = get(t, h, "localhost:8123", "/api/window?file=0&device=0&view=active&x0=0&x1=6&w=100&h=2")
	if d := readWindow(t, w.Body.Bytes()); len(d.ids) != 2 || d.summarized != 0 {
		t.Errorf("2-pixel-high window has polygons %v (%d summarised), want both", d.ids, d.summarized)
	}
	// A band of bytes: only B crosses [600, 1000].
	w = get(t, h, "localhost:8123", "/api/window?file=0&device=0&view=active&x0=0&x1=6&y0=600&y1=1000&w=100&h=100")
	if d := readWindow(t, w.Body.Bytes()); len(d.ids) != 1 || d.ids[0] != 1 || d.y0 != 600 || d.y1 != 1000 || d.summarized != 0 || !d.exact {
		t.Errorf("band window: polygons %v, y %v..%v, %d summarised (exact %v); want [1], 600..1000, 0", d.ids, d.y0, d.y1, d.summarized, d.exact)
	}
	// Detail caps the polygons, largest first; the rest is counted.
	w = get(t, h, "localhost:8123", "/api/window?file=0&device=0&view=active&w=100&h=100&detail=1")
	if d := readWindow(t, w.Body.Bytes()); len(d.ids) != 1 || d.ids[0] != 1 || d.summarized != 1 || !d.truncated || !d.exact {
		t.Errorf("detail=1 window has polygons %v, %d summarised; want just [1], 1", d.ids, d.summarized)
	}
	// The time axis: x in time_us.
	decodeJSON(t, get(t, h, "localhost:8123", "/api/meta?view=segments&mode=time"), &m)
	if !m.HasTime || m.XTime[0] != 100 {
		t.Errorf("segments time meta = %+v; want time axis from 100", m)
	}
	w = get(t, h, "localhost:8123", "/api/window?file=0&device=0&view=segments&mode=time&w=50&h=100")
	if d := readWindow(t, w.Body.Bytes()); len(d.ids) != 1 || d.peak != segSize || d.x0 != m.XTime[0] {
		t.Errorf("segments: polygons %v peak %v x0 %v; want 1 polygon, peak %d, x0 %v", d.ids, d.peak, d.x0, segSize, m.XTime[0])
	}
}

func TestElemAndSearch(t *testing.T) {
	_, h := newTestServer(t)
	var e elemJSON
	decodeJSON(t, get(t, h, "localhost:8123", "/api/elem?view=active&id=1"), &e)
	for _, want := range []string{"Addr: b'1200_0", "Size: 1000.0B (1000 bytes) allocation", "Total memory used after allocation: 1.5KiB (1512 bytes)", "stream 0", "pool_id (0, 0)", "train.py:10:forward\n<repeats 3 times>"} {
		if !strings.Contains(e.Text, want) {
			t.Errorf("details lack %q:\n%s", want, e.Text)
		}
	}
	if strings.Contains(e.Text, "ceval") {
		t.Errorf("details keep a filtered frame:\n%s", e.Text)
	}
	var s map[string]searchJSON
	decodeJSON(t, get(t, h, "localhost:8123", "/api/search?view=active&addr=0x1200&frame=FORWARD"), &s)
	if s["addr"].Count != 1 || s["addr"].IDs[0] != 1 || s["frame"].Count != 2 {
		t.Errorf("search = %+v; want addr [1], 2 frame matches", s)
	}
	if w := get(t, h, "localhost:8123", "/api/elem?view=active&id=7"); w.Code != 404 {
		t.Errorf("missing element: status %d", w.Code)
	}
}

func TestStateHistory(t *testing.T) {
	_, h := newTestServer(t)
	for _, tc := range []struct {
		idx                 int
		allocated, reserved float64
		blocks              int
	}{
		{-1, 0, 0, 0},
		{0, 0, segSize, 0},
		{1, 512, segSize, 1},
		{2, 1512, segSize, 2},
		{3, 1000, segSize, 1},
	} {
		var st stateJSON
		decodeJSON(t, get(t, h, "localhost:8123", "/api/state?view=state&idx="+itoa(tc.idx)), &st)
		nb := 0
		for _, s := range st.Segments {
			nb += len(s.Blocks)
		}
		if st.Allocated != tc.allocated || st.Reserved != tc.reserved || nb != tc.blocks {
			t.Errorf("state after %d: allocated %v reserved %v blocks %d; want %v %v %d", tc.idx, st.Allocated, st.Reserved, nb, tc.allocated, tc.reserved, tc.blocks)
		}
	}
	var ev struct {
		Total int      `json:"total"`
		Lines []string `json:"lines"`
	}
	decodeJSON(t, get(t, h, "localhost:8123", "/api/events?view=state&from=1&count=2"), &ev)
	if ev.Total != 4 || len(ev.Lines) != 2 || !strings.HasPrefix(ev.Lines[0], "alloc          b'1000_0") {
		t.Errorf("events = %+v", ev)
	}
	if w := get(t, h, "localhost:8123", "/api/state?idx=99"); w.Code != 400 {
		t.Errorf("out-of-range state: status %d", w.Code)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func TestCurves(t *testing.T) {
	_, h := newTestServer(t)
	w := get(t, h, "localhost:8123", "/api/curves?x0=0&x1=6&w=4")
	b := w.Body.Bytes()
	v := func(i int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])) }
	if len(b) < 4 || len(b) != 4*(1+4*int(v(0))) {
		t.Fatalf("curves answer is %d bytes", len(b))
	}
	n := int(v(0))
	alloc := make([]float32, n)
	for i := range alloc {
		alloc[i] = v(1 + n + i)
	}
	// Allocated counts rounded block sizes (512 + 1024), as memory_stats.
	if _, hi := minMax(alloc); hi != 1536 || alloc[0] != 0 || alloc[n-1] != 1024 || v(1+2*n+n-1) != segSize {
		t.Errorf("allocated %v, final reserved %v; want 0 .. 1536 .. 1024 and %d reserved", alloc, v(1+2*n+n-1), segSize)
	}
	var mk struct {
		Markers []marker `json:"markers"`
	}
	decodeJSON(t, get(t, h, "localhost:8123", "/api/markers"), &mk)
	if mk.Markers == nil {
		t.Errorf("markers answer has no list")
	}
}

func TestUploadAndSettings(t *testing.T) {
	s, h := newTestServer(t)
	r := httptest.NewRequest("POST", "/api/upload?name=bad.pickle", strings.NewReader("this is not a snapshot"))
	r.Host = "127.0.0.1:8123"
	r.Header.Set("Content-Type", "application/octet-stream")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var e apiError
	if w.Code != http.StatusUnprocessableEntity || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.HasPrefix(e.Error, "bad.pickle: ") {
		t.Errorf("bad upload: status %d body %s", w.Code, w.Body.String())
	}
	s.opt.MaxUpload = 10
	r = httptest.NewRequest("POST", "/api/upload?name=big", bytes.NewReader(make([]byte, 100)))
	r.Host = "127.0.0.1:8123"
	r.Header.Set("Content-Type", "application/octet-stream")
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized upload: status %d", w.Code)
	}
	// The server still answers.
	var set struct {
		Settings map[string]any `json:"settings"`
	}
	decodeJSON(t, get(t, h, "localhost:8123", "/api/settings"), &set)
	if set.Settings["max_split_size"] != float64(-1) || set.Settings["PYTORCH_CUDA_ALLOC_CONF"] != "expandable_segments:False" {
		t.Errorf("settings = %v", set.Settings)
	}
	// Static UI is served and no path escapes it.
	if w := get(t, h, "localhost:8123", "/"); w.Code != 200 || !strings.Contains(w.Body.String(), "gpumem") {
		t.Errorf("index: %d", w.Code)
	}
	if w := get(t, h, "localhost:8123", "/../server.go"); w.Code == 200 {
		body, _ := io.ReadAll(w.Body)
		if strings.Contains(string(body), "package web") {
			t.Errorf("source file served")
		}
	}
}

func TestWriteHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, "tiny.pickle", tinySnapshot(), HTMLOptions{Device: -1}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{`src="app.js"`, `href="style.css"`, "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("page still references %q", bad)
		}
	}
	if !strings.Contains(page, `id="gpumem-data"`) || strings.Count(page, "</script>") != 3 {
		t.Errorf("page does not embed data, the size formats and script once each")
	}
	if err := WriteHTML(&b, "x", tinySnapshot(), HTMLOptions{View: "nope"}); err == nil {
		t.Errorf("unknown view accepted")
	}
	if err := WriteHTML(&b, "x", tinySnapshot(), HTMLOptions{Device: 3}); err == nil {
		t.Errorf("missing device accepted")
	}
}

// TestBackgroundLoad: a file registered with Load is listed as loading
// with its progress while it decodes, requests for it wait and then get
// its answer, files queued after it load after it, and a failed load
// answers every request with its error while the server keeps serving.
func TestBackgroundLoad(t *testing.T) {
	s := New(Options{Addr: "127.0.0.1:8123"})
	h := s.Handler()
	release := make(chan struct{})
	progressed := make(chan struct{})
	id, done := s.Load("slow.pickle", func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
		opt.Progress(300, 1000)
		close(progressed)
		<-release
		return tinySnapshot(), nil
	})
	badID, badDone := s.Load("bad.pickle", func(*snapshot.Options) (*snapshot.Snapshot, error) {
		panic("hostile input") // a decoder bug must not take the server down
	})
	s.Warm(id)
	<-progressed

	var files struct {
		Files []fileInfo `json:"files"`
	}
	if err := json.Unmarshal(get(t, h, "127.0.0.1:8123", "/api/files").Body.Bytes(), &files); err != nil {
		t.Fatal(err)
	}
	if f := files.Files[id]; !f.Loading || f.Done != 300 || f.Size != 1000 || f.Name != "slow.pickle" {
		t.Errorf("while loading: %+v, want loading 300 of 1000 bytes", f)
	}
	if f := files.Files[badID]; !f.Loading {
		t.Errorf("queued file: %+v, want loading", f)
	}

	metaDone := make(chan *httptest.ResponseRecorder)
	go func() { metaDone <- get(t, h, "127.0.0.1:8123", "/api/meta?file=0&view=active") }()
	select {
	case <-metaDone:
		t.Fatal("meta answered before the file was loaded")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if w := <-metaDone; w.Code != 200 || !strings.Contains(w.Body.String(), `"elements":2`) {
		t.Errorf("meta after load: %d %s", w.Code, w.Body)
	}
	if err := <-done; err != nil {
		t.Errorf("load error %v", err)
	}
	if err := <-badDone; err == nil || !strings.Contains(err.Error(), "hostile input") {
		t.Errorf("bad load error %v, want the panic as an error", err)
	}
	w := get(t, h, "127.0.0.1:8123", "/api/window?file=1&view=active")
	if w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "bad.pickle: decoder failed: hostile input") {
		t.Errorf("request for the failed file: %d %s", w.Code, w.Body)
	}
	files.Files = nil // Unmarshal would merge into the old elements
	if err := json.Unmarshal(get(t, h, "127.0.0.1:8123", "/api/files?wait=1").Body.Bytes(), &files); err != nil {
		t.Fatal(err)
	}
	if f := files.Files[0]; f.Loading || len(f.Devices) != 1 || f.Devices[0].Events != 5 {
		t.Errorf("loaded file: %+v", f)
	}
	if f := files.Files[1]; f.Loading || !strings.Contains(f.Error, "hostile input") {
		t.Errorf("failed file: %+v", f)
	}
}

// TestStateOmitsSmallest checks that a state past maxStateSegments sends
// the largest segments, in address order, and counts the rest.
func TestStateOmitsSmallest(t *testing.T) {
	const n = maxStateSegments + 37
	s := &snapshot.Snapshot{Strings: []string{""}, Streams: []int64{0}, Stacks: snapshot.StackTable{Offsets: []int32{0, 0}}}
	addr := uint64(1 << 30)
	for i := range n {
		size := uint64(2<<20) * uint64(1+(i*7919)%13) // sizes in no order
		s.Segments = append(s.Segments, snapshot.Segment{Address: addr, TotalSize: size, FirstBlock: int32(i), NumBlocks: 1})
		s.Blocks = append(s.Blocks, snapshot.Block{Addr: addr, Size: size, State: snapshot.BlockInactive})
		addr += size
	}
	s.Traces = []snapshot.Trace{{}}
	hist, err := newDeviceData(s, 0).stateHist()
	if err != nil {
		t.Fatal(err)
	}
	st := hist.stateJSON(-1)
	if len(st.Segments) != maxStateSegments || st.Omitted != n-maxStateSegments {
		t.Fatalf("%d segments sent, %d omitted; want %d and %d", len(st.Segments), st.Omitted, maxStateSegments, n-maxStateSegments)
	}
	type seg struct{ addr, size uint64 }
	byName := map[string]seg{}
	for _, sg := range s.Segments {
		byName[replay.FormatAddr(true, sg.Address, sg.Version)] = seg{sg.Address, sg.TotalSize}
	}
	minSent := st.Segments[0].Size
	sent := map[string]bool{}
	for i, sg := range st.Segments {
		minSent = min(minSent, sg.Size)
		sent[sg.Addr] = true
		if i > 0 && byName[sg.Addr].addr <= byName[st.Segments[i-1].Addr].addr {
			t.Fatalf("segment %d (%s) not in address order", i, sg.Addr)
		}
	}
	for name, sg := range byName {
		if !sent[name] && float64(sg.size) > minSent {
			t.Fatalf("segment %s of %d bytes omitted while one of %v was sent", name, sg.size, minSent)
		}
	}
}
