package browsertests

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// profilerExport is a real torch.profiler file of ../shared, with its
// decompressed bytes.
func profilerExport(t *testing.T, name string) (string, []byte) {
	t.Helper()
	path := corpus.Path("snapshots", "profiler_exports", name)
	f, err := os.Open(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skipf("torch.profiler export absent: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// kinetoRunningPeaks is the independent peak of a Kineto trace without
// Total Allocated: per device ("cuda:N", "cpu"), the largest running sum
// of the [memory] events' Bytes in time order.
func kinetoRunningPeaks(t *testing.T, b []byte) map[string]int64 {
	var doc struct {
		TraceEvents []struct {
			Name string          `json:"name"`
			Ts   float64         `json:"ts"`
			Args json.RawMessage `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	type mem struct {
		ts    float64
		dev   string
		bytes int64
	}
	var ms []mem
	for _, e := range doc.TraceEvents {
		if e.Name != "[memory]" {
			continue
		}
		var a struct {
			Type  int   `json:"Device Type"`
			ID    int   `json:"Device Id"`
			Bytes int64 `json:"Bytes"`
		}
		if err := json.Unmarshal(e.Args, &a); err != nil {
			t.Fatal(err)
		}
		dev := "cpu"
		if a.Type == 1 {
			dev = fmt.Sprintf("cuda:%d", a.ID)
		}
		ms = append(ms, mem{e.Ts, dev, a.Bytes})
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].ts < ms[j].ts })
	sum, peak := map[string]int64{}, map[string]int64{}
	for _, m := range ms {
		sum[m.dev] += m.bytes
		peak[m.dev] = max(peak[m.dev], sum[m.dev])
	}
	return peak
}

// rawTimelinePeak is the independent peak of a raw memory timeline: the
// largest running sum after each timestamp's events.
func rawTimelinePeak(t *testing.T, b []byte) int64 {
	var ev [][4]int64
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	sum, peak := int64(0), int64(0)
	for i, e := range ev {
		sum += e[2]
		if i == len(ev)-1 || ev[i+1][0] != e[0] {
			peak = max(peak, sum)
		}
	}
	return peak
}

// checkProfilerPage opens the Active Memory Timeline of a device and
// checks the peak shown, the device's name and the source format; then
// the segment view, which must say what is missing instead of drawing.
func checkProfilerPage(t *testing.T, ctx string, url string, dev int, devName string, peak int64, run func(string) (string, string, int, float64)) {
	t.Helper()
	got, summary, pixels, exact := run(fmt.Sprintf("%s#view=active&device=%d", url, dev))
	// The page shows memory_viz's one-decimal size; the number it drew
	// that from must be the byte count itself.
	if want := units.VizShort(uint64(peak)); got != want || exact != float64(peak) {
		t.Errorf("%s %s: peak shown %q (%.0f bytes), the independent computation %q (%d bytes)", ctx, devName, got, exact, want, peak)
	}
	if !strings.Contains(summary, devName) || !strings.Contains(summary, "torch.profiler") {
		t.Errorf("%s: summary %q names neither the device %s nor the source format", ctx, summary, devName)
	}
	if pixels < 500 {
		t.Errorf("%s %s: timeline has %d coloured pixels", ctx, devName, pixels)
	}
}

// TestProfilerExportsInViewer opens a Kineto trace and a raw memory
// timeline, both real, and checks each device's peak on the Active Memory
// Timeline against the independent running sums; the views that need
// allocator segments say so.
func TestProfilerExportsInViewer(t *testing.T) {
	kPath, kBytes := profilerExport(t, "kineto__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz")
	rPath, rBytes := profilerExport(t, "HTA__memory_timeline.raw.gz")
	kineto, err := snapshot.Open(kPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := snapshot.Open(rPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	run := func(url string) (peak, summary string, pixels int, exact float64) {
		// A fresh navigation per view: a hash change alone reopens the
		// view in place, which the ready flag cannot tell from the last.
		if err := chromedp.Run(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(url), chromedp.ActionFunc(waitReady),
			chromedp.Text("#peak", &peak, chromedp.ByQuery),
			chromedp.Text("#summary", &summary, chromedp.ByQuery),
			chromedp.Evaluate(fmt.Sprintf(colouredPixels, "plot"), &pixels),
			chromedp.Evaluate(`window.gpumem.S.meta.peak`, &exact)); err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		return peak, summary, pixels, exact
	}

	kURL := startServer(t, filepath.Base(kPath), kineto)
	peaks := kinetoRunningPeaks(t, kBytes)
	if len(peaks) != 2 {
		t.Fatalf("independent peaks %v: want cuda:0 and cpu", peaks)
	}
	for _, d := range kineto.Devices() {
		name := kineto.DeviceName(d)
		if _, ok := peaks[name]; !ok {
			t.Fatalf("device %d (%s) not in the file", d, name)
		}
		checkProfilerPage(t, "kineto", kURL, d, name, peaks[name], run)
	}
	var options []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(`[...document.querySelectorAll('#device option')].map(o => o.textContent)`, &options)); err != nil {
		t.Fatal(err)
	}
	if len(options) != 2 || !strings.HasPrefix(options[0], "cuda:0 ") || !strings.HasPrefix(options[1], "cpu ") {
		t.Errorf("device choices %q, want cuda:0 and cpu", options)
	}
	screenshot(ctx, t, "profiler-kineto")

	rURL := startServer(t, filepath.Base(rPath), raw)
	checkProfilerPage(t, "raw timeline", rURL, 0, "exported device", rawTimelinePeak(t, rBytes), run)
	screenshot(ctx, t, "profiler-raw-timeline")

	// The categories colour the raw timeline as the profiler gave them.
	var cats []string
	if err := chromedp.Run(ctx,
		chromedp.SetValue("#colorby", "category", chromedp.ByQuery),
		chromedp.Evaluate(`document.getElementById('colorby').dispatchEvent(new Event('change'))`, nil),
		chromedp.Poll(`document.querySelectorAll('#legend .cls').length > 0`, nil, chromedp.WithPollingTimeout(20*time.Second)),
		chromedp.Evaluate(`[...document.querySelectorAll('#legend .cls')].map(e => e.textContent)`, &cats)); err != nil {
		t.Fatalf("no category legend: %v", err)
	}
	if len(cats) < 6 {
		t.Errorf("category legend %q: the profiler's file has 7 categories in use", cats)
	}

	for _, view := range []string{"segments", "state", "private", "settings"} {
		var shown bool
		var msg string
		if err := chromedp.Run(ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(rURL+"#view="+view), chromedp.ActionFunc(waitReady),
			chromedp.Evaluate(`!document.getElementById('missing-view').hidden && document.getElementById('timeline-view').hidden`, &shown),
			chromedp.Text("#missing", &msg, chromedp.ByQuery)); err != nil {
			t.Fatalf("%s view: %v", view, err)
		}
		if !shown || (view != "settings" && !strings.Contains(msg, "_record_memory_history")) {
			t.Errorf("%s view of a raw timeline: message shown %v, %q", view, shown, msg)
		}
	}
	screenshot(ctx, t, "profiler-no-segments")
}
