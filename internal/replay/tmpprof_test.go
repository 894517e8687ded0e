package replay

import (
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

func TestTmpProf(t *testing.T) {
	path := os.Getenv("GPUMEM_TILE")
	if path == "" {
		t.Skip()
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tl := newTimeline(s, s.DefaultDevice(), KindActive, nil)
	tl.startBuckets = func() {}
	T, P := float64(tl.Timesteps()), float64(tl.PeakBytes())
	tl.QueryWith(0, T, 1600, 600, 0, P, QueryOptions{Detail: 15000})
	f, _ := os.Create("/tmp/zp.prof")
	pprof.StartCPUProfile(f)
	x0, x1, y0, y1 := 0.0, T, 0.0, P
	for k := 0; k < 8; k++ {
		span, h := x1-x0, y1-y0
		cx, cy := x0+span/2, y0+h/2
		span, h = span/1.5, h/1.5
		x0, y0 = cx-span/2, cy-h/2
		x1, y1 = x0+span, y0+h
		st := time.Now()
		tl.QueryWith(x0, x1, 1600, 600, y0, y1, QueryOptions{Detail: 15000})
		t.Logf("key %d %v", k, time.Since(st))
	}
	pprof.StopCPUProfile()
}
