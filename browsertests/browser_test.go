package browsertests

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

// chromePath finds a Chromium binary. Without one the tests skip, unless
// CI=true, where a missing browser is a failure.
func chromePath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CHROME"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	corpus.Missing(t, "no chromium binary on PATH; install chromium (apt-get install -y chromium) to run browser tests")
	return ""
}

// newBrowser starts headless Chromium with a fresh profile.
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	// Not t.TempDir: Chromium's helpers may still write to the profile for a
	// moment after the browser is gone, which fails TempDir's cleanup.
	profile, err := os.MkdirTemp("", "gpumem-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromePath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() {
		cancelT()
		cancelC()
		cancelA()
		for i := 0; i < 20 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return ctx
}

// candidates are real snapshots with traces, settings and annotations; the
// first that decodes is used.
var candidates = []string{
	"cs336-bcrafton__memory_snapshot.pickle",
	"cs336-MAGMA27__memory_snapshot.pickle",
	"cs336-silmont2000__memory_forward_fp32_128.pickle",
	"cs336-silmont2000__mem_snapshot.pickle",
}

func loadReal(t testing.TB) (string, *snapshot.Snapshot) {
	t.Helper()
	dir := corpus.Dir(t)
	var errs []string
	for _, name := range candidates {
		s, err := snapshot.Open(filepath.Join(dir, name), nil)
		if err == nil {
			return name, s
		}
		errs = append(errs, err.Error())
	}
	t.Fatalf("no candidate snapshot decodes: %s", strings.Join(errs, "; "))
	return "", nil
}

// startServer serves snapshots the way "gpumem serve" does.
func startServer(t testing.TB, name string, s *snapshot.Snapshot) string {
	t.Helper()
	srv := web.New(web.Options{Decode: func(n string, b []byte) (*snapshot.Snapshot, error) {
		return snapshot.DecodeBytes(b, n, nil)
	}})
	srv.Add(name, s)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetAddr(strings.TrimPrefix(hs.URL, "http://"))
	return hs.URL + "/"
}

// serveReal serves the real snapshot of loadReal and returns a browser tab
// for it, the server's URL and the snapshot.
func serveReal(t *testing.T) (context.Context, string, *snapshot.Snapshot) {
	t.Helper()
	name, s := loadReal(t)
	ctx := newBrowser(t)
	return ctx, startServer(t, name, s), s
}

// openPage navigates the tab to url and waits for the page's first
// drawing.
func openPage(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Navigate(url), chromedp.ActionFunc(waitReady)); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for the page's first drawing.
func waitReady(ctx context.Context) error {
	return chromedp.Run(ctx, pollAfterLoad(`document.body.dataset.ready === '1'`, nil,
		chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// pollAfterLoad is chromedp.Poll for a page just loaded: a poll that
// starts while the page is still replacing its JavaScript context fails
// with "Cannot find context" and is retried.
func pollAfterLoad(expr string, res any, opts ...chromedp.PollOption) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		for try := 0; try < 3; try++ {
			err = chromedp.Run(ctx, chromedp.Poll(expr, res, opts...))
			if err == nil || !strings.Contains(err.Error(), "Cannot find context") {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
		return err
	})
}

// colouredPixels counts pixels of a canvas that are neither white nor grey.
const colouredPixels = `(() => {
  const c = document.getElementById(%q);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const r = d[i], g = d[i+1], b = d[i+2];
    if (Math.max(Math.abs(r-g), Math.abs(g-b), Math.abs(r-b)) > 24) n++;
  }
  return n;
})()`

func text(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	var s string
	if err := chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery)); err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

func TestViewsRender(t *testing.T) {
	ctx, url, s := serveReal(t)
	dev := 0
	for d := range s.Traces {
		if len(s.Traces[d].Events) > len(s.Traces[dev].Events) {
			dev = d
		}
	}
	activePeak, segPeak := replay.Peaks(s, dev)
	for _, tc := range []struct {
		view   string
		canvas string
		peak   uint64
		legend string
	}{
		{"active", "plot", activePeak, "Allocation"},
		{"segments", "plot", segPeak, "Segment (one cudaMalloc"},
		{"private", "plot", 0, "Private pool"},
		{"state", "state-canvas", 0, ""},
		{"settings", "", 0, ""},
	} {
		t.Run(tc.view, func(t *testing.T) {
			// A new hash on the same page keeps the last view's ready flag
			// until the hashchange handler runs (and a late window of the
			// last view may set it again): wait for the flag once the page
			// is on the new view, whose handler clears it in the same task.
			if err := chromedp.Run(ctx, chromedp.Evaluate(`document.body && (document.body.dataset.ready = '')`, nil),
				chromedp.Navigate(fmt.Sprintf("%s#file=0&device=%d&view=%s", url, dev, tc.view)),
				chromedp.Poll(fmt.Sprintf(`window.gpumem.S.p.view === %q && document.body.dataset.ready === '1'`, tc.view), nil,
					chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
				t.Fatal(err)
			}
			if tc.canvas != "" {
				var n int
				if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, tc.canvas), &n)); err != nil {
					t.Fatal(err)
				}
				if n < 500 {
					t.Errorf("canvas #%s has %d coloured pixels; want a drawing", tc.canvas, n)
				}
			}
			if tc.legend != "" {
				if l := text(ctx, t, "#legend"); !strings.Contains(l, tc.legend) || !strings.Contains(l, "Reserved (segments)") {
					t.Errorf("legend %q lacks %q", l, tc.legend)
				}
			}
			if tc.peak > 0 {
				if got, want := text(ctx, t, "#peak"), units.VizShort(tc.peak); got != want {
					t.Errorf("peak shown %q, replay says %q", got, want)
				}
			}
			switch tc.view {
			case "settings":
				got := text(ctx, t, "#settings")
				want := "No allocator settings found."
				if s.AllocatorSettings != nil {
					want = "max_split_size"
				}
				if !strings.Contains(got, want) {
					t.Errorf("settings text %q lacks %q", got, want)
				}
			case "state":
				// The last event is selected: the state is the snapshot's.
				var alloc, res uint64
				for i := range s.Segments {
					if int(s.Segments[i].Device) != dev {
						continue
					}
					res += s.Segments[i].TotalSize
					for _, b := range s.SegmentBlocks(i) {
						if b.State != snapshot.BlockInactive {
							alloc += b.RequestedSize
						}
					}
				}
				want := fmt.Sprintf("(%s allocated / %s reserved)", units.Viz(alloc), units.Viz(res))
				if got := text(ctx, t, "#state-text"); got != want {
					t.Errorf("state totals %q, want %q", got, want)
				}
			}
			screenshot(ctx, t, tc.view)
		})
	}
}

