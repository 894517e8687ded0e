package browsertests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/units"
)

// TestFormatSizeMirrorsUnits checks that the page's formatSize prints
// every size as units.Viz and units.VizShort do: the page and the server's
// texts must never disagree on a size.
func TestFormatSizeMirrorsUnits(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	ctx := newBrowser(t)
	openPage(ctx, t, startServer(t, "demo", s))

	sizes := []uint64{0, 1, 511, 1023, 1024, 1025, 1126, 1280, 1536, 1792, 10239, 1048575, 1048576, 1<<30 - 1, 1 << 30, 7575726912, 1 << 40, 1<<50 + 3}
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		sizes = append(sizes, r.Uint64N(1<<53)>>r.UintN(53))
	}
	for shift := uint(0); shift <= 40; shift += 10 {
		for tenth := uint64(0); tenth < 10240; tenth += 97 {
			sizes = append(sizes, (tenth<<shift)/10+(1<<shift)/20) // exact ties x.x5
		}
	}
	arg, _ := json.Marshal(sizes)
	var got [][2]string
	js := fmt.Sprintf(`%s.map(n => [window.gpumem.formatSize(n), window.gpumem.formatSize(n, false)])`, arg)
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &got)); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(sizes) {
		t.Fatalf("page formatted %d sizes, want %d", len(got), len(sizes))
	}
	for i, n := range sizes {
		if want := [2]string{units.Viz(n), units.VizShort(n)}; got[i] != want {
			t.Errorf("formatSize(%d) on the page = %q, units = %q", n, got[i], want)
		}
	}
}
