package browsertests

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

// TestFailedTimelineShown: when the server fails to build the timeline
// (a panic in replay), the page shows the server's error message instead
// of an empty plot or a dead tab.
func TestFailedTimelineShown(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	srv := web.New(web.Options{Timeline: func(*snapshot.Snapshot, int, replay.Kind) *replay.Timeline {
		panic("simulated replay bug")
	}})
	srv.Warm(srv.Add("demo.pickle", s))
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	srv.SetAddr(strings.TrimPrefix(hs.URL, "http://"))

	ctx := newBrowser(t)
	var msg string
	if err := chromedp.Run(ctx, chromedp.Navigate(hs.URL+"/#view=active"),
		pollAfterLoad(`(() => { const e = document.getElementById('error'); return e && !e.hidden && e.textContent; })()`, &msg,
			chromedp.WithPollingTimeout(30*time.Second), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("no error shown: %v", err)
	}
	if want := "demo.pickle: building the active timeline of device 0 failed: simulated replay bug"; !strings.Contains(msg, want) {
		t.Errorf("page shows %q, want it to contain %q", msg, want)
	}
}
