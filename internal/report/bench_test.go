package report

import (
	"io"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// bigSnapshot builds a trace of n alloc/free pairs spread over segs
// segments, each segment allocated in the trace.
func bigSnapshot(n, segs int) *snapshot.Snapshot {
	b := newBuilder()
	for i := 0; i < segs; i++ {
		addr := uint64(1<<40 + i*(32*mib))
		b.segment(0, addr, 0, true, blk{20 * mib, 0, inactive})
		b.event(0, snapshot.ActionSegmentAlloc, addr, 20*mib, int64(i))
	}
	for i := 0; i < n; i++ {
		addr := uint64(1<<40+(i%segs)*(32*mib)) + uint64(i%7)*4096
		b.event(0, snapshot.ActionAlloc, addr, 4096, int64(segs+3*i))
		b.event(0, snapshot.ActionFreeRequested, addr, 4096, int64(segs+3*i+1))
		b.event(0, snapshot.ActionFreeCompleted, addr, 4096, int64(segs+3*i+2))
	}
	return b.s
}

func BenchmarkTrace(b *testing.B) {
	s := bigSnapshot(300_000, 5000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Trace(io.Discard, s, TraceOptions{Device: -1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(s.Traces[0].Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkBuildInfo(b *testing.B) {
	s := bigSnapshot(300_000, 5000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		BuildInfo(s, nil)
	}
	b.ReportMetric(float64(len(s.Traces[0].Events))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
