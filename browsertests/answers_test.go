package browsertests

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/snapshot"
)

// TestColourByCategory: "Colour by: category" colours the allocations by
// their category and the legend lists exactly the categories present.
func TestColourByCategory(t *testing.T) {
	ctx, url, s := serveReal(t)
	openPage(ctx, t, url+"#view=active")
	var names []string
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#colorby", "category", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('colorby').dispatchEvent(new Event('change'))`, nil),
		chromedp.Poll(`document.querySelectorAll('#legend .cls').length > 0`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`[...document.querySelectorAll('#legend .cls')].map(e => e.textContent)`, &names)); err != nil {
		t.Fatalf("no category legend: %v", err)
	}
	d := analysis.NewDevice(s, s.DefaultDevice())
	seen := map[string]bool{}
	for i := range d.Active.Len() {
		seen[d.Category(i).String()] = true
	}
	var want []string
	for n := range seen {
		want = append(want, n)
	}
	sort.Strings(want)
	sort.Strings(names)
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("legend categories %v, want those present %v", names, want)
	}
	var loc string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`location.hash`, &loc)); err != nil || !strings.Contains(loc, "color=category") {
		t.Errorf("address %q keeps no colour (%v)", loc, err)
	}
	screenshot(ctx, t, "colour-by-category")
}

// TestPeakPanel: the panel answers gpumem peak (the live bytes at the
// peak, its sites) and clicking a row highlights that site's allocations.
func TestPeakPanel(t *testing.T) {
	ctx, url, s := serveReal(t)
	openPage(ctx, t, url+"#view=active")
	var live string
	var rows int
	if err := chromedp.Run(ctx,
		chromedp.Poll(`document.querySelectorAll('#sites tr[data-site]').length > 0`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text("#answer-live", &live, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll('#sites tr[data-site]').length`, &rows)); err != nil {
		t.Fatalf("no peak panel: %v", err)
	}
	d := analysis.NewDevice(s, s.DefaultDevice())
	m, _ := d.Resolve("peak")
	a := d.LiveAnswer(m, analysis.LiveOptions{Top: 20})
	var want string
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`window.gpumem.formatSize(%d, false)`, a.LiveBytes), &want)); err != nil {
		t.Fatal(err)
	}
	if live != want || rows != len(a.Sites) {
		t.Errorf("panel: live %q, %d sites; gpumem peak: %q, %d sites", live, rows, want, len(a.Sites))
	}
	// Each site says why it has its category: the rule under the name,
	// the whole reason on hover (gpumem peak's category_reason).
	var why, rule string
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`document.querySelector('#sites tr[data-site="0"] td.cat').title`, &why),
		chromedp.Evaluate(`document.querySelector('#sites tr[data-site="0"] td.cat .why').textContent`, &rule)); err != nil {
		t.Fatal(err)
	}
	if why != a.Sites[0].CategoryReason || !strings.HasPrefix(why, rule+": ") {
		t.Errorf("first site's reason %q (rule %q), gpumem peak's %q", why, rule, a.Sites[0].CategoryReason)
	}
	var hl int
	if err := chromedp.Run(ctx,
		chromedp.Click(`#sites tr[data-site="0"]`, chromedp.ByQuery),
		chromedp.Poll(`window.gpumem.S.siteMatch.size > 0`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate(`window.gpumem.S.siteMatch.size`, &hl)); err != nil {
		t.Fatalf("clicking a site highlighted nothing: %v", err)
	}
	if hl != a.Sites[0].Count {
		t.Errorf("%d allocations highlighted, the site has %d", hl, a.Sites[0].Count)
	}
	screenshot(ctx, t, "peak-panel")
}

// TestOOMMarkerVerdict: clicking the OOM marker of a snapshot with an OOM
// shows gpumem oom's verdict.
func TestOOMMarkerVerdict(t *testing.T) {
	path := filepath.Join("..", "internal", "analysis", "testdata", "oom-fragmentation.json")
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	url := startServer(t, "oom-fragmentation.json", s)
	openPage(ctx, t, url+"#view=active")
	var xy []float64
	if err := chromedp.Run(ctx,
		chromedp.Poll(`(window.gpumem.S.meta.markers || []).some(m => m.kind === 'oom') && window.gpumem.S.layoutPlot !== null`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`(() => {
			const S = window.gpumem.S, m = S.meta.markers.find(m => m.kind === 'oom');
			const r = document.getElementById('plot').getBoundingClientRect();
			return [r.left + S.layoutPlot.X(m.event), r.top + r.height / 2];
		})()`, &xy)); err != nil {
		t.Fatalf("no OOM marker: %v", err)
	}
	var verdict string
	if err := chromedp.Run(ctx,
		chromedp.MouseClickXY(xy[0], xy[1]),
		chromedp.Poll(`document.getElementById('oom-verdict') !== null`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Text("#oom-verdict", &verdict, chromedp.ByQuery)); err != nil {
		t.Fatalf("clicking the OOM marker showed no verdict: %v", err)
	}
	if verdict != "fragmentation" {
		t.Errorf("verdict %q, want fragmentation", verdict)
	}
	if txt := text(ctx, t, "#answer"); !strings.Contains(txt, "expandable_segments:True avoids this OOM") {
		t.Errorf("answer lacks the replayed setting:\n%s", txt)
	}
	screenshot(ctx, t, "oom-verdict")
}

// TestFragmentationCurve: the Fragmentation switch draws the headline over
// the window, as the server's analysis computes it.
func TestFragmentationCurve(t *testing.T) {
	ctx, url, _ := serveReal(t)
	openPage(ctx, t, url+"#view=active&frag=1")
	var n int
	if err := chromedp.Run(ctx,
		chromedp.Poll(`window.gpumem.S.fragCurve && window.gpumem.S.fragCurve.xs.length > 1`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`window.gpumem.S.fragCurve.headline.filter(v => v >= 0 && v <= 1).length`, &n)); err != nil {
		var dbg string
		chromedp.Run(ctx, chromedp.Evaluate(`JSON.stringify([document.getElementById('error').textContent, document.getElementById('fragcurve').checked, location.hash, !!window.gpumem.S.fragCurve])`, &dbg))
		t.Fatalf("no fragmentation curve: %v (%s)", err, dbg)
	}
	if n < 2 || !strings.Contains(text(ctx, t, "#legend"), "Fragmentation") {
		t.Errorf("%d points in [0, 1]; legend %q", n, text(ctx, t, "#legend"))
	}
	screenshot(ctx, t, "fragmentation-curve")
}
