package browsertests

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/export"
)

// consoleErrors collects console.error calls and uncaught exceptions of
// the tab.
func consoleErrors(ctx context.Context) func() []string {
	var mu sync.Mutex
	var errs []string
	chromedp.ListenTarget(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			errs = append(errs, "exception: "+ev.ExceptionDetails.Error())
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.APITypeError {
				errs = append(errs, "console.error")
			}
		}
	})
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), errs...)
	}
}

// TestFlameSVG opens a flamegraph of a real snapshot offline, checks its
// script runs without errors, and that click-to-zoom, search and reset
// change the drawing.
func TestFlameSVG(t *testing.T) {
	_, s := loadReal(t)
	dv := analysis.NewDevice(s, s.DefaultDevice())
	m, err := dv.Resolve("peak")
	if err != nil {
		t.Fatal(err)
	}
	f := export.ProfileFlame(dv.LiveProfile(m), export.StackOptions{})
	var svg bytes.Buffer
	if err := export.WriteFlameSVG(&svg, f, export.FlameOptions{Title: "test"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flame.svg")
	if err := os.WriteFile(path, svg.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	errs := consoleErrors(ctx)
	if err := chromedp.Run(ctx, network.Enable(), network.EmulateNetworkConditions(true, 0, 0, 0),
		chromedp.Navigate("file://"+path),
		pollAfterLoad(`window.flame !== undefined`, nil)); err != nil {
		t.Fatalf("opening the SVG: %v", err)
	}
	// A frame at depth 2 that is narrower than the plot: after a click it
	// spans the whole width, and frames outside it are hidden.
	const pick = `(() => { const gs = [...document.querySelectorAll('g.f')];
	  const i = gs.findIndex(g => g.dataset.d === '2' && +g.dataset.v < 0.8 * +document.documentElement.dataset.total && +g.dataset.v > 0);
	  window.__pick = gs[i]; return i; })()`
	var idx int
	var before, after float64
	var hiddenBefore, hiddenAfter, hiddenReset int
	hidden := `document.querySelectorAll('g.f.hide').length`
	width := `+window.__pick.querySelector('rect').getAttribute('width')`
	if err := chromedp.Run(ctx, chromedp.Evaluate(pick, &idx)); err != nil || idx < 0 {
		t.Fatalf("no frame at depth 2 to zoom into (%v)", err)
	}
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(width, &before), chromedp.Evaluate(hidden, &hiddenBefore),
		chromedp.Evaluate(`window.__pick.dispatchEvent(new MouseEvent('click', {bubbles: true})), true`, nil),
		chromedp.Evaluate(width, &after), chromedp.Evaluate(hidden, &hiddenAfter),
	); err != nil {
		t.Fatal(err)
	}
	if after <= before || after < 1100 || hiddenAfter <= hiddenBefore {
		t.Errorf("click-to-zoom: width %.1f -> %.1f, hidden frames %d -> %d", before, after, hiddenBefore, hiddenAfter)
	}
	var resetVisible bool
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`!document.getElementById('reset').classList.contains('hide')`, &resetVisible),
		chromedp.Evaluate(`document.getElementById('reset').dispatchEvent(new MouseEvent('click')), true`, nil),
		chromedp.Evaluate(hidden, &hiddenReset),
	); err != nil {
		t.Fatal(err)
	}
	if !resetVisible || hiddenReset != hiddenBefore {
		t.Errorf("reset: button shown %v, hidden frames %d, want %d", resetVisible, hiddenReset, hiddenBefore)
	}
	// Search highlights matching frames in another colour and reports
	// their share.
	var matchedBytes, matches int
	var fill, matchedText string
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`window.flame.search('\\.py')`, &matchedBytes),
		chromedp.Evaluate(`document.querySelectorAll('g.f.match').length`, &matches),
		chromedp.Evaluate(`getComputedStyle(document.querySelector('g.f.match rect')).fill`, &fill),
		chromedp.Evaluate(`document.getElementById('matched').textContent`, &matchedText),
	); err != nil {
		t.Fatal(err)
	}
	if matches == 0 || matchedBytes <= 0 || fill != "rgb(230, 0, 230)" || matchedText == "" {
		t.Errorf("search: %d matches, %d bytes, fill %q, text %q", matches, matchedBytes, fill, matchedText)
	}
	if e := errs(); len(e) > 0 {
		t.Errorf("console errors: %v", e)
	}
}

// TestPerfettoJSONInChromium parses a Perfetto export with Chromium's
// JSON parser (the one chrome://tracing uses).
func TestPerfettoJSONInChromium(t *testing.T) {
	_, s := loadReal(t)
	var out bytes.Buffer
	if err := export.WritePerfetto(&out, s, export.PerfettoOptions{Device: -1}); err != nil {
		t.Fatal(err)
	}
	var want struct {
		TraceEvents []json.RawMessage `json:"traceEvents"`
	}
	if err := json.Unmarshal(out.Bytes(), &want); err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	errs := consoleErrors(ctx)
	var got int
	if err := chromedp.Run(ctx, chromedp.Navigate("about:blank"),
		chromedp.Evaluate(`(t => { const d = JSON.parse(t); return d.traceEvents.filter(e => e.ph === 'C' || e.ph === 'X' || e.ph === 'i' || e.ph === 'M').length; })(`+jsString(out.String())+`)`, &got)); err != nil {
		t.Fatalf("JSON.parse in Chromium: %v", err)
	}
	if got != len(want.TraceEvents) || got == 0 {
		t.Errorf("Chromium parsed %d events, Go %d", got, len(want.TraceEvents))
	}
	if e := errs(); len(e) > 0 {
		t.Errorf("console errors: %v", e)
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestViewerFlame: the state view links to the flamegraph of the selected
// moment, and that page draws frames whose root is the live bytes then.
func TestViewerFlame(t *testing.T) {
	ctx, url, s := serveReal(t)
	openPage(ctx, t, url+"#view=state")
	var href string
	var idx int
	if err := chromedp.Run(ctx,
		chromedp.Poll(`document.getElementById('state-flame') !== null`, nil),
		chromedp.Evaluate(`document.getElementById('state-flame').href`, &href),
		chromedp.Evaluate(`window.gpumem.S.stateIdx`, &idx)); err != nil {
		t.Fatalf("no flamegraph link in the state view: %v", err)
	}
	errs := consoleErrors(ctx)
	var frames int
	var total int64
	if err := chromedp.Run(ctx, chromedp.Navigate(href),
		pollAfterLoad(`window.flame !== undefined`, nil),
		chromedp.Evaluate(`document.querySelectorAll('g.f').length`, &frames),
		chromedp.Evaluate(`+document.documentElement.dataset.total`, &total)); err != nil {
		t.Fatalf("opening %s: %v", href, err)
	}
	d := s.DefaultDevice()
	dv := analysis.NewDevice(s, d)
	m, err := dv.Resolve("e" + strconv.Itoa(int(s.Traces[d].Viz[idx])))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(dv.LiveProfile(m).Bytes); frames < 2 || total != want {
		t.Errorf("flamegraph of event %d: %d frames, %d bytes; want %d bytes live", idx, frames, total, want)
	}
	if e := errs(); len(e) > 0 {
		t.Errorf("console errors: %v", e)
	}
}
