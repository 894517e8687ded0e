package browsertests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

// The curves of the Compare and What-if views, read as the user reads
// them: hovering over a canvas fills its readout, and what it says is
// checked against the CLI's answers and the timeline's curves.

// hover moves the mouse over the plot of canvas sel at each fraction of
// its width (0: its left edge, 1: its right) and returns what readout
// says after each move.
func hover(ctx context.Context, t *testing.T, sel, readout string, fracs []float64) []string {
	t.Helper()
	arg, _ := json.Marshal(fracs)
	js := fmt.Sprintf(`(() => {
  const c = document.querySelector(%q), out = document.querySelector(%q);
  const p = JSON.parse(c.dataset.plot), r = c.getBoundingClientRect();
  return %s.map(f => {
    c.dispatchEvent(new MouseEvent('mousemove', { clientX: r.left + p.left + f * (p.right - p.left), clientY: r.top + 20, bubbles: true }));
    return out.textContent;
  });
})()`, sel, readout, arg)
	var got []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &got)); err != nil {
		t.Fatal(err)
	}
	return got
}

// plotOf reads what canvas id says of its plot (dataset.plot) into v.
func plotOf(ctx context.Context, t *testing.T, id string, v any) {
	t.Helper()
	var js string
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`document.getElementById(%q).dataset.plot`, id), &js)); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(js), v); err != nil {
		t.Fatalf("%s's plot %q: %v", id, js, err)
	}
}

// whatIfReads hovers over every bucket of the What-if view's curves and
// returns the readouts and, per setting, the highest value its curve
// reads (as printed).
func whatIfReads(ctx context.Context, t *testing.T) (reads []string, highest map[string]string) {
	t.Helper()
	var plot struct{ Buckets int }
	plotOf(ctx, t, "wi-curves", &plot)
	t.Logf("%d buckets", plot.Buckets)
	if plot.Buckets < 50 {
		t.Fatalf("the curves have %d buckets", plot.Buckets)
	}
	fracs := make([]float64, plot.Buckets)
	for b := range fracs {
		fracs[b] = (float64(b) + 0.5) / float64(plot.Buckets)
	}
	reads = hover(ctx, t, "#wi-curves", "#wi-readout", fracs)
	most := map[string]uint64{}
	highest = map[string]string{}
	for b, r := range reads {
		lines := strings.Split(r, "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "events ") {
			t.Fatalf("bucket %d: readout %q", b, r)
		}
		for _, l := range lines[1:] {
			k := strings.LastIndex(l, ": ")
			if v := parseSize(t, l[k+2:]); v >= most[l[:k]] {
				most[l[:k]], highest[l[:k]] = v, l[k+2:]
			}
		}
	}
	return reads, highest
}

// evalAwait evaluates a promise-valued expression into v.
func evalAwait(ctx context.Context, t *testing.T, js string, v any) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, v, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
}

// poll waits for a condition of the page.
func poll(ctx context.Context, t *testing.T, cond string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.Poll(cond, nil, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("waiting for %s: %v", cond, err)
	}
}

// screenshotTall saves the whole view (a viewport tall enough for it).
func screenshotTall(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(1400, 1500)); err != nil {
		t.Fatal(err)
	}
	screenshot(ctx, t, name)
}

func parseSize(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := units.Parse(s)
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	return v
}

