package synth

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// recorder is a sink that checks the program's bookkeeping: every free is
// of a live tensor, and it remembers live bytes per kind and what happened.
type recorder struct {
	t        *testing.T
	live     map[tensorID]kind
	size     map[tensorID]uint64
	bytes    [numKinds]uint64
	peak     uint64
	total    uint64
	allocs   [numKinds]int
	frees    [numKinds]int
	lastTime int64
	annots   []string
	capacity uint64 // 0 = unlimited
	// liveAtStepEnd[k] is live bytes per kind at each ProfilerStep END.
	liveAtStepEnd [][numKinds]uint64
	// stateIDs are the optimizer-state tensors, with the step they were made in.
	stateMade []int
	steps     int
	stacks    map[snapshot.StackID]bool
}

var errTestOOM = errors.New("test OOM")

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, live: map[tensorID]kind{}, size: map[tensorID]uint64{}, stacks: map[snapshot.StackID]bool{}}
}

func (r *recorder) clock(ts int64) {
	if ts <= r.lastTime {
		r.t.Fatalf("time_us not increasing: %d after %d", ts, r.lastTime)
	}
	r.lastTime = ts
}

func (r *recorder) malloc(id tensorID, size uint64, k kind, stack snapshot.StackID, ts int64) error {
	r.clock(ts)
	if _, ok := r.live[id]; ok {
		r.t.Fatalf("malloc of live tensor id %d", id)
	}
	if size == 0 {
		r.t.Fatalf("zero-size malloc (%v)", k)
	}
	if stack == snapshot.NoStack {
		r.t.Fatalf("malloc without stack (%v)", k)
	}
	r.stacks[stack] = true
	if r.capacity > 0 && r.total+size > r.capacity {
		return errTestOOM
	}
	r.live[id], r.size[id] = k, size
	r.bytes[k] += size
	r.total += size
	r.peak = max(r.peak, r.total)
	r.allocs[k]++
	if k == kindOptState {
		r.stateMade = append(r.stateMade, r.steps)
	}
	return nil
}

func (r *recorder) free(id tensorID, stack snapshot.StackID, ts int64) error {
	r.clock(ts)
	k, ok := r.live[id]
	if !ok {
		r.t.Fatalf("free of dead tensor id %d", id)
	}
	if k == kindParam || k == kindOptState {
		r.t.Fatalf("%v tensor freed", k)
	}
	r.bytes[k] -= r.size[id]
	r.total -= r.size[id]
	r.frees[k]++
	delete(r.live, id)
	delete(r.size, id)
	return nil
}

func (r *recorder) startRecording()        {}
func (r *recorder) relabel(tensorID, kind) {}

func (r *recorder) annotate(name, stage string, ts int64) {
	r.clock(ts)
	r.annots = append(r.annots, name+" "+stage)
	if strings.HasPrefix(name, "ProfilerStep#") && stage == "END" {
		r.liveAtStepEnd = append(r.liveAtStepEnd, r.bytes)
		r.steps++
	}
}

func smallWorkloads() []Workload {
	return []Workload{
		{Model: "transformer", Layers: 2, DModel: 256, Heads: 4, Seq: 128, Batch: 2, Vocab: 1000, Steps: 3},
		{Model: "transformer", Layers: 3, DModel: 128, Heads: 8, Seq: 64, Batch: 4, Vocab: 500, Steps: 2, DType: BF16},
		{Model: "mlp", Layers: 3, Hidden: 512, Batch: 16, Steps: 3},
		{Model: "mlp", Layers: 1, Hidden: 64, Batch: 4, Steps: 4, DType: BF16},
	}
}

func runRecorder(t *testing.T, w Workload, capacity uint64) (*recorder, *program, error) {
	t.Helper()
	w, err := w.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	r := newRecorder(t)
	r.capacity = capacity
	p := newProgram(w, r)
	err = p.run()
	return r, p, err
}

