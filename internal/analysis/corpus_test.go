package analysis

import (
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

var (
	openedMu sync.Mutex
	opened   = map[string]*snapshot.Snapshot{}
)

// openReal decodes a real snapshot once per test binary.
func openReal(t testing.TB, name string) *snapshot.Snapshot {
	t.Helper()
	path := filepath.Join(corpus.Dir(t), name)
	openedMu.Lock()
	defer openedMu.Unlock()
	if s, ok := opened[path]; ok {
		return s
	}
	s, err := snapshot.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	opened[path] = s
	return s
}

// TestCorpusCategories pins the category split at the end of real AdamW
// training traces (cs336 GPT runs), checked by hand: parameters are the
// stackless blocks made before the trace (the model built before
// recording began); optimizer state is the two zeros_like per parameter of
// the course's AdamW (optimizers.py / adapters.py step, called through
// torch/optim/optimizer.py's wrapper); gradients are the tensors the
// autograd engine made in backward that are still live (BmmBackward0,
// IndexBackward0 and the reduce_grad sums of biases). The rule the issue
// asks for — optimizer state within 10% of 2x parameters, gradients
// within 10% of parameters — is checked too; the parameters are exactly
// the gradients and half the optimizer state (2.000×, 1.000×). A few
// stackless blocks from before the trace match no gradient or optimizer
// state in size (in the kkaitlyn111 runs 32 of 40, 80 and 160 KiB at
// contexts 128, 256 and 512, a buffer per layer that grows with the
// context: RoPE's tables; one of 4 KiB; in notHanmin one of 8 KiB): with
// no adapters in the trace they may be buffers as well as frozen weights,
// so they stay unknown (an earlier rule paired two of them with a
// backward temporary of their size). bcrafton's two stackless blocks of
// 8519680 B, cuBLAS's default workspace, stay unknown too.
func TestCorpusCategories(t *testing.T) {
	for _, tt := range []struct {
		file                       string
		param, optim, grad, active uint64
		checkGrad                  bool
	}{
		{"cs336-kkaitlyn111__memory_ctx128_fullstep.pickle", 13627238400, 27254476800, 13627238400, 20480004, true},
		{"cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle", 13627238400, 27254476800, 13627238400, 40960004, true},
		{"cs336-kkaitlyn111__memory_files_memory_ctx512_fullstep_.pickle", 13627238400, 27254476800, 13627238400, 81920004, true},
		{"cs336-notHanmin__memory_snapshot.pickle", 3877647360, 7755294720, 3877647360, 40960004, true},
		// Gradients here were made before the trace and have no stack:
		// backward's AccumulateGrad adds into them in place, which counts
		// them (grads-counted), beside as many parameters of the same
		// sizes (weights-counted); which block is which is not recorded.
		{"cs336-bcrafton__memory_snapshot.pickle", 761840640, 1523681280, 761840640, 0, true},
	} {
		t.Run(tt.file, func(t *testing.T) {
			d := NewDevice(openReal(t, tt.file), 0)
			m, err := d.Resolve("end")
			if err != nil {
				t.Fatal(err)
			}
			c := d.CategoriesAt(m)
			if c[Parameter] != tt.param || c[OptimizerState] != tt.optim || c[Gradient] != tt.grad || c[Activation] != tt.active {
				t.Errorf("end: parameter %d optimizer_state %d gradient %d activation %d; want %d %d %d %d",
					c[Parameter], c[OptimizerState], c[Gradient], c[Activation], tt.param, tt.optim, tt.grad, tt.active)
			}
			p := float64(c[Parameter])
			if r := float64(c[OptimizerState]) / (2 * p); r < 0.9 || r > 1.1 {
				t.Errorf("optimizer state / 2x parameters = %.3f", r)
			}
			if r := float64(c[Gradient]) / p; tt.checkGrad && (r < 0.9 || r > 1.1) {
				t.Errorf("gradients / parameters = %.3f", r)
			}
		})
	}
}

// TestCorpusStateAt checks the state StateAt rebuilds from lifetimes
// against the viewer's checkpointed state history (replay.History) at the
// peak, the reserved peak and the end of every real snapshot: reserved, requested
// and allocated bytes and the free bytes.
func TestCorpusStateAt(t *testing.T) {
	for _, f := range corpus.Files(t) {
		s := openReal(t, filepath.Base(f))
		for _, dev := range s.Devices() {
			d := NewDevice(s, dev)
			h := replay.NewHistory(s, dev)
			for _, spec := range []string{"peak", "reserved-peak", "end"} {
				m, err := d.Resolve(spec)
				if err != nil {
					t.Fatal(err)
				}
				got := d.StateAt(m)
				idx := sort.Search(h.Len(), func(p int) bool { return h.Event(p).Raw > m.Event }) - 1
				want := h.StateAt(idx)
				if got.Reserved != want.Reserved || got.Allocated != want.Allocated || got.RealAllocated != want.RealAllocated {
					t.Errorf("%s device %d %s: reserved %d requested %d allocated %d; history %d %d %d",
						filepath.Base(f), dev, spec, got.Reserved, got.Allocated, got.RealAllocated, want.Reserved, want.Allocated, want.RealAllocated)
				}
			}
		}
	}
}

// TestCorpusFragmentationCurve: the one-sweep curve equals the state at
// each of its points, on every real snapshot.
func TestCorpusFragmentationCurve(t *testing.T) {
	for _, f := range corpus.Files(t) {
		s := openReal(t, filepath.Base(f))
		for _, dev := range s.Devices() {
			d := NewDevice(s, dev)
			n := len(d.Active.Events)
			actions := []int{-1, n / 3, n / 2, d.Active.PeakAction, n - 1}
			sort.Ints(actions)
			curve := d.FragmentationCurve(actions)
			for j, k := range actions {
				m := Moment{Action: k, Event: d.eventOfAction(d.Active, k)}
				if want := d.FragmentationAt(m); curve[j] != want {
					t.Errorf("%s device %d action %d: curve %+v, state %+v", filepath.Base(f), dev, k, curve[j], want)
				}
			}
		}
	}
}

// TestCorpusCategorySites pins the hand check behind the totals: at the
// end of these AdamW runs every parameter has two optimizer states (one
// allocation site each, the course AdamW's zeros_like lines) and one
// gradient, made by the autograd engine's BmmBackward0 (weights),
// IndexBackward0 (embedding) and the reduction of broadcast gradients
// (biases, norms); the parameters are the stackless blocks from before the
// trace.
func TestCorpusCategorySites(t *testing.T) {
	type site struct {
		cat   Category
		rule  Rule   // 0: any
		frame string // substring of the innermost frame ("" = no stack)
		count int
		bytes uint64
	}
	for _, tt := range []struct {
		file  string
		sites []site
	}{
		{"cs336-notHanmin__memory_snapshot.pickle", []site{
			{Parameter, RuleWeightsPaired, "", 327, 3877647360},
			{OptimizerState, 0, "adapters.py:887:step", 327, 3877647360},
			{OptimizerState, 0, "adapters.py:888:step", 327, 3877647360},
			{Gradient, 0, "BmmBackward0::apply", 253, 3826073600},
			{Gradient, 0, "IndexBackward0::apply", 1, 51200000},
			{Gradient, 0, "resize_reduction", 73, 373760},
		}},
		{"cs336-kkaitlyn111__memory_files_memory_ctx256_fullstep_.pickle", []site{
			{Parameter, RuleWeightsPaired, "", 291, 13627238400},
			{OptimizerState, 0, "optimizers.py:82:step", 291, 13627238400},
			{OptimizerState, 0, "optimizers.py:84:step", 291, 13627238400},
			{Gradient, 0, "BmmBackward0::apply", 225, 13524172800},
			{Gradient, 0, "IndexBackward0::apply", 1, 102400000},
			{Gradient, 0, "resize_reduction", 65, 665600},
		}},
	} {
		d := NewDevice(openReal(t, tt.file), 0)
		m, _ := d.Resolve("end")
		a := d.LiveAnswer(m, LiveOptions{Depth: 1})
		for _, w := range tt.sites {
			found := false
			for _, s := range a.Sites {
				inner := ""
				if len(s.Frames) > 0 {
					inner = s.Frames[0]
				}
				if s.Category == w.cat.String() && (w.rule == 0 || strings.HasPrefix(s.CategoryReason, w.rule.String()+":")) && (w.frame == "" && inner == "" || w.frame != "" && strings.Contains(inner, w.frame)) {
					found = true
					if s.Count != w.count || s.Bytes != w.bytes {
						t.Errorf("%s %s %q: %d allocations, %d bytes; want %d, %d", tt.file, w.cat, w.frame, s.Count, s.Bytes, w.count, w.bytes)
					}
				}
			}
			if !found {
				t.Errorf("%s: no %s site %q", tt.file, w.cat, w.frame)
			}
		}
	}
}

// TestCorpusNewKinds pins the split at the peak of three real runs of
// kinds the AdamW pins do not cover, checked by hand:
//
//   - an inference run (cs336 silmont2000, memory_forward_fp32_128: the
//     model's forward only, recorded after it was built): the 137
//     stackless blocks from before the trace, alive to its end, are the
//     fp32 weights (523,811,840 B, about 131M parameters); the forward's
//     intermediates die in the pass (temporary);
//   - a fine-tune without a trace (verl's RL fine-tune with Megatron: the
//     state at the dump, stacks on the blocks): what Megatron's model
//     builders made in __init__ and Module.to/_apply are weights; what
//     get_megatron_optimizer made and keeps (the optimizer's fp32 copies)
//     is optimizer state; nine stackless blocks (303.5 MiB) and a cuBLAS
//     workspace have no rule;
//   - a run without annotations, from the oldest generation with stacks
//     (select_n, D2: no time_us, no annotations; BERT-large validation
//     under no_grad): the stackless blocks alive throughout are the
//     weights (1,340,706,024 B = 335M fp32 parameters); the batch
//     (validate_old.py:59-60) is input; the encoder's intermediates that
//     die in the pass are temporary, its output still held at the end
//     activation; the 32 MiB is cuBLAS's workspace.
func TestCorpusNewKinds(t *testing.T) {
	type split struct {
		cat   Category
		rule  Rule
		bytes uint64
		count int
	}
	for _, tt := range []struct {
		file  string
		event int
		want  []split
	}{
		{"cs336-silmont2000__memory_forward_fp32_128.pickle", 144, []split{
			{Parameter, RuleWeightsNoBackward, 523811840, 137},
			{Temporary, RuleForwardTemp, 33031168, 10},
		}},
		{"verl__mem.pickle", -1, []split{
			{Parameter, RuleModuleInit, 23886953280, 348},
			{OptimizerState, RuleOptimKept, 494080272, 91},
			{Unknown, RuleNone, 318252864, 9},
			{Parameter, RuleModuleApply, 178971904, 85},
			{Unknown, RuleWorkspace, 8519680, 1},
		}},
		{"select_n__snapshot__5a601013.pickle", 4487, []split{
			{Parameter, RuleWeightsNoBackward, 1340706024, 396},
			{Temporary, RuleForwardTemp, 534675456, 4},
			{Activation, RuleForwardSaved, 500072448, 1},
			{Unknown, RuleWorkspace, 33554432, 1},
			{Input, RuleInput, 37632, 2},
		}},
	} {
		d := NewDevice(openReal(t, tt.file), 0)
		m, err := d.Resolve("peak")
		if err != nil {
			t.Fatal(err)
		}
		if m.Event != tt.event {
			t.Errorf("%s: peak after event %d, want %d", tt.file, m.Event, tt.event)
		}
		type key struct {
			c Category
			r Rule
		}
		got := map[key]split{}
		var live uint64
		d.Active.Live(m.Action, func(i int) {
			k := key{d.Category(i), d.CategoryRule(i)}
			s := got[k]
			s.bytes += d.Active.Size(i)
			s.count++
			got[k] = s
			live += d.Active.Size(i)
		})
		var sum uint64
		for _, w := range tt.want {
			g := got[key{w.cat, w.rule}]
			if g.bytes != w.bytes || g.count != w.count {
				t.Errorf("%s: %s by %s: %d B in %d allocations, want %d in %d", tt.file, w.cat, w.rule, g.bytes, g.count, w.bytes, w.count)
			}
			sum += w.bytes
		}
		if sum != live {
			t.Errorf("%s: the pinned splits hold %d of the %d live bytes: %v", tt.file, sum, live, got)
		}
	}
}

// TestCorpusUnknownShare: on every device whose trace has allocations
// with stacks, unknown is at most 10% of what is live at the peak. It logs
// the table per file (go test -run TestCorpusUnknownShare -v): unknown's
// share as the issue defines it (of all live bytes), and beside it with
// the cuBLAS workspaces (rules workspace and workspace-size: not tensors,
// unknown by design) left out of both sides, for reference only.
func TestCorpusUnknownShare(t *testing.T) {
	t.Logf("%-70s %3s %14s %14s %8s %8s", "file", "dev", "live", "unknown", "unknown%", "w/o ws%")
	for _, f := range corpus.Files(t) {
		s := openReal(t, filepath.Base(f))
		for _, dev := range s.Devices() {
			if dev >= len(s.Traces) {
				continue
			}
			stacks := false
			for _, e := range s.Traces[dev].Events {
				if e.Action == snapshot.ActionAlloc && e.Stack != snapshot.NoStack {
					stacks = true
					break
				}
			}
			if !stacks {
				continue
			}
			d := NewDevice(s, dev)
			m, err := d.Resolve("peak")
			if err != nil {
				t.Fatal(err)
			}
			var live, unknown, ws uint64
			d.Active.Live(m.Action, func(i int) {
				sz := d.Active.Size(i)
				live += sz
				if d.Category(i) == Unknown {
					unknown += sz
					if r := d.CategoryRule(i); r == RuleWorkspace || r == RuleWorkspaceSize {
						ws += sz
					}
				}
			})
			share := float64(unknown) / float64(max(live, 1))
			noWS := float64(unknown-ws) / float64(max(live-ws, 1))
			t.Logf("%-70s %3d %14d %14d %7.2f%% %7.2f%%", filepath.Base(f), dev, live, unknown, 100*share, 100*noWS)
			if share > 0.10 {
				t.Errorf("%s device %d: unknown %.1f%% of %d live bytes at the peak", filepath.Base(f), dev, 100*share, live)
			}
		}
	}
}
