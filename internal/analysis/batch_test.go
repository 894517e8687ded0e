package analysis

import (
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

// TestBatchWhatIfMatchesSmallerBatch checks the scaled replay against an
// independent run: the same workload synthesized at the smaller batch (its
// peaks come from the allocator model running the program itself).
func TestBatchWhatIfMatchesSmallerBatch(t *testing.T) {
	for _, w := range []synth.Workload{
		{Model: "mlp", Layers: 4, Hidden: 1024, Batch: 256, Steps: 2},
		{Model: "mlp", Layers: 3, Hidden: 512, Batch: 512, Steps: 2, Checkpointing: true},
		{Model: "mlp", Layers: 4, Hidden: 1024, Batch: 256, Steps: 2, Inference: true},
		{Model: "mlp", Layers: 4, Hidden: 1024, Batch: 256, Steps: 2, LoRA: true},
	} {
		d, _ := synthRun(t, w, synth.Options{})
		for _, s := range BatchScales {
			got, err := d.BatchWhatIf([]float64{s}, 0)
			if err != nil {
				t.Fatal(err)
			}
			small := w
			small.Batch = int(float64(w.Batch) * s)
			_, res, err := synth.Generate(small, synth.Options{})
			if err != nil {
				t.Fatal(err)
			}
			wantA, wantR := uint64(res.Stats.AllocatedBytes[0].Peak), uint64(res.Stats.ReservedBytes[0].Peak)
			t.Logf("%s scale %.2f: replay peak allocated %d reserved %d; batch %d run %d %d", w, s, got[0].PeakAllocatedBytes, got[0].PeakReservedBytes, small.Batch, wantA, wantR)
			if got[0].PeakAllocatedBytes != wantA || got[0].PeakReservedBytes != wantR {
				t.Errorf("%s scale %.2f: replay peaks %d / %d, the batch-%d run's %d / %d", w, s, got[0].PeakAllocatedBytes, got[0].PeakReservedBytes, small.Batch, wantA, wantR)
			}
		}
	}
}

// allocsBeforeOOM counts a run's allocations before its first oom entry
// (-1: it has none): the same program at another batch makes the same
// allocations in the same order, so this is a position in the program.
func allocsBeforeOOM(s *snapshot.Snapshot, dev int) int {
	n := 0
	for _, e := range s.Traces[dev].Events {
		switch e.Action {
		case snapshot.ActionOOM:
			return n
		case snapshot.ActionAlloc:
			n++
		}
	}
	return -1
}

// TestBatchWhatIfOOM: on an OOM mid-forward whose exception then frees
// the pass's tensors, the scaled replays say which batch scales avoid it,
// and each agrees with the program run at that batch on the same device:
// a scale avoids the OOM exactly when the smaller run gets past the
// allocation the recorded run failed at (the trace ends there, so what
// comes after is not the replay's to say).
func TestBatchWhatIfOOM(t *testing.T) {
	w := synth.Workload{Model: "mlp", Layers: 8, Hidden: 1024, Batch: 1024, Steps: 2, OOMUnwind: true}
	o := synth.Options{Capacity: 60 << 20}
	d, res := synthRun(t, w, o)
	if res.OOM == nil {
		t.Fatal("no OOM")
	}
	at := allocsBeforeOOM(d.S, 0)
	capacity := d.BatchCapacity(0)
	outs, err := d.BatchWhatIf(append([]float64{1}, BatchScales...), capacity)
	if err != nil {
		t.Fatal(err)
	}
	if outs[0].AvoidsOOM || !outs[0].RecordedOOM {
		t.Fatalf("scale 1 does not reproduce the OOM: %+v", outs[0])
	}
	avoided := 0
	for _, b := range outs[1:] {
		small := w
		small.Batch = int(float64(w.Batch) * b.Scale)
		s, _, err := synth.Generate(small, o)
		if err != nil {
			t.Fatal(err)
		}
		got := allocsBeforeOOM(s, 0)
		passes := got < 0 || got > at
		t.Logf("scale %.2f: replay avoids %v (peak reserved %d at capacity %d); batch %d run's OOM after %d allocations (recorded %d)",
			b.Scale, b.AvoidsOOM, b.PeakReservedBytes, capacity, small.Batch, got, at)
		if b.AvoidsOOM != passes {
			t.Errorf("scale %.2f: replay avoids %v, but the batch-%d run's OOM comes after %d allocations (the recorded one after %d)", b.Scale, b.AvoidsOOM, small.Batch, got, at)
		}
		if b.AvoidsOOM {
			avoided++
		}
	}
	if avoided == 0 || avoided == len(BatchScales) {
		t.Errorf("%d of %d scales avoid the OOM: pick a workload where some do and some do not", avoided, len(BatchScales))
	}
}

// TestBatchWhatIfCorpus: the scaled replay runs on every real trace, and
// at scale 1 its peak allocated (rounded blocks) is at least the Active
// Memory Timeline's peak (requested bytes): every allocation is replayed.
func TestBatchWhatIfCorpus(t *testing.T) {
	for _, f := range corpus.Files(t) {
		s := openReal(t, filepath.Base(f))
		for _, dev := range alloc.Replayable(s) {
			d := NewDevice(s, dev)
			outs, err := d.BatchWhatIf([]float64{1, 0.5}, 0)
			if err != nil {
				t.Errorf("%s device %d: %v", filepath.Base(f), dev, err)
				continue
			}
			if outs[0].PeakAllocatedBytes < d.Active.PeakBytes || !outs[0].AvoidsOOM || !outs[1].AvoidsOOM {
				t.Errorf("%s device %d: scale 1 peak allocated %d below the timeline's %d, or a request failed on an unlimited device: %+v",
					filepath.Base(f), dev, outs[0].PeakAllocatedBytes, d.Active.PeakBytes, outs)
			}
		}
	}
}