// shotDir is where screenshots go: $GPUMEM_SHOTS when set (for looking at
// them), else a temporary directory, never the repository.
func shotDir(t *testing.T) string {
	if d := os.Getenv("GPUMEM_SHOTS"); d != "" {
		return d
	}
	return t.TempDir()
}

// screenshot saves the page as NAME.png under shotDir.
func screenshot(ctx context.Context, t *testing.T, name string) {
	var buf []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&buf, 100)); err == nil {
		_ = os.WriteFile(filepath.Join(shotDir(t), name+".png"), buf, 0o644)
	}
}

// curvesLoaded is true once the totals curves (which can raise the y
// scale) are drawn, so that coordinates taken now stay valid.
const curvesLoaded = `!document.getElementById('totals').checked || window.gpumem.S.curves !== null`

// bandCentre returns page coordinates inside the largest drawn polygon
// that the page's own hit test finds there (id -1 if none).
const bandCentre = `(() => {
  const S = window.gpumem.S, w = S.win, L = S.layoutPlot;
  const cand = [];
  for (let i = 0; i < w.n; i++) {
    if (w.kinds[i] !== 0) continue;
    let x0 = 1e9, x1 = -1e9, y0 = 1e9, y1 = -1e9;
    for (let k = w.starts[i]; k < w.starts[i+1]; k++) {
      const x = L.X(w.x0 + w.xs[k]), y = L.Y(w.ys[k]);
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
    }
    cand.push([(x1 - x0) * (y1 - y0), i, x0, x1, y0, y1]);
  }
  cand.sort((a, b) => b[0] - a[0]);
  const r = document.getElementById('plot').getBoundingClientRect();
  for (const [, i, x0, x1, y0, y1] of cand.slice(0, 50)) {
    for (let a = 1; a < 12; a++) for (let b = 1; b < 12; b++) {
      const px = x0 + (x1 - x0) * a / 12, py = y0 + (y1 - y0) * b / 12;
      if (window.gpumem.hitTest(px, py).id === w.ids[i]) return [w.ids[i], r.left + px, r.top + py];
    }
  }
  return [-1, 0, 0];
})()`

