package browsertests

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/web"
)

// findAnyAllocation returns the page coordinates of a pixel of the plot
// over which the hit test finds an allocation.
const findAnyAllocation = `(() => {
  const L = window.gpumem.S.layoutPlot, r = document.getElementById('plot').getBoundingClientRect();
  for (let y = L.ph - 5; y > 20; y -= 7)
    for (let x = 60; x < L.pw; x += 11)
      if (window.gpumem.hitTest(x, y).id >= 0) return [r.left + x, r.top + y];
  return null;
})()`

const detailsPrompt = "Hover over an allocation to see its details; click to pin it."

// TestHTMLOfflinePolish: the offline page shows no "timestamp Invalid
// Date" for blocks allocated before recording; the details panel lets go
// of an allocation when the cursor leaves the plot and when the view
// changes; its help does not promise the server's answer panel; marker
// labels stay inside the plot, on plates over the lines.
func TestHTMLOfflinePolish(t *testing.T) {
	name, s := loadReal(t)
	out := writePage(t, name, s, web.HTMLOptions{Device: -1, View: "active"})
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	bundle := pageBundle(t, page)
	if strings.Contains(bundle, "Invalid Date") || !strings.Contains(bundle, "timestamp not recorded") {
		t.Errorf("%s: the page's details of blocks from before recording: want \"timestamp not recorded\", never \"Invalid Date\"", name)
	}
	ctx := newBrowser(t)
	if err := chromedp.Run(ctx, network.Enable(), network.EmulateNetworkConditions(true, 0, 0, 0),
		chromedp.Navigate("file://"+out+"#view=active"),
		chromedp.ActionFunc(func(ctx context.Context) error { return waitReady(ctx) })); err != nil {
		t.Fatal(err)
	}
	var servedOnlyHidden bool
	if err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll('.served-only')].every(e => e.hidden)`, &servedOnlyHidden)); err != nil || !servedOnlyHidden {
		t.Errorf("the offline help promises the answer panel (%v)", err)
	}
	var labels struct {
		Labels []struct {
			Label string  `json:"label"`
			X0    float64 `json:"x0"`
			X1    float64 `json:"x1"`
			Plate bool    `json:"plate"`
		} `json:"labels"`
		Left, Right float64
	}
	// The marker labels are drawn with the plot, which may come a frame
	// after ready on a loaded machine.
	if err := chromedp.Run(ctx,
		chromedp.Poll(`!!(window.gpumem.markerLabels && window.gpumem.markerLabels.labels.length)`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Evaluate(`window.gpumem.markerLabels`, &labels)); err != nil {
		t.Fatal(err)
	}
	if len(labels.Labels) == 0 {
		t.Errorf("%s: no marker label drawn", name)
	}
	for _, l := range labels.Labels {
		if l.X0 < labels.Left || l.X1 > labels.Right || !l.Plate {
			t.Errorf("label %q at [%.0f, %.0f] outside the plot [%.0f, %.0f] or without its plate", l.Label, l.X0, l.X1, labels.Left, labels.Right)
		}
	}
	// hover moves the cursor onto an allocation (events dispatched on the
	// plot, as the browser sends them) until the details show it.
	hover := func() {
		t.Helper()
		err := chromedp.Run(ctx, chromedp.Evaluate(`(() => {
  const pt = `+findAnyAllocation+`, c = document.getElementById('plot');
  window.dispatchEvent(new MouseEvent('mouseup'));
  c.dispatchEvent(new MouseEvent('mousemove', {clientX: pt[0], clientY: pt[1], bubbles: true}));
  return true;
})()`, nil), chromedp.Poll(`document.getElementById('details').textContent.includes('Addr: ')`, nil, chromedp.WithPollingTimeout(5*time.Second)))
		if err != nil {
			t.Fatalf("hover: %v; details %q", err, text(ctx, t, "#details"))
		}
	}
	hover()
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById('plot').dispatchEvent(new MouseEvent('mouseleave')); true`, nil),
		chromedp.Poll(`document.getElementById('details').textContent === `+jsString(detailsPrompt), nil, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Errorf("the cursor left the plot: details still %q", text(ctx, t, "#details"))
	}
	hover()
	if err := chromedp.Run(ctx, chromedp.Evaluate(`(() => { const v = document.getElementById('view'); v.value = 'segments'; v.dispatchEvent(new Event('change')); return true; })()`, nil),
		chromedp.Poll(`window.gpumem.S.p.view === 'segments'`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Poll(`document.getElementById('details').textContent === `+jsString(detailsPrompt), nil, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Errorf("after switching to segments: details still %q (%v)", text(ctx, t, "#details"), err)
	}
	screenshot(ctx, t, "offline-polish")
}

// pageBundle is the data gpumem html embeds in a page (gzip, base64).
func pageBundle(t *testing.T, page []byte) string {
	t.Helper()
	m := regexp.MustCompile(`<script id="gpumem-data"[^>]*>([^<]*)</script>`).FindSubmatch(page)
	if m == nil {
		t.Fatal("no embedded data in the page")
	}
	z, err := base64.StdEncoding.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
