package browsertests

import (
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestCloseFile: the ✕ beside the file selector closes the file shown
// (DELETE /api/files/ID, a request another site's page cannot make): the
// server forgets it and the page says that no file is left.
func TestCloseFile(t *testing.T) {
	name, s := loadReal(t)
	ctx := newBrowser(t)
	url := startServer(t, name, s)
	openPage(ctx, t, url+"#file=0&view=active")
	if err := chromedp.Run(ctx, chromedp.Click("#close-file", chromedp.ByQuery),
		chromedp.Poll(`window.gpumem.S.files.length === 0`, nil, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.Poll(`document.getElementById('error').textContent.includes('No snapshot loaded')`, nil, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
		t.Fatalf("closing the only file: %v; error %q", err, text(ctx, t, "#error"))
	}
	var n int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`fetch('api/files').then(r => r.json()).then(j => j.files.length)`, &n,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) })); err != nil || n != 0 {
		t.Errorf("the server still lists %d files (%v)", n, err)
	}
}