func TestHoverAndSearch(t *testing.T) {
	ctx, url, _ := serveReal(t)
	openPage(ctx, t, url+"#view=active")
	var pt []float64
	// The peak panel's answer makes the categories, which the details
	// then show too.
	if err := chromedp.Run(ctx, chromedp.Poll(curvesLoaded, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Poll(`document.querySelectorAll('#sites tr[data-site]').length > 0`, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(bandCentre, &pt)); err != nil {
		t.Fatal(err)
	}
	if pt[0] < 0 {
		t.Fatal("no band wide enough to hover")
	}
	if err := chromedp.Run(ctx, chromedp.MouseEvent(input.MouseMoved, pt[1], pt[2]),
		chromedp.Poll(`document.getElementById('details').textContent.startsWith('Addr: ')`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("hover showed no details: %v", err)
	}
	details := text(ctx, t, "#details")
	// The text must be the server's context for that element, stack
	// included, and its category with gpumem peak's reason.
	var want string
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`fetch('api/elem?view=active&id=%d').then(r => r.json()).then(j => j.text + '\ncategory: ' + j.category + ' (' + j.category_reason + ')')`, int(pt[0])), &want,
		func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(details) != strings.TrimSpace(want) {
		t.Errorf("hover details:\n%s\nwant:\n%s", details, want)
	}
	frame := regexp.MustCompile(`(?m)^[^\n:]+\.py:\d+:(\w+)$`).FindStringSubmatch(details)
	if frame == nil {
		t.Fatalf("details have no Python frame:\n%s", details)
	}

	// Searching for that frame's function name highlights matches.
	if err := chromedp.Run(ctx, chromedp.SendKeys("#search-frame", frame[1], chromedp.ByQuery),
		chromedp.Poll(`/match/.test(document.getElementById('frame-count').textContent)`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("search showed no count: %v", err)
	}
	label := text(ctx, t, "#frame-count")
	var n int
	if _, err := fmt.Sscanf(strings.ReplaceAll(label, ",", ""), "%d", &n); err != nil || n < 1 {
		t.Errorf("match label %q, want at least 1 match", label)
	}
	var hl int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.gpumem.S.frameMatch.size`, &hl)); err != nil || hl != n {
		t.Errorf("%d highlighted elements, label says %d (%v)", hl, n, err)
	}
	screenshot(ctx, t, "hover-search")
}

func TestStateHistorySelect(t *testing.T) {
	ctx, url, s := serveReal(t)
	openPage(ctx, t, url+"#view=state")
	var total int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.gpumem.S.eventsTotal`, &total)); err != nil || total < 3 {
		t.Fatalf("events total %d (%v)", total, err)
	}
	// Two ArrowUp presses select event total-3; then click on a row.
	if err := chromedp.Run(ctx, chromedp.KeyEvent(kb.ArrowUp), chromedp.Sleep(200*time.Millisecond), chromedp.KeyEvent(kb.ArrowUp),
		chromedp.Poll(fmt.Sprintf(`window.gpumem.S.stateIdx === %d && window.gpumem.S.state.index === %d`, total-3, total-3), nil,
			chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("ArrowUp did not select event %d: %v", total-3, err)
	}
	got := text(ctx, t, "#state-text")
	want := expectedState(t, s, total-3)
	if got != want {
		t.Errorf("after ArrowUp x2: %q, want %q", got, want)
	}
	if !strings.Contains(text(ctx, t, "#state-stack"), got) {
		t.Errorf("stack pane lacks the totals line")
	}
}

// expectedState is the totals line after event idx, from replay's state
// history when it is available, else from undoing the trace here.
func expectedState(t *testing.T, s *snapshot.Snapshot, idx int) (out string) {
	dev := 0
	for d := range s.Traces {
		if len(s.Traces[d].Events) > len(s.Traces[dev].Events) {
			dev = d
		}
	}
	defer func() {
		if recover() != nil {
			out = undoTotals(s, dev, idx)
		}
	}()
	st := replay.NewHistory(s, dev).StateAt(idx)
	return fmt.Sprintf("(%s allocated / %s reserved)", units.Viz(st.Allocated), units.Viz(st.Reserved))
}

// undoTotals is memory_viz's simulate_memory reduced to its two totals.
func undoTotals(s *snapshot.Snapshot, dev, idx int) string {
	blocks := map[uint64]uint64{}
	var reserved uint64
	for i := range s.Segments {
		if int(s.Segments[i].Device) != dev {
			continue
		}
		reserved += s.Segments[i].TotalSize
		for _, b := range s.SegmentBlocks(i) {
			if b.State != snapshot.BlockInactive {
				blocks[b.Addr] = b.RequestedSize
			}
		}
	}
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
			reserved += e.Size
		case snapshot.ActionSegmentAlloc, snapshot.ActionSegmentMap:
			reserved -= e.Size
		}
	}
	var alloc uint64
	for _, v := range blocks {
		alloc += v
	}
	return fmt.Sprintf("(%s allocated / %s reserved)", units.Viz(alloc), units.Viz(reserved))
}

