package steps

import (
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

func gen(t *testing.T, w synth.Workload) *snapshot.Snapshot {
	t.Helper()
	s, _, err := synth.Generate(w, synth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSynthSteps: every step of synthetic runs, from their ProfilerStep
// annotations and, with the annotations removed, from the allocation
// pattern alone; no leak.
func TestSynthSteps(t *testing.T) {
	tests := []synth.Workload{
		{Model: "transformer", Layers: 2, DModel: 256, Heads: 4, Seq: 128, Batch: 2, Vocab: 1000, Steps: 2},
		{Model: "transformer", Layers: 3, DModel: 256, Heads: 4, Seq: 128, Batch: 2, Vocab: 1000, Steps: 5},
		{Model: "mlp", Layers: 3, Hidden: 512, Batch: 8, Steps: 4},
		{Model: "mlp", Layers: 1, Hidden: 256, Batch: 4, Steps: 7, DType: synth.BF16},
	}
	for _, w := range tests {
		s := gen(t, w)
		for _, strip := range []bool{false, true} {
			if strip {
				s.Annotations = nil
			}
			r, err := Find(analysis.NewDevice(s, 0))
			if err != nil {
				t.Fatal(err)
			}
			want := FromProfilerStep
			if strip {
				want = FromPattern
			}
			if len(r.Steps) != w.Steps || r.Source != want {
				t.Errorf("%v (annotations removed: %v): %d steps from %s, want %d from %s", w, strip, len(r.Steps), r.Source, w.Steps, want)
				continue
			}
			if r.Leak {
				t.Errorf("%v: leak reported (%d bytes per step)", w, r.GrowthPerStep)
			}
			for _, st := range r.Steps {
				if st.PeakBytes < st.StartBytes || st.PeakEvent < st.First || st.PeakEvent > st.Last ||
					!st.HasPhase[Forward] || !st.HasPhase[Backward] || !st.HasPhase[Optimizer] {
					t.Errorf("%v %s: peak %d after event %d (start %d, events %d..%d), phases %v", w, st.Name, st.PeakBytes, st.PeakEvent, st.StartBytes, st.First, st.Last, st.HasPhase)
				}
			}
		}
	}
}

// TestSynthLeak: synth --leak keeps a tensor per step; steps finds the
// growth per step and the site.
func TestSynthLeak(t *testing.T) {
	for _, steps := range []int{3, 6} {
		w := synth.Workload{Model: "mlp", Layers: 2, Hidden: 512, Batch: 8, Steps: steps, Leak: 3 << 20}
		s := gen(t, w)
		r, err := Find(analysis.NewDevice(s, 0))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Leak || r.GrowthPerStep != int64(w.Leak) || len(r.Sites) == 0 {
			t.Fatalf("%d steps: leak %v, %d bytes per step (want %d), sites %v", steps, r.Leak, r.GrowthPerStep, w.Leak, r.Sites)
		}
		top := r.Sites[0]
		if !strings.Contains(strings.Join(top.Frames, ";"), "log_metrics") || top.Bytes != int64(w.Leak)*int64(steps-1) {
			t.Errorf("%d steps: top growing site %v by %d, want log_metrics by %d", steps, top.Frames, top.Bytes, int64(w.Leak)*int64(steps-1))
		}
	}
}

// TestRealSteps: the real snapshots with optimizer annotations (none in
// the corpus has ProfilerStep ones) have one step ending at
// optimizer.step.
func TestRealSteps(t *testing.T) {
	s, err := snapshot.Open(corpus.File(t, "cs336-kkaitlyn111__memory_files_memory_ctx128_fullstep_.pickle"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Find(analysis.NewDevice(s, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != FromOptimizer || len(r.Steps) != 1 {
		t.Fatalf("%d steps from %s", len(r.Steps), r.Source)
	}
	st := r.Steps[0]
	if !st.HasPhase[Forward] || !st.HasPhase[Backward] || !st.HasPhase[Optimizer] || st.PeakBytes == 0 {
		t.Errorf("step %+v", st)
	}
}

// TestRealForwardOnly: a single forward pass repeats per layer but is not
// a loop of steps (the layers keep their activations): one step, no leak.
func TestRealForwardOnly(t *testing.T) {
	s, err := snapshot.Open(corpus.File(t, "cs336-kkaitlyn111__memory_files_memory_ctx128_forward_.pickle"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Find(analysis.NewDevice(s, 0))
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != FromWholeTrace || len(r.Steps) != 1 || r.Leak {
		t.Errorf("%d steps from %s, leak %v; want the whole trace as one step", len(r.Steps), r.Source, r.Leak)
	}
}
