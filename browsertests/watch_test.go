package browsertests

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/gpumon"
	"github.com/gpumem/gpumem/internal/web"
)

// TestWatchLogPage opens a gpumem watch log the way "gpumem serve
// run.jsonl" does and checks that the page draws each device's memory
// over time and its processes.
func TestWatchLogPage(t *testing.T) {
	ctx := newBrowser(t)
	// A two-GPU log from the demo backend's simulated job, 20 s at 250 ms
	// with 5 s report periods, built through the same Stats as gpumem watch.
	t0 := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	lg := &gpumon.Log{Starts: []gpumon.StartRecord{{Type: "start", Time: t0, Backend: "demo",
		Devices: []gpumon.DeviceInfo{{GPU: 0, UUID: "GPU-0", Name: "Demo GPU 80GB", Total: 80 << 30}, {GPU: 1, UUID: "GPU-1", Name: "Demo GPU 80GB", Total: 80 << 30}}}}}
	st := gpumon.NewStats(t0)
	for i := 0; i <= 80; i++ {
		el := time.Duration(i) * 250 * time.Millisecond
		s := gpumon.Sample{Time: t0.Add(el)}
		for g := 0; g < 2; g++ {
			u := gpumon.DemoUsed(g, el)
			s.Devices = append(s.Devices, gpumon.Device{Index: g, UUID: fmt.Sprintf("GPU-%d", g), MIG: -1, Used: u, Free: 80<<30 - u, Total: 80 << 30, Util: 90, MemKnown: true})
			s.Procs = append(s.Procs, gpumon.Process{Device: g, UUID: fmt.Sprintf("GPU-%d", g), PID: 4100 + g, Command: fmt.Sprintf("python train.py --rank %d", g), Used: int64(u) - 500<<20})
		}
		if i > 0 && i%20 == 0 {
			for _, iv := range st.Report(s.Time) {
				lg.Reports = append(lg.Reports, gpumon.NewReportRecord(iv))
			}
		}
		st.Add(s)
		lg.Samples = append(lg.Samples, gpumon.NewSampleRecords(s)...)
	}
	srv := web.New(web.Options{})
	srv.AddWatchLog("run.jsonl", lg)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetAddr(strings.TrimPrefix(hs.URL, "http://"))
	openPage(ctx, t, hs.URL+"/watch.html")

	var heads []string
	var canvases int
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(`[...document.querySelectorAll('.dev h2')].map(e => e.textContent)`, &heads),
		chromedp.Evaluate(`[...document.querySelectorAll('.chart canvas')].map((c, i) => c.id = 'chart' + i).length`, &canvases),
	); err != nil {
		t.Fatal(err)
	}
	inked := make([]int, canvases)
	for i := range inked {
		if err := chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(colouredPixels, fmt.Sprintf("chart%d", i)), &inked[i])); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(heads, "|") != "GPU 0  Demo GPU 80GB|GPU 1  Demo GPU 80GB" {
		t.Errorf("device headings %q", heads)
	}
	if canvases != 4 || len(inked) != 4 {
		t.Fatalf("%d charts, want a memory and a process chart per device", canvases)
	}
	// Coloured ink: the red report-peak lines on the memory charts, the
	// blue process lines on the process charts.
	for i, n := range inked {
		if n < 200 {
			t.Errorf("chart %d has %d coloured pixels: nothing drawn", i, n)
		}
	}
	sub := text(ctx, t, ".dev .sub")
	if !strings.Contains(sub, "peak 42.0GiB") || !strings.Contains(sub, "81 samples, 4 report periods") {
		t.Errorf("GPU 0 summary %q", sub)
	}
	if keys := text(ctx, t, ".dev .keys:last-of-type"); !strings.Contains(keys, "pid 4100 python train.py --rank 0") {
		t.Errorf("process legend %q", keys)
	}
	screenshot(ctx, t, "watch-log")
}