// writePage writes the offline page of s (gpumem html) to a temporary file.
func writePage(t *testing.T, name string, s *snapshot.Snapshot, opt web.HTMLOptions) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.html")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := web.WriteHTML(f, name, s, opt); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestHTMLExportOffline(t *testing.T) {
	name, s := loadReal(t)
	ctx := newBrowser(t)
	out := writePage(t, name, s, web.HTMLOptions{Device: -1})
	activePeak, _ := replay.Peaks(s, s.DefaultDevice())
	for _, view := range []string{"active", "segments", "state"} {
		t.Run(view, func(t *testing.T) {
			canvas := "plot"
			if view == "state" {
				canvas = "state-canvas"
			}
			if err := chromedp.Run(ctx, network.Enable(), network.EmulateNetworkConditions(true, 0, 0, 0),
				chromedp.Evaluate(`document.body && (document.body.dataset.ready = '')`, nil), // see TestViewsRender
				chromedp.Navigate("file://"+out+"#view="+view),
				chromedp.ActionFunc(func(ctx context.Context) error { return waitReady(ctx) })); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, canvas), &n)); err != nil {
				t.Fatal(err)
			}
			if n < 500 {
				t.Errorf("offline %s canvas has %d coloured pixels", view, n)
			}
			if view == "active" {
				if got, want := text(ctx, t, "#peak"), units.VizShort(activePeak); got != want {
					t.Errorf("offline peak %q, want %q", got, want)
				}
			}
			if view == "state" {
				// The page applies the state history gpumem html embedded:
				// step back two events and compare with replay.
				var total int
				if err := chromedp.Run(ctx, chromedp.Evaluate(`window.gpumem.S.eventsTotal`, &total),
					chromedp.KeyEvent(kb.ArrowUp), chromedp.Sleep(100*time.Millisecond), chromedp.KeyEvent(kb.ArrowUp),
					chromedp.Poll(`window.gpumem.S.state && window.gpumem.S.state.index === window.gpumem.S.eventsTotal - 3`, nil,
						chromedp.WithPollingTimeout(10*time.Second))); err != nil {
					t.Fatalf("offline ArrowUp: %v", err)
				}
				if got, want := text(ctx, t, "#state-text"), expectedState(t, s, total-3); got != want {
					t.Errorf("offline state after %d: %q, want %q", total-3, got, want)
				}
			}
			if e := text(ctx, t, "#error"); strings.TrimSpace(e) != "" {
				t.Errorf("offline page shows an error: %s", e)
			}
			screenshot(ctx, t, "offline-"+view)
		})
	}
}

// TestHTMLOfflineStateMatchesServer: the offline page's Allocator State
// History (precomputed by gpumem html) shows, at several events, the very
// state and totals that gpumem serve's /api/state answers.
func TestHTMLOfflineStateMatchesServer(t *testing.T) {
	name, s := loadReal(t)
	ctx := newBrowser(t)
	out := writePage(t, name, s, web.HTMLOptions{View: "state", Device: -1})
	url := startServer(t, name, s)
	dev := s.DefaultDevice()
	total := len(s.Traces[dev].Viz)
	type state struct {
		Index                      int
		Allocated, Reserved        float64
		BlockBytes, Rounding       float64
		Free                       float64 `json:"free"`
		LargestFree, Fragmentation float64
		Text, Event                string
		Segments                   []struct {
			Addr            string
			Size            float64
			Stream, Version int
			Pool            []int64
			Blocks          [][]any
		}
	}
	for _, idx := range []int{total - 1, total - 3, 2 * total / 3, total / 2, total / 5, 1, 0, -1} {
		var js string
		if err := chromedp.Run(ctx, network.Enable(), network.EmulateNetworkConditions(true, 0, 0, 0),
			chromedp.Navigate("about:blank"),
			chromedp.Navigate(fmt.Sprintf("file://%s#view=state&event=%d", out, idx)),
			chromedp.ActionFunc(func(ctx context.Context) error { return waitReady(ctx) }),
			chromedp.Poll(fmt.Sprintf(`window.gpumem.S.state && window.gpumem.S.state.index === %d`, idx), nil,
				chromedp.WithPollingTimeout(10*time.Second)),
			chromedp.Evaluate(`JSON.stringify(window.gpumem.S.state)`, &js)); err != nil {
			t.Fatalf("offline state after %d: %v", idx, err)
		}
		var off, srv state
		if err := json.Unmarshal([]byte(js), &off); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(fmt.Sprintf("%sapi/state?file=0&device=%d&idx=%d", url, dev, idx))
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&srv)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(off.Fragmentation-srv.Fragmentation) > 1e-6 {
			t.Errorf("after %d: offline fragmentation %v, served %v", idx, off.Fragmentation, srv.Fragmentation)
		}
		off.Fragmentation, srv.Fragmentation = 0, 0
		// The offline page has the event as its list shows it, on one line.
		if strings.Join(strings.Fields(off.Event), " ") != strings.Join(strings.Fields(srv.Event), " ") {
			t.Errorf("after %d: offline event %q, served %q", idx, off.Event, srv.Event)
		}
		off.Event, srv.Event = "", ""
		if !reflect.DeepEqual(off, srv) {
			a, _ := json.Marshal(off)
			b, _ := json.Marshal(srv)
			t.Errorf("after event %d the offline state differs from the served one:\noffline %.400s\nserved  %.400s", idx, a, b)
		}
		if len(srv.Segments) == 0 && idx == total-1 {
			t.Errorf("no segments at the end of the trace")
		}
		if !strings.Contains(text(ctx, t, "#state-text"), srv.Text) {
			t.Errorf("after %d the page shows %q, served %q", idx, text(ctx, t, "#state-text"), srv.Text)
		}
	}
}

// dropFile fires a drop of a file with the given bytes on the page, as a
// user dragging a snapshot from the desktop would.
const dropFile = `(() => {
  const bytes = Uint8Array.from(atob(%q), c => c.charCodeAt(0));
  const dt = new DataTransfer();
  dt.items.add(new File([bytes], %q));
  document.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
  return true;
})()`