// TestWhatIfCurvesMatchSim: the What-if view's curves of the sweep on a
// real file. Hovering over every bucket, each setting's highest value is
// the peak reserved `gpumem sim --sweep --json` gives it, and the
// recorded curve is the timeline's reserved curve (/api/totals, the
// Active Memory Timeline's totals) bucket by bucket; a click on a row
// picks its curve.
func TestWhatIfCurvesMatchSim(t *testing.T) {
	paths, url := serveFiles(t, ctx128)
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=whatif&file=0&device=0")
	var sim struct {
		Events int `json:"events"`
		Sweep  []struct {
			Config string `json:"config"`
			Peak   uint64 `json:"peak_reserved_bytes"`
		} `json:"sweep"`
	}
	if err := json.Unmarshal([]byte(runGpumem(t, "sim", "--sweep", "--json", "--device", "0", paths[0])), &sim); err != nil || len(sim.Sweep) < 5 {
		t.Fatalf("sim --sweep --json: %v, %d settings", err, len(sim.Sweep))
	}
	reads, shown := whatIfReads(ctx, t)
	var tot struct {
		First    []int32  `json:"first_event"`
		Reserved []uint64 `json:"reserved_max"`
	}
	evalAwait(ctx, t, fmt.Sprintf(`fetch('api/totals?file=0&device=0&n=%d').then(r => r.json())`, len(reads)), &tot)
	if len(tot.Reserved) != len(reads) {
		t.Fatalf("timeline totals: %d buckets, the view %d", len(tot.Reserved), len(reads))
	}
	head := regexp.MustCompile(`^events (\d+)\.\.(\d+): recorded (.+)$`)
	for b, r := range reads {
		lines := strings.Split(r, "\n")
		m := head.FindStringSubmatch(lines[0])
		if m == nil || len(lines) != 1+len(sim.Sweep) {
			t.Fatalf("bucket %d: readout %q", b, r)
		}
		// The recorded curve is the timeline's, on the same events.
		if m[1] != fmt.Sprint(tot.First[b]) || m[3] != units.Human(tot.Reserved[b]) {
			t.Errorf("bucket %d: the view reads events %s.. recorded %s; the timeline's bucket: events %d.. reserved %s",
				b, m[1], m[3], tot.First[b], units.Human(tot.Reserved[b]))
		}
	}
	for _, s := range sim.Sweep {
		if got, want := shown[s.Config], units.Human(s.Peak); got != want {
			t.Errorf("%s: its curve's highest point reads %q, sim --sweep --json's peak reserved %s", s.Config, got, want)
		}
	}
	// A click on the third row picks its curve: the readout then names
	// only that setting.
	if err := chromedp.Run(ctx, chromedp.Click(`#wi-table tr[data-curve="2"] td`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	r := hover(ctx, t, "#wi-curves", "#wi-readout", []float64{0.5})[0]
	if lines := strings.Split(r, "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], sim.Sweep[2].Config+": ") {
		t.Errorf("after picking %s the readout says %q", sim.Sweep[2].Config, r)
	}
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, "wi-curves"), &n)); err != nil || n < 1500 {
		t.Errorf("the curves: %d coloured pixels (%v)", n, err)
	}
	screenshotTall(ctx, t, "whatif")
	// One setting: its curve's highest point is its replayed peak
	// reserved, the table's figure.
	if err := chromedp.Run(ctx, chromedp.SetValue(`#wi-mode`, "config", chromedp.ByQuery),
		chromedp.SetValue(`#wi-config`, "expandable_segments:True", chromedp.ByQuery), chromedp.Click(`#wi-run`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, `document.getElementById('wi-body').dataset.ready === '1' && !!document.getElementById('wi-curves')`)
	rows := tableRows(ctx, t, "#wi-table")
	_, one := whatIfReads(ctx, t)
	if len(one) != 1 || len(rows) == 0 || rows[0][0] != "peak reserved" {
		t.Fatalf("one setting: curves %v, table %q", one, rows)
	}
	for cfg, v := range one {
		if !strings.Contains(cfg, "expandable_segments:True") || v != rows[0][1] {
			t.Errorf("one setting: curve %q reaches %s, the table's replayed peak reserved %s", cfg, v, rows[0][1])
		}
	}
}

// TestWhatIfCurvesOOM: a run that stopped at an OOM on a 3 GiB device
// (gpumem synth; no real file in ../shared has an OOM in its trace) with
// the capacity the recorded OOM implies: each setting's curve is drawn,
// its highest point is its row's peak reserved, and the capacity is
// drawn across.
func TestWhatIfCurvesOOM(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "oom.pickle")
	runGpumem(t, "synth", "--model", "mlp", "--layers", "8", "--hidden", "8192", "--capacity", "3GiB", "-o", snap)
	s, err := snapshot.Open(snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := web.New(web.Options{})
	srv.Add("oom.pickle", s)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetAddr(strings.TrimPrefix(hs.URL, "http://"))
	ctx := newBrowser(t)
	openView(ctx, t, hs.URL+"/#view=whatif&file=0")
	// The recorded settings (no sweep) at the capacity of the OOM: whether
	// the OOM still happens under each setting.
	if err := chromedp.Run(ctx, chromedp.SetValue(`#wi-mode`, "recorded", chromedp.ByQuery), chromedp.SetValue(`#wi-capacity`, "oom", chromedp.ByQuery),
		chromedp.Click(`#wi-run`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, `document.getElementById('wi-body').dataset.ready === '1' && !!document.getElementById('wi-curves')`)
	rows := tableRows(ctx, t, "#wi-table")
	_, shown := whatIfReads(ctx, t)
	if len(rows) != 12 {
		t.Fatalf("%d settings, want the recorded one and the sweep's 11", len(rows))
	}
	for _, row := range rows {
		if shown[row[0]] != row[3] {
			t.Errorf("%s: curve's highest %q, its row's peak reserved %q", row[0], shown[row[0]], row[3])
		}
	}
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`(() => { const c = document.getElementById('wi-curves'), g = c.getContext('2d'), d = g.getImageData(0, 0, c.width, c.height).data;
  let n = 0; for (let i = 0; i < d.length; i += 4) if (Math.abs(d[i] - 0xcf) < 40 && Math.abs(d[i+1] - 0x22) < 40 && Math.abs(d[i+2] - 0x2e) < 40) n++; return n; })()`, &n)); err != nil || n < 300 {
		t.Errorf("the capacity line: %d pixels (%v)", n, err)
	}
	screenshotTall(ctx, t, "whatif-oom")
}

