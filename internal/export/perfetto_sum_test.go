package export

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/snapshot"
)

// TestPerfettoCategoriesAddUpCorpus: on every real snapshot, at every
// moment of the trace (after the last event of each timestamp) the
// category counters add up to the requested counter; every process id is
// at least 1 (Perfetto's pid 0 is special), and no counter's name ends in
// its argument's key (Perfetto shows "NAME bytes").
func TestPerfettoCategoriesAddUpCorpus(t *testing.T) {
	cats := analysis.Categories()
	for _, path := range corpus.Files(t) {
		s := load(t, path)
		tf := perfetto(t, s, PerfettoOptions{Device: -1, MaxCounterEvents: 1 << 30})
		type state struct {
			vals    map[string]uint64
			ts      int64
			started bool
		}
		// A dump without a trace: memory_viz's timeline leaves its
		// active_pending_free blocks out (no category has them), the
		// requested counter keeps them, as torch.cuda.memory_stats does.
		pendingFree := map[int]uint64{}
		for _, d := range s.Devices() {
			if d < len(s.Traces) && len(s.Traces[d].Events) > 0 {
				continue
			}
			for i := range s.Segments {
				if int(s.Segments[i].Device) != d {
					continue
				}
				for _, b := range s.SegmentBlocks(i) {
					if b.State == snapshot.BlockActivePendingFree {
						pendingFree[devicePID(d)] += s.Requested(&b)
					}
				}
			}
		}
		per := map[int]*state{}
		bad, moments := 0, 0
		worst := int64(0)
		check := func(pid int, st *state) {
			sum := pendingFree[pid]
			for _, c := range cats {
				sum += st.vals[CategoryCounter(c)]
			}
			moments++
			if sum != st.vals[CounterRequested] {
				bad++
				worst = max(worst, abs64(int64(sum)-int64(st.vals[CounterRequested])))
			}
		}
		for _, e := range tf.TraceEvents {
			if e.Pid < 1 {
				t.Fatalf("%s: an event with pid %d", filepath.Base(path), e.Pid)
			}
			if e.Ph != "C" {
				continue
			}
			if strings.HasSuffix(e.Name, " bytes") {
				t.Fatalf("%s: counter %q reads %q in Perfetto", filepath.Base(path), e.Name, e.Name+" bytes")
			}
			st := per[e.Pid]
			if st == nil {
				st = &state{vals: map[string]uint64{}}
				per[e.Pid] = st
			}
			if st.started && e.Ts != st.ts {
				check(e.Pid, st)
			}
			st.started, st.ts = true, e.Ts
			st.vals[e.Name] = *e.Args.Bytes
		}
		for pid, st := range per {
			check(pid, st)
		}
		if bad > 0 {
			t.Errorf("%s: categories differ from requested at %d of %d moments (by up to %d bytes)", filepath.Base(path), bad, moments, worst)
		}
	}
}
