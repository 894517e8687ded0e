package replay

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

// BenchmarkFedPair measures the fed layout's pairing and stacking (what
// FedLayout.pair does beside the decode) alone, over a large snapshot's
// entries handed over as the decoder publishes them:
// GPUMEM_TILE=../../bench/data/baseline-1000mb.pickle go test -run '^$'
// -bench FedPair -benchtime 5x ./internal/replay. It reports the thread
// CPU time of one pass (cpu-ms/op), which the load of the machine does
// not change as it changes wall time.
func BenchmarkFedPair(b *testing.B) {
	path := os.Getenv("GPUMEM_TILE")
	if path == "" {
		b.Skip("set GPUMEM_TILE=FILE to measure the fed pairing on a large snapshot")
	}
	var feed *snapshot.EventFeed
	s, err := snapshot.Open(path, &snapshot.Options{Feed: func(f *snapshot.EventFeed) { feed = f }})
	if err != nil {
		b.Fatal(err)
	}
	if len(s.Traces) != 1 || feed == nil {
		b.Fatalf("%s: %d traces: the fed layout covers a single trace", path, len(s.Traces))
	}
	evs := s.Traces[0].Events
	expected, live := feed.Expected(), feed.Live()
	const every = 1 << 14 // as the decoder publishes (snapshot.feedEvery)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu time.Duration
	var p *pairing
	b.ResetTimer()
	for range b.N {
		// Fresh memory, as in a server that just started: what the
		// pass writes is faulted in, as it is there.
		p = nil
		debug.FreeOSMemory()
		c0 := threadCPU()
		var f fedPairer
		for n := min(every, len(evs)); ; n = min(n+every, len(evs)) {
			f.next(evs[:n], expected, live)
			if n == len(evs) {
				break
			}
		}
		cpu += threadCPU() - c0
		p = f.p
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.Logf("%d entries (%d expected), %d elements, %d actions, %d live at the end, %d timesteps",
		len(evs), expected, len(p.elems), p.taken, p.live.n, p.stack.timestep)
	if len(p.elems) == 0 || p.taken == 0 {
		b.Fatal("nothing paired")
	}
}