// TestCompareAlignsSteps: two runs of one model (octree-nca at two
// commits, 40 training steps each, found by gpumem steps from their
// repeating allocation pattern) aligned by step: hovering over the middle
// of step k reads step k of A and step k of B, on the events gpumem steps
// gives them.
func TestCompareAlignsSteps(t *testing.T) {
	paths, url := serveFiles(t, "octree-nca__my_snapshot__0072096f.pickle", "octree-nca__my_snapshot__1e496ac8.pickle")
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=compare&file=0")
	// The steps as gpumem steps prints them: their cells, and events.
	var cliRows [2][][]string
	stepRows := func(i int, path string) [][2]int {
		var out [][2]int
		for _, l := range strings.Split(runGpumem(t, "steps", path), "\n") {
			var k, a, b int
			if n, _ := fmt.Sscanf(l, "step %d %d..%d", &k, &a, &b); n == 3 && k == len(out) {
				out = append(out, [2]int{a, b})
				cliRows[i] = append(cliRows[i], cells(l))
			}
		}
		return out
	}
	sa, sb := stepRows(0, paths[0]), stepRows(1, paths[1])
	if len(sa) != 40 || len(sb) != 40 {
		t.Fatalf("gpumem steps: %d and %d steps", len(sa), len(sb))
	}
	if err := chromedp.Run(ctx, chromedp.SetValue(`#cmp-align`, "steps", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('cmp-align').dispatchEvent(new Event('change'))`, nil)); err != nil {
		t.Fatal(err)
	}
	if note := text(ctx, t, "#cmp-align-note"); !strings.HasPrefix(note, "Aligned by step: step k of A over step k of B for the first 40 steps (A: 40 from repeating allocation pattern; B: 40 from repeating allocation pattern)") {
		t.Errorf("note: %q", note)
	}
	// The step table: each step's name, events and peak in A and in B as
	// gpumem steps prints them, and B − A of the peaks.
	rows := tableRows(ctx, t, "#cmp-steps")
	if len(rows) != 40 {
		t.Fatalf("the step table has %d rows", len(rows))
	}
	for k, row := range rows {
		a, b := cliRows[0][k], cliRows[1][k]
		want := []string{a[0], a[1], a[3], b[1], b[3]}
		if fmt.Sprint(row[:5]) != fmt.Sprint(want) {
			t.Errorf("step %d: page %q, gpumem steps %q", k, row[:5], want)
		}
		pa, pb, d := parseSize(t, a[3]), parseSize(t, b[3]), row[5]
		if pb > pa && !strings.HasPrefix(d, "+") || pb < pa && !strings.HasPrefix(d, "-") || pa == pb && d != "0" {
			t.Errorf("step %d: B − A %q for %s and %s", k, d, a[3], b[3])
		}
	}
	// The step axis (from -1 when a run has events before its step 0, to
	// 41 when one has events after its step 39).
	var ax struct{ Lo, Hi float64 }
	if plotOf(ctx, t, "cmp-curves", &ax); ax.Hi-ax.Lo < 40 {
		t.Fatalf("step axis %v..%v", ax.Lo, ax.Hi)
	}
	at := func(u float64) float64 { return (u - ax.Lo) / (ax.Hi - ax.Lo) }
	var fracs []float64
	ks := []int{0, 1, 2, 9, 20, 33, 39}
	for _, k := range ks {
		fracs = append(fracs, at(float64(k)+0.5))
	}
	line := regexp.MustCompile(`^([AB]): events (\d+)\.\.(\d+) \((.*?)\), requested `)
	for i, r := range hover(ctx, t, "#cmp-curves", "#cmp-readout", fracs) {
		k := ks[i]
		lines := strings.Split(r, "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[2], "B − A: ") {
			t.Fatalf("step %d: readout %q", k, r)
		}
		for j, steps := range [][][2]int{sa, sb} {
			m := line.FindStringSubmatch(lines[j])
			if m == nil {
				t.Fatalf("step %d: readout line %q", k, lines[j])
			}
			var e0, e1 int
			fmt.Sscan(m[2], &e0)
			fmt.Sscan(m[3], &e1)
			if m[4] != fmt.Sprintf("step %d", k) || e0 < steps[k][0] || e0 > steps[k][1] || e1 < e0 {
				t.Errorf("middle of step %d: %s reads %q; gpumem steps puts its step %d on events %d..%d", k, m[1], lines[j], k, steps[k][0], steps[k][1])
			}
		}
	}
	// Before step 0 (A's events 0..1 come before its step 0 at 2): a run
	// with events there reads them, one without reads nothing ("—").
	if ax.Lo != -1 || sa[0][0] != 2 {
		t.Fatalf("axis from %v; A's step 0 at %d", ax.Lo, sa[0][0])
	}
	before := strings.Split(hover(ctx, t, "#cmp-curves", "#cmp-readout", []float64{at(-0.5)})[0], "\n")
	if !strings.HasPrefix(before[0], "A: events 0..") || !strings.Contains(before[0], "(before step 0)") ||
		!strings.Contains(before[1], "(before step 0)") && before[1] != "B: —" {
		t.Errorf("before step 0: %q", before)
	}
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, "cmp-curves"), &n)); err != nil || n < 2000 {
		t.Errorf("aligned by step: %d coloured pixels (%v)", n, err)
	}
	screenshotTall(ctx, t, "compare-steps")
}
