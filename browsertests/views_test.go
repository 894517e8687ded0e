package browsertests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

// The Compare, What-if, Steps and Ranks views against what the CLI prints
// on the same real files: each view's table must read as the
// subcommand's text does, row by row.

var (
	ctx128  = "cs336-kkaitlyn111__memory_ctx128_forward.pickle"
	ctx256  = "cs336-kkaitlyn111__memory_ctx256_forward.pickle"
	stepped = "cs336-silmont2000__memory_forward_fp32_128.pickle"
)

// serveFiles serves the corpus files named as gpumem serve does (by base
// name, each decoded from its path) and returns their paths and the URL.
func serveFiles(t *testing.T, names ...string) ([]string, string) {
	t.Helper()
	srv := web.New(web.Options{})
	var paths []string
	for _, n := range names {
		p := corpus.File(t, n)
		s, err := snapshot.Open(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		srv.Add(filepath.Base(p), s)
		paths = append(paths, p)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetAddr(strings.TrimPrefix(hs.URL, "http://"))
	return paths, hs.URL + "/"
}

// gpumemBin is the gpumem binary built from this tree, once per run.
var gpumemBin struct {
	once sync.Once
	path string
	err  error
}

// runGpumem runs the gpumem binary and returns what it printed.
func runGpumem(t *testing.T, args ...string) string {
	t.Helper()
	gpumemBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "gpumem-bin-")
		if err != nil {
			gpumemBin.err = err
			return
		}
		gpumemBin.path = filepath.Join(dir, "gpumem")
		build := exec.Command("go", "build", "-o", gpumemBin.path, "./cmd/gpumem")
		build.Dir = ".." // the main module, with its own go.sum
		out, err := build.CombinedOutput()
		if err != nil {
			gpumemBin.err = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if gpumemBin.err != nil {
		t.Fatal(gpumemBin.err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(gpumemBin.path, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("gpumem %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

var columns = regexp.MustCompile(`\s{2,}`)

// cells splits a line of a CLI table into its columns.
func cells(line string) []string {
	return columns.Split(strings.TrimSpace(line), -1)
}

// tableRows reads the cells of a table of the page (header row left out).
func tableRows(ctx context.Context, t *testing.T, sel string) [][]string {
	t.Helper()
	var rows [][]string
	js := fmt.Sprintf(`[...document.querySelectorAll(%q + ' tr')].filter(tr => tr.querySelector('td')).map(tr => [...tr.cells].map(td => td.textContent.trim()))`, sel)
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &rows)); err != nil {
		t.Fatal(err)
	}
	return rows
}

func openView(ctx context.Context, t *testing.T, url string) {
	t.Helper()
	openPage(ctx, t, url)
}

func TestCompareViewMatchesDiff(t *testing.T) {
	paths, url := serveFiles(t, ctx128, ctx256)
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=compare&file=0")
	out := runGpumem(t, "diff", paths[0], paths[1])

	// The categories: the lines of the live block under "live at".
	lines := strings.Split(out, "\n")
	var wantCats [][]string
	var wantSites [][]string
	inCats, inSites := false, false
	for _, l := range lines {
		switch {
		case strings.Contains(l, "live at"):
			inCats = true
			continue
		case strings.HasPrefix(l, "sites by change"):
			inCats, inSites = false, true
			continue
		case strings.HasPrefix(strings.TrimSpace(l), "B - A"):
			continue
		case strings.TrimSpace(l) == "":
			inCats, inSites = false, inSites && len(wantSites) == 0
			continue
		}
		if inCats {
			wantCats = append(wantCats, cells(l))
		}
		if inSites {
			wantSites = append(wantSites, cells(l))
		}
	}
	if len(wantCats) < 2 || len(wantSites) != 15 {
		t.Fatalf("CLI text not as expected (%d category rows, %d sites):\n%s", len(wantCats), len(wantSites), out)
	}
	gotCats := tableRows(ctx, t, "#cmp-cats")
	if fmt.Sprint(gotCats) != fmt.Sprint(wantCats) {
		t.Errorf("categories:\npage %q\ncli  %q", gotCats, wantCats)
	}
	gotSites := tableRows(ctx, t, "#cmp-sites")
	if fmt.Sprint(gotSites) != fmt.Sprint(wantSites) {
		t.Errorf("sites:\npage %q\ncli  %q", gotSites, wantSites)
	}
	// The peaks table reads as the CLI's first block.
	gotPeaks := tableRows(ctx, t, "#cmp-peaks")
	for i, l := range lines[4:8] { // after the files and the header
		if i >= len(gotPeaks) || fmt.Sprint(gotPeaks[i]) != fmt.Sprint(cells(l)) {
			t.Errorf("peaks row %d: page %q, cli %q", i, gotPeaks, cells(l))
		}
	}
	// The two timelines and their difference are drawn, by events and by
	// time (both files have times).
	for _, align := range []string{"events", "time"} {
		var n int
		if err := chromedp.Run(ctx, chromedp.SetValue(`#cmp-align`, align, chromedp.ByQuery),
			chromedp.Evaluate(`document.getElementById('cmp-align').dispatchEvent(new Event('change'))`, nil),
			chromedp.Evaluate(fmt.Sprintf(colouredPixels, "cmp-curves"), &n)); err != nil {
			t.Fatal(err)
		}
		if n < 2000 {
			t.Errorf("aligned by %s: %d coloured pixels in the curves", align, n)
		}
	}
	// ctx128 has no steps (one step, the whole trace): the alignment by
	// step is offered no further, and the page says why.
	var stepsOff bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelector('#cmp-align option[value="steps"]').disabled`, &stepsOff)); err != nil {
		t.Fatal(err)
	}
	if note := text(ctx, t, "#cmp-align-note"); !stepsOff || !strings.HasPrefix(note, "Alignment by step needs steps in both runs: A (cs336-kkaitlyn111__memory_ctx128_forward.pickle) has no steps (whole trace (no repeating step found)") {
		t.Errorf("steps alignment offered %v; note %q", !stepsOff, note)
	}
	// Clicking a site selects it and shows its frames.
	var sel string
	if err := chromedp.Run(ctx, chromedp.Click(`#cmp-sites tr[data-site="2"] td.site`, chromedp.ByQuery),
		chromedp.Text(`#cmp-site`, &sel, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sel, wantSites[2][4]) || !strings.Contains(sel, "B − A: "+wantSites[2][0]) {
		t.Errorf("site details after a click: %q, want %q with %s", sel, wantSites[2][4], wantSites[2][0])
	}
	// ... and highlights its allocations in both runs: its live bytes,
	// filled under each curve, reach at least what the diff gives it at
	// each run's peak.
	poll(ctx, t, `document.getElementById('cmp-body').dataset.site === '2'`)
	// Aligned by events (ctx256 ran 200 times as long: by time, ctx128
	// is a sliver at the start).
	if err := chromedp.Run(ctx, chromedp.SetValue(`#cmp-align`, "events", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('cmp-align').dispatchEvent(new Event('change'))`, nil)); err != nil {
		t.Fatal(err)
	}
	fracs := make([]float64, 400)
	for i := range fracs {
		fracs[i] = (float64(i) + 0.5) / 400
	}
	var most [2]uint64
	var shown [2]string
	siteOf := regexp.MustCompile(`, site (.+)$`)
	for _, r := range hover(ctx, t, "#cmp-curves", "#cmp-readout", fracs) {
		for k, l := range strings.Split(r, "\n")[:2] {
			if strings.HasSuffix(l, ": —") {
				continue
			}
			m := siteOf.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("readout line %q has no site", l)
			}
			if v := parseSize(t, m[1]); v >= most[k] {
				most[k], shown[k] = v, m[1]
			}
		}
	}
	for k, col := range []int{1, 2} {
		if want := parseSize(t, wantSites[2][col]); most[k] < want || want > 0 && most[k] == 0 {
			t.Errorf("run %c: the site's curve reaches %s, the diff gives it %s at the peak", 'A'+k, shown[k], wantSites[2][col])
		}
	}
	// The screenshot: site 0 (softmax), live in both runs, picked.
	if err := chromedp.Run(ctx, chromedp.Click(`#cmp-sites tr[data-site="0"] td.site`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, `document.getElementById('cmp-body').dataset.site === '0'`)
	screenshotTall(ctx, t, "compare")
	// Site 0 opens B's timeline with that site's allocations highlighted:
	// the frame search for its innermost frame matches at least its
	// allocations in B.
	var bAllocs int
	fmt.Sscanf(wantSites[0][3][strings.Index(wantSites[0][3], "/")+1:], "%d", &bAllocs)
	var matches int
	var query string
	if err := chromedp.Run(ctx, chromedp.Click(`#cmp-sites tr[data-site="0"] td.site`, chromedp.ByQuery), chromedp.Click(`#cmp-open-b`, chromedp.ByQuery),
		chromedp.Poll(`window.gpumem.S.p.view === 'active' && window.gpumem.S.p.file === 1 && window.gpumem.S.frameMatch.size > 0`, nil,
			chromedp.WithPollingTimeout(30*time.Second)),
		chromedp.Evaluate(`window.gpumem.S.frameMatch.size`, &matches),
		chromedp.Evaluate(`document.getElementById('search-frame').value`, &query)); err != nil {
		t.Fatalf("opening B's timeline on site 0: %v", err)
	}
	if bAllocs == 0 || matches < bAllocs || !strings.HasSuffix(query, ":softmax") {
		t.Errorf("B's timeline: %d allocations highlighted by %q, want at least the site's %d", matches, query, bAllocs)
	}
}

func TestWhatIfViewMatchesSimSweep(t *testing.T) {
	paths, url := serveFiles(t, ctx128)
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=whatif&file=0&device=0")
	out := runGpumem(t, "sim", "--sweep", "--device", "0", paths[0])
	var want [][]string
	var best string
	seen := false
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "config"):
			seen = true
		case strings.HasPrefix(l, "Best:") || strings.HasPrefix(l, "No setting"):
			best, seen = l, false
		case seen && strings.TrimSpace(l) != "":
			want = append(want, cells(l))
		}
	}
	if len(want) < 5 || best == "" {
		t.Fatalf("CLI text not as expected:\n%s", out)
	}
	got := tableRows(ctx, t, "#wi-table")
	if len(got) != len(want) {
		t.Fatalf("page has %d settings, cli %d", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i][:8]) != fmt.Sprint(want[i]) {
			t.Errorf("setting %d: page %q, cli %q", i, got[i][:8], want[i])
		}
	}
	if v := text(ctx, t, "#wi-verdict"); v != best {
		t.Errorf("verdict: page %q, cli %q", v, best)
	}
}

func TestStepsViewMatchesSteps(t *testing.T) {
	paths, url := serveFiles(t, stepped)
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=steps&file=0")
	out := runGpumem(t, "steps", paths[0])
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var want [][]string
	var leak string
	for _, l := range lines[3:] {
		if strings.TrimSpace(l) == "" {
			continue
		}
		if strings.Contains(l, "leak") || strings.HasPrefix(l, "LEAK") {
			leak = l
			break
		}
		want = append(want, cells(l))
	}
	got := tableRows(ctx, t, "#st-table")
	if len(got) != len(want) || len(want) < 3 {
		t.Fatalf("page lists %d steps, cli %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if fmt.Sprint(got[i][:9]) != fmt.Sprint(want[i]) {
			t.Errorf("step %d: page %q, cli %q", i, got[i][:9], want[i])
		}
	}
	if v := text(ctx, t, "#st-leak"); v != leak {
		t.Errorf("leak check: page %q, cli %q", v, leak)
	}
	screenshot(ctx, t, "steps")
	// A click on step 3 opens the Active Memory Timeline on that step:
	// its window starts after the event before the step and ends after
	// its last event.
	var first, last int
	fmt.Sscanf(want[3][1], "%d..%d", &first, &last)
	var x [2]float64
	if err := chromedp.Run(ctx, chromedp.Click(`#st-table tr[data-step="3"] td`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx, chromedp.Poll(`window.gpumem.S.p.view === 'active' && document.body.dataset.ready === '1' && window.gpumem.S.win !== null`, nil,
		chromedp.WithPollingTimeout(30*time.Second)), chromedp.Evaluate(`[window.gpumem.S.x0, window.gpumem.S.x1]`, &x)); err != nil {
		t.Fatal(err)
	}
	var moments []struct{ Timestep float64 }
	if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`fetch('api/moment?file=0&at=e%d,e%d').then(r => r.json())`, first-1, last), &moments,
		func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
	if x[0] != moments[0].Timestep || x[1] != moments[1].Timestep+1 || !(x[1] > x[0]) {
		t.Errorf("timeline window after clicking step 3 (events %d..%d): [%v, %v], want [%v, %v]", first, last, x[0], x[1], moments[0].Timestep, moments[1].Timestep+1)
	}
}

func TestRanksViewMatchesRanks(t *testing.T) {
	paths, url := serveFiles(t,
		"cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle",
		"cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle",
		"cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle",
		"cs336-notHanmin__memory_snapshot.pickle")
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=ranks")
	out := runGpumem(t, append([]string{"ranks"}, paths...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var want [][]string
	i := 1
	for ; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
		want = append(want, cells(lines[i]))
	}
	got := tableRows(ctx, t, "#rk-table")
	if len(got) != len(want) || len(want) != len(paths) {
		t.Fatalf("page has %d ranks, cli %d:\n%s", len(got), len(want), out)
	}
	for k := range want {
		if fmt.Sprint(got[k][:7]) != fmt.Sprint(want[k]) {
			t.Errorf("rank row %d: page %q, cli %q", k, got[k][:7], want[k])
		}
	}
	if v := text(ctx, t, "#rk-spread"); v != lines[i+1] {
		t.Errorf("spread: page %q, cli %q", v, lines[i+1])
	}
	if v := text(ctx, t, "#rk-outlier"); v != lines[i+2] || !strings.Contains(v, "rank 3") {
		t.Errorf("outlier: page %q, cli %q", v, lines[i+2])
	}
	screenshot(ctx, t, "ranks")
	// A click on a row opens that rank's timeline.
	if err := chromedp.Run(ctx, chromedp.Click(`#rk-table tr[data-row="2"] td`, chromedp.ByQuery),
		chromedp.Poll(`window.gpumem.S.p.view === 'active' && window.gpumem.S.p.file === 2 && document.body.dataset.ready === '1'`, nil,
			chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Errorf("clicking rank 2 did not open its timeline: %v", err)
	}
}

// TestHumanMirrorsUnits: the pages' sizes (sizes.js human, humanSigned,
// python, served to the views through units.js) print as units.Human,
// HumanSigned and Python, ties included.
func TestHumanMirrorsUnits(t *testing.T) {
	_, url := serveFiles(t, stepped)
	ctx := newBrowser(t)
	openView(ctx, t, url+"#view=settings")
	sizes := []uint64{0, 1, 10239, 10240, 1 << 20, 1<<20 - 1, 1 << 30, 1<<30 + 1<<27, 1<<30 + 5*1<<27, 3<<30 + 1<<23, 1 << 40}
	r := rand.New(rand.NewPCG(3, 4))
	for range 400 {
		sizes = append(sizes, r.Uint64N(1<<50)>>r.UintN(50))
	}
	for k := uint64(1); k < 400; k++ { // exact ties at the third decimal: k/8 of a unit
		sizes = append(sizes, k<<17, k<<27, k<<7, k<<8, k<<18, k<<28) // and k/4: ties at the first decimal
	}
	arg, _ := json.Marshal(sizes)
	var got [][3]string
	js := fmt.Sprintf(`import('./units.js').then(u => %s.map(n => [u.human(n), u.humanSigned(-n), u.python(n)]))`, arg)
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &got, func(p *cdpruntime.EvaluateParams) *cdpruntime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		if want := [3]string{units.Human(n), units.HumanSigned(-int64(n)), units.PythonU(n)}; got[i] != want {
			t.Errorf("human(%d) on the page = %q, units = %q", n, got[i], want)
		}
	}
}