func TestProgramLifetimes(t *testing.T) {
	for _, w := range smallWorkloads() {
		t.Run(w.Model+"/"+w.DType.String(), func(t *testing.T) {
			r, p, err := runRecorder(t, w, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.stepsDone != w.Steps || len(r.liveAtStepEnd) != w.Steps {
				t.Fatalf("steps done %d, step ends %d, want %d", p.stepsDone, len(r.liveAtStepEnd), w.Steps)
			}
			nParams := len(p.params)
			// Optimizer states: two per parameter, all made in the first step, never freed.
			if r.allocs[kindOptState] != 2*nParams {
				t.Errorf("optimizer states made: %d, want %d", r.allocs[kindOptState], 2*nParams)
			}
			for _, s := range r.stateMade {
				if s != 0 {
					t.Errorf("optimizer state made in step %d, want lazily in step 0 only", s)
					break
				}
			}
			var paramBytes uint64
			for _, s := range p.psize {
				paramBytes += s
			}
			for i, live := range r.liveAtStepEnd {
				if live[kindParam] != paramBytes {
					t.Errorf("step %d: live params %d, want %d", i, live[kindParam], paramBytes)
				}
				if live[kindOptState] != 2*paramBytes {
					t.Errorf("step %d: live optimizer state %d, want %d", i, live[kindOptState], 2*paramBytes)
				}
				// Grads exist for every parameter after backward, until the next zero_grad.
				if live[kindGrad] != paramBytes {
					t.Errorf("step %d: live grads %d, want %d", i, live[kindGrad], paramBytes)
				}
				// Activations saved for backward are freed during backward; only
				// the (tiny) loss outlives it and is freed by step end.
				if live[kindActivation] != 0 || live[kindTemp] != 0 {
					t.Errorf("step %d: live activations %d temporaries %d, want 0", i, live[kindActivation], live[kindTemp])
				}
			}
			// Balance: everything but params, states, grads and the last batch is freed.
			for k := kind(0); k < numKinds; k++ {
				want := r.allocs[k]
				switch k {
				case kindParam, kindOptState:
					want = 0
				case kindGrad:
					want -= nParams
				case kindInput:
					want -= 2
				}
				if r.frees[k] != want {
					t.Errorf("%v: %d allocs, %d frees, want %d frees", k, r.allocs[k], r.frees[k], want)
				}
			}
			if r.allocs[kindActivation] < w.Steps*w.Layers {
				t.Errorf("only %d activations for %d steps of %d layers", r.allocs[kindActivation], w.Steps, w.Layers)
			}
			// Annotations: each ProfilerStep and optimizer phase opens and closes.
			var want []string
			for s := 0; s < w.Steps; s++ {
				n := "ProfilerStep#" + itoa(s)
				want = append(want, n+" START", "Optimizer.zero_grad#AdamW.zero_grad START", "Optimizer.zero_grad#AdamW.zero_grad END",
					"Optimizer.step#AdamW.step START", "Optimizer.step#AdamW.step END", n+" END")
			}
			if strings.Join(r.annots, "\n") != strings.Join(want, "\n") {
				t.Errorf("annotations:\n%s\nwant:\n%s", strings.Join(r.annots, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func TestProgramActivationsRaisePeak(t *testing.T) {
	// At a realistic shape the saved activations push the peak above
	// parameters + grads + both AdamW states.
	w := Workload{Model: "transformer", Layers: 4, DModel: 512, Heads: 8, Seq: 256, Batch: 4, Vocab: 8000, Steps: 2}
	r, p, err := runRecorder(t, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	var paramBytes uint64
	for _, s := range p.psize {
		paramBytes += s
	}
	if r.peak <= 4*paramBytes {
		t.Errorf("peak %d not above params+grads+states (%d): activations missing", r.peak, 4*paramBytes)
	}
}

func TestProgramOOMStops(t *testing.T) {
	w := Workload{Model: "transformer", Layers: 2, DModel: 256, Heads: 4, Seq: 128, Batch: 2, Vocab: 1000, Steps: 5}
	full, _, err := runRecorder(t, w, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, p, err := runRecorder(t, w, full.peak-1)
	if !errors.Is(err, errTestOOM) {
		t.Fatalf("err = %v, want the sink's OOM", err)
	}
	if p.stepsDone >= w.Steps {
		t.Errorf("all %d steps done despite OOM", p.stepsDone)
	}
	if r.total > full.peak-1 {
		t.Errorf("live bytes %d above capacity", r.total)
	}
}

func TestProgramDeterministicAndSeeded(t *testing.T) {
	w := smallWorkloads()[0]
	a, _, _ := runRecorder(t, w, 0)
	b, _, _ := runRecorder(t, w, 0)
	if a.lastTime != b.lastTime || a.peak != b.peak {
		t.Errorf("same seed, different runs: time %d vs %d, peak %d vs %d", a.lastTime, b.lastTime, a.peak, b.peak)
	}
	w.Seed = 7
	c, _, _ := runRecorder(t, w, 0)
	if c.lastTime == a.lastTime {
		t.Errorf("seed 7 gives the same timestamps as seed 0")
	}
	if c.peak != a.peak {
		t.Errorf("seed changed memory behaviour: peak %d vs %d", c.peak, a.peak)
	}
}

func TestWorkloadValidation(t *testing.T) {
	for _, tc := range []struct {
		w   Workload
		err string
	}{
		{Workload{Model: "rnn"}, "unknown model"},
		{Workload{Model: "transformer", DModel: 100, Heads: 3}, "not a multiple"},
		{Workload{Model: "mlp", Layers: -1}, "must be positive"},
		{Workload{Model: "transformer", Vocab: 1 << 30, Seq: 1 << 20, Batch: 1 << 10}, "too large"},
		{Workload{Model: "mlp"}, ""},
	} {
		_, err := tc.w.withDefaults()
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: err = %v, want %q", tc.w, err, tc.err)
		}
	}
}
