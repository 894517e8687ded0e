package replay

import (
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

func TestZZProf(t *testing.T) {
	p := os.Getenv("ZZ_TILE")
	if p == "" {
		t.Skip()
	}
	var fp *FedLayout
	s, err := snapshot.Open(p, &snapshot.Options{Feed: func(f *snapshot.EventFeed) { fp = LayoutFeed(f, func(l func()) { go l() }) }})
	if err != nil {
		t.Fatal(err)
	}
	fp.result(s.Traces[0].Events)
	f, _ := os.Create("/tmp/k-tl.cpu")
	pprof.StartCPUProfile(f)
	t0 := time.Now()
	tl := NewTimelineFed(s, 0, KindActive, fp)
	el := time.Since(t0)
	t1 := time.Now()
	fr := tl.Query(0, float64(tl.Timesteps()), 1600, 600, 0, float64(tl.PeakBytes())*1.04)
	el2 := time.Since(t1)
	pprof.StopCPUProfile()
	t.Logf("timeline %v, first window %v (%d ids)", el, el2, len(fr.IDs))
}