func TestDropUpload(t *testing.T) {
	ctx, url, _ := serveReal(t)
	good, err := os.ReadFile(filepath.Join(corpus.Dir(t), "DocuBox__dump_snapshot.pickle"))
	if err != nil {
		t.Fatalf("small snapshot: %v", err)
	}
	openPage(ctx, t, url+"#view=active")
	// A bad file: the page says why, the server keeps running.
	var ok bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(dropFile, base64.StdEncoding.EncodeToString([]byte("not a snapshot")), "bad.pickle"), &ok),
		chromedp.Poll(`!document.getElementById('error').hidden`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("no error shown for a bad drop: %v", err)
	}
	if e := text(ctx, t, "#error"); !strings.Contains(e, "Could not open bad.pickle") || !strings.Contains(e, "not a PyTorch memory snapshot") {
		t.Errorf("error banner %q", e)
	}
	// A real one opens as a second file.
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(dropFile, base64.StdEncoding.EncodeToString(good), "docubox.pickle"), &ok),
		chromedp.Poll(`window.gpumem.S.files.length === 2 && window.gpumem.S.p.file === 1 && document.body.dataset.ready === '1'`, nil,
			chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		t.Fatalf("dropped snapshot did not open: %v", err)
	}
	if sum := text(ctx, t, "#summary"); !strings.Contains(sum, "docubox.pickle") {
		t.Errorf("summary after drop: %q", sum)
	}
	// The address is written once the first frame of the new file is shown.
	if err := chromedp.Run(ctx, chromedp.Poll(`location.hash.includes('file=1')`, nil, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		var hash string
		_ = chromedp.Run(ctx, chromedp.Evaluate(`location.hash`, &hash))
		t.Errorf("location.hash %q does not name the new file (%v)", hash, err)
	}
}

// TestNoTraceSnapshot opens a snapshot without trace events: the timeline
// shows the blocks alive at dump time and says so.
func TestNoTraceSnapshot(t *testing.T) {
	dir := corpus.Dir(t)
	s, err := snapshot.Open(filepath.Join(dir, "DocuBox__dump_snapshot.pickle"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	url := startServer(t, "docubox.pickle", s)
	openPage(ctx, t, url+"#view=active")
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, "plot"), &n)); err != nil {
		t.Fatal(err)
	}
	if n < 500 {
		t.Errorf("trace-less timeline has %d coloured pixels", n)
	}
	active, _ := replay.Peaks(s, 0)
	if got, want := text(ctx, t, "#peak"), units.VizShort(active); got != want {
		t.Errorf("peak %q, want %q", got, want)
	}
	if sum := text(ctx, t, "#summary"); !strings.Contains(sum, "no trace events") {
		t.Errorf("summary %q does not say the trace is empty", sum)
	}
}

// TestURLStateAndTimeAxis opens a shared link (window and pinned selection
// in location.hash) and switches the x axis to wall-clock time.
func TestURLStateAndTimeAxis(t *testing.T) {
	ctx, url, _ := serveReal(t)
	openPage(ctx, t, url+"#view=active")
	var pt []float64
	if err := chromedp.Run(ctx, chromedp.Poll(curvesLoaded, nil, chromedp.WithPollingTimeout(30*time.Second)), chromedp.Evaluate(bandCentre, &pt)); err != nil || pt[0] < 0 {
		t.Fatalf("no band to select (%v)", err)
	}
	id := int(pt[0])
	var total float64
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.gpumem.S.hi`, &total)); err != nil {
		t.Fatal(err)
	}
	// A query string makes this a full page load, as when a link is opened.
	link := fmt.Sprintf("%s?shared#file=0&view=active&x0=%d&x1=%d&sel=%d", url, int(total/4), int(total/2), id)
	if err := chromedp.Run(ctx, chromedp.Navigate(link),
		chromedp.ActionFunc(func(ctx context.Context) error { return waitReady(ctx) }),
		chromedp.Poll(`document.getElementById('details').textContent.startsWith('Addr: ')`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("shared link: %v", err)
	}
	var win []float64
	if err := chromedp.Run(ctx, chromedp.Evaluate(`[window.gpumem.S.x0, window.gpumem.S.x1, window.gpumem.S.selId]`, &win)); err != nil {
		t.Fatal(err)
	}
	if int(win[0]) != int(total/4) || int(win[1]) != int(total/2) || int(win[2]) != id {
		t.Errorf("shared link restored window %v..%v selection %v; want %d..%d selection %d", win[0], win[1], win[2], int(total/4), int(total/2), id)
	}
	// Wall-clock axis.
	if err := chromedp.Run(ctx, chromedp.SetValue("#mode", "time", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('mode').dispatchEvent(new Event('change')); true`, nil),
		chromedp.Poll(`location.hash.includes('mode=time') && document.body.dataset.ready === '1'`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("time axis: %v", err)
	}
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, "plot"), &n)); err != nil || n < 500 {
		t.Errorf("time-axis timeline has %d coloured pixels (%v)", n, err)
	}
}

// TestLoadingProgress: as gpumem serve does, the page opens while the
// snapshot is still decoding; it shows the file's progress, then draws
// the timeline once the file is ready.
func TestLoadingProgress(t *testing.T) {
	name, s := loadReal(t)
	ctx := newBrowser(t)
	srv := web.New(web.Options{})
	release := make(chan struct{})
	id, done := srv.Load(name, func(opt *snapshot.Options) (*snapshot.Snapshot, error) {
		opt.Progress(25<<20, 100<<20)
		<-release
		return s, nil
	})
	srv.Warm(id)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetAddr(strings.TrimPrefix(hs.URL, "http://"))
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	if err := chromedp.Run(ctx, chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible("#loading", chromedp.ByID)); err != nil {
		t.Fatal(err)
	}
	if got, want := text(ctx, t, "#loading"), "Loading "+name+": 25.0MiB of 100.0MiB (25%)"; !strings.HasPrefix(got, want) {
		t.Errorf("loading message %q, want %q…", got, want)
	}
	var ready string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.body.dataset.ready || ''`, &ready)); err != nil || ready == "1" {
		t.Errorf("page ready (%q, %v) before the file was loaded", ready, err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := waitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, "plot"), &n)); err != nil {
		t.Fatal(err)
	}
	var hidden bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById('loading').hidden`, &hidden)); err != nil {
		t.Fatal(err)
	}
	if n < 500 || !hidden {
		t.Errorf("after loading: %d coloured pixels, loading message hidden %v; want a drawing and no message", n, hidden)
	}
}

// drawnLabels redraws the plot and returns the text it painted on the
// canvas (the axis labels are drawn there, not in the DOM).
const drawnLabels = `(() => {
  const labels = [], proto = CanvasRenderingContext2D.prototype, orig = proto.fillText;
  proto.fillText = function (t, ...rest) { labels.push(String(t)); return orig.call(this, t, ...rest); };
  try { window.gpumem.setWindow(window.gpumem.S.lo, window.gpumem.S.hi); } finally { proto.fillText = orig; }
  return labels;
})()`

// TestScreensExplain checks what tells a new user how to read the page:
// byte units on the y axis and a named x axis, the help overlay with the
// keys, and the message of a device with nothing to draw.
func TestScreensExplain(t *testing.T) {
	ctx, url, _ := serveReal(t)
	openPage(ctx, t, url+"#view=active")
	var labels []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(drawnLabels, &labels)); err != nil {
		t.Fatal(err)
	}
	units, timestep := 0, false
	for _, l := range labels {
		if regexp.MustCompile(`^[0-9.]+ ?(B|KiB|MiB|GiB|TiB)$`).MatchString(l) {
			units++
		}
		timestep = timestep || l == "timestep"
	}
	if units < 3 || !timestep {
		t.Errorf("axis labels %q: want several sizes in B/KiB/MiB/GiB and a \"timestep\" axis", labels)
	}

	press := func(key string) {
		if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`document.dispatchEvent(new KeyboardEvent('keydown', {key: %q, bubbles: true}))`, key), nil)); err != nil {
			t.Fatal(err)
		}
	}
	var hidden bool
	press("?")
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById('help').hidden`, &hidden)); err != nil || hidden {
		t.Fatalf("? did not open the help (%v)", err)
	}
	if h := text(ctx, t, "#help"); !strings.Contains(h, "Zoom in") || !strings.Contains(h, "Previous / next event") || !strings.Contains(h, "Esc") {
		t.Errorf("help lacks the keys: %q", h)
	}
	press("Escape")
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById('help').hidden`, &hidden)); err != nil || !hidden {
		t.Errorf("Esc did not close the help (%v)", err)
	}

	// A device whose trace is empty and whose segments hold no live block.
	empty := &snapshot.Snapshot{
		Segments: []snapshot.Segment{{Device: 0, Address: 1 << 30, TotalSize: 2 << 20, FirstBlock: 0, NumBlocks: 1}},
		Blocks:   []snapshot.Block{{Addr: 1 << 30, Size: 2 << 20, State: snapshot.BlockInactive}},
		Traces:   []snapshot.Trace{{}},
		Strings:  []string{""},
		Streams:  []int64{0},
		Stacks:   snapshot.StackTable{Offsets: []int32{0, 0}},
	}
	url = startServer(t, "empty.pickle", empty)
	openPage(ctx, t, url+"#view=active")
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById('empty').hidden`, &hidden)); err != nil || hidden {
		t.Fatalf("no empty-state message shown (%v)", err)
	}
	if m := text(ctx, t, "#empty"); !strings.Contains(m, "Device 0 has no allocations") {
		t.Errorf("empty-state message %q", m)
	}
}

// findAllocations lists, for each drawn allocation whose polygon is size
// bytes tall (its bottom and top at the first point), its id and page
// coordinates inside it where the page's own hit test finds it.
const findAllocations = `((size) => {
  const S = window.gpumem.S, w = S.win, L = S.layoutPlot;
  const r = document.getElementById('plot').getBoundingClientRect();
  const out = [];
  polygons: for (let i = 0; i < w.n; i++) {
    const s = w.starts[i], e = w.starts[i + 1];
    if (w.kinds[i] !== 0 || Math.abs(w.ys[e - 1] - w.ys[s] - size) > size * 1e-3) continue;
    for (let k = s; k + 1 < e; k++) { // along the bottom edge, in view
      const xa = Math.max(w.x0 + w.xs[k], S.x0), xb = Math.min(w.x0 + w.xs[k + 1], S.x1);
      if (!(xb > xa)) continue;
      for (const f of [0.25, 0.5, 0.75]) {
        const xd = xa + (xb - xa) * f, t = (xd - w.x0 - w.xs[k]) / (w.xs[k + 1] - w.xs[k]);
        const x = L.X(xd);
        const y = L.Y(w.ys[k] + (w.ys[k + 1] - w.ys[k]) * t + size / 2);
        if (y < 14 || y > L.ph) continue;
        const hit = window.gpumem.hitTest(x, y);
        if (hit.id === w.ids[i]) { out.push([w.ids[i], r.left + x, r.top + y]); continue polygons; }
      }
    }
  }
  return out;
})`

// TestDetailAndZoom2D: memory_viz's acceptance on a real snapshot. The
// whole view draws every allocation (7,801, fewer than Detail) as its own
// polygon; zoomed into [0, 2 GiB] over the first 2,000 timesteps, the y
// labels follow the band and hovering inside a 25 MiB allocation shows its
// size and stack.
func TestDetailAndZoom2D(t *testing.T) {
	const name = "cs336-notHanmin__memory_snapshot.pickle"
	s, err := snapshot.Open(filepath.Join(corpus.Dir(t), name), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	url := startServer(t, name, s)
	openPage(ctx, t, url+"#view=active")
	var drawn []int
	if err := chromedp.Run(ctx, chromedp.Poll(curvesLoaded, nil, chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`[window.gpumem.drawn, window.gpumem.S.win.n, window.gpumem.S.win.summarized, window.gpumem.S.meta.elements]`, &drawn)); err != nil {
		t.Fatal(err)
	}
	if drawn[0] != 7801 || drawn[1] != 7801 || drawn[2] != 0 || drawn[3] != 7801 {
		t.Errorf("whole view: %d polygons drawn of %d in the window, %d summarised, %d allocations; want 7801, 7801, 0, 7801", drawn[0], drawn[1], drawn[2], drawn[3])
	}
	if got := text(ctx, t, "#summarized"); !strings.Contains(got, "every allocation in view is drawn") {
		t.Errorf("legend says %q", got)
	}

	// Zoom into the band [0, 2 GiB] over the first 2,000 timesteps.
	const gib2 = 2 << 30
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`window.gpumem.setView(0, 2000, 0, %d); true`, gib2), nil),
		chromedp.Poll(fmt.Sprintf(`(() => { const w = window.gpumem.S.win; return w.x1 === 2000 && w.y1 === %d && document.body.dataset.ready === '1'; })()`, gib2), nil,
			chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("zoom: %v", err)
	}
	pts := inBand(ctx, t)
	// One with a recorded Python stack if there is one; in this band they
	// are parameters allocated before recording began, whose stack is
	// memory_viz's "This block has no frames" text.
	pt := pts[0]
	var want string
	for k, p := range pts {
		var text string
		if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`fetch('api/elem?view=active&id=%d').then(r => r.json()).then(j => j.text)`, int(p[0])), &text,
			func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
			t.Fatal(err)
		}
		if k == 0 || pyFrame.MatchString(text) {
			pt, want = p, text
		}
		if pyFrame.MatchString(text) {
			break
		}
	}
	if err := chromedp.Run(ctx, chromedp.MouseEvent(input.MouseMoved, pt[1], pt[2]),
		chromedp.Poll(`document.getElementById('details').textContent.includes('Size: 25.0MiB')`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("hovering the 25 MiB allocation: %v; details %q", err, text(ctx, t, "#details"))
	}
	details := text(ctx, t, "#details")
	// The allocation's own text (in a list when a neighbour shares the
	// pixel under the cursor), with its stack.
	if !strings.Contains(details, strings.TrimSpace(want)) || !(pyFrame.MatchString(details) || strings.Contains(details, "This block has no frames")) {
		t.Errorf("details:\n%s\nwant the server's text with the stack:\n%s", details, want)
	}
	if !strings.Contains(location(ctx, t), "y1=2147483648") {
		t.Errorf("the address lacks the y window: %s", location(ctx, t))
	}
	screenshot(ctx, t, "zoom-2d")
}

// inBand checks, once the page shows [0, 2 GiB] of cs336-notHanmin, that
// the y labels follow the band, and returns the 25 MiB allocations drawn
// there (findAllocations).
func inBand(ctx context.Context, t *testing.T) [][]float64 {
	t.Helper()
	var labels []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`window.gpumem.yLabels`, &labels)); err != nil {
		t.Fatal(err)
	}
	if len(labels) < 3 || labels[len(labels)-1] != "2.0GiB" || !strings.HasSuffix(labels[1], "MiB") {
		t.Errorf("y labels in the band: %v; want MiB steps up to 2.0GiB", labels)
	}
	var pts [][]float64
	if err := chromedp.Run(ctx, chromedp.Evaluate(findAllocations+fmt.Sprintf("(%d)", 25<<20), &pts)); err != nil {
		t.Fatal(err)
	}
	if len(pts) == 0 {
		t.Fatal("no 25 MiB allocation drawn in the band")
	}
	return pts
}

// pyFrame matches a Python frame line of a details text.
var pyFrame = regexp.MustCompile(`(?m)^[^\n:]+\.py:\d+:\w+$`)

func location(ctx context.Context, t *testing.T) string {
	var s string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`location.hash`, &s)); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHTMLExportZoomBand: the page "gpumem html" writes zooms in x and y
// offline, on its embedded data, and hovers what is in the band.
func TestHTMLExportZoomBand(t *testing.T) {
	const name = "cs336-notHanmin__memory_snapshot.pickle"
	s, err := snapshot.Open(filepath.Join(corpus.Dir(t), name), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	out := writePage(t, name, s, web.HTMLOptions{Device: -1, View: "active"})
	const gib2 = 2 << 30
	if err := chromedp.Run(ctx, network.Enable(), network.EmulateNetworkConditions(true, 0, 0, 0),
		chromedp.Navigate("file://"+out+"#view=active"),
		chromedp.ActionFunc(func(ctx context.Context) error { return waitReady(ctx) }),
		chromedp.Evaluate(fmt.Sprintf(`window.gpumem.setView(0, 2000, 0, %d); true`, gib2), nil),
		chromedp.Poll(`document.body.dataset.ready === '1' && window.gpumem.S.x1 === 2000`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal(err)
	}
	// The band is rasterized anew, not the whole view's layer scaled up
	// (the page moves the last layer only while a window is on its way).
	// One more zoom once the page has settled (nothing else redraws it).
	if err := chromedp.Run(ctx, chromedp.Poll(fmt.Sprintf(`window.gpumem.layerView().join() === '0,2000,0,%d'`, gib2), nil,
		chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.Sleep(300*time.Millisecond),
		chromedp.Evaluate(`window.gpumem.setView(0, 1000, 0, 1 << 30); true`, nil),
		chromedp.Poll(`window.gpumem.layerView().join() === '0,1000,0,1073741824'`, nil, chromedp.WithPollingTimeout(3*time.Second))); err != nil {
		var layer []float64
		_ = chromedp.Run(ctx, chromedp.Evaluate(`window.gpumem.layerView()`, &layer))
		t.Fatalf("the plot's layer was drawn for the view %v, want [0 1000 0 1073741824]: %v", layer, err)
	}
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`window.gpumem.setView(0, 2000, 0, %d); true`, gib2), nil),
		chromedp.Poll(fmt.Sprintf(`window.gpumem.layerView().join() === '0,2000,0,%d'`, gib2), nil, chromedp.WithPollingTimeout(3*time.Second))); err != nil {
		t.Fatal(err)
	}
	pts := inBand(ctx, t)
	if err := chromedp.Run(ctx, chromedp.MouseEvent(input.MouseMoved, pts[0][1], pts[0][2]),
		chromedp.Poll(`document.getElementById('details').textContent.includes('Size: 25.0MiB')`, nil, chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("offline hover: %v; details %q", err, text(ctx, t, "#details"))
	}
	if e := text(ctx, t, "#error"); strings.TrimSpace(e) != "" {
		t.Errorf("offline page shows an error: %s", e)
	}
	screenshot(ctx, t, "offline-zoom-band")
}

// TestViewSwitchByAddress: changing the address's view, as a link or the
// user would, right after a view drew (while the page still writes its own
// address) opens the new view; the page used to overwrite the new address
// with the old view's and stay.
func TestViewSwitchByAddress(t *testing.T) {
	ctx, url, _ := serveReal(t)
	openPage(ctx, t, url+"#view=active")
	for k := 0; k < 4; k++ {
		for _, v := range []string{"segments", "private", "active"} {
			if err := chromedp.Run(ctx, chromedp.Navigate(fmt.Sprintf("%s#file=0&view=%s", url, v)),
				chromedp.Poll(fmt.Sprintf(`window.gpumem.S.p.view === %q && document.body.dataset.ready === '1'`, v), nil,
					chromedp.WithPollingTimeout(10*time.Second))); err != nil {
				t.Fatalf("round %d, view %s: %v", k, v, err)
			}
		}
	}
}
