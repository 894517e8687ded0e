package analysis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/snapshot"
)

// trainStep is a hand-built training step with every kind of evidence the
// classifier uses; want maps each allocation's address to its category.
func trainStep(t *testing.T) (*Device, map[uint64]Category) {
	const (
		fwd     = "model.py:5:forward"
		call    = "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1750:_call_impl"
		seed    = "/venv/lib/python3.11/site-packages/torch/autograd/__init__.py:200:_make_grads"
		bwd     = "/venv/lib/python3.11/site-packages/torch/_tensor.py:600:backward"
		init    = "/venv/lib/python3.11/site-packages/torch/optim/adamw.py:100:_init_group"
		init2   = "/venv/lib/python3.11/site-packages/torch/optim/adamw.py:101:_init_group"
		adamw   = "/venv/lib/python3.11/site-packages/torch/optim/adamw.py:300:_single_tensor_adamw"
		wrapper = "/venv/lib/python3.11/site-packages/torch/optim/optimizer.py:493:wrapper"
		ws      = "??:0:at::cuda::getNewWorkspace()"
		segAddr = uint64(0x10000000)
		base    = uint64(0x20000000)
	)
	main := func(line string) string { return "train.py:" + line + ":main" }
	a := func(i int) uint64 { return base + uint64(i)*8*mb }
	type step struct {
		action string
		i      int
		size   uint64
		frames []string
	}
	steps := []step{
		{"alloc", 1, 1 * mb, []string{main("10")}},                  // x: the batch, made before the forward
		{"alloc", 2, 3 * mb, []string{fwd, call, main("11")}},       // saved for backward
		{"alloc", 3, 1 * mb, []string{fwd, call, main("11")}},       // freed inside the forward
		{"free", 3, 1 * mb, nil},                                    //
		{"alloc", 4, 512, []string{main("12")}},                     // loss
		{"alloc", 5, 512, []string{seed, bwd, main("13")}},          // backward's grad seed
		{"alloc", 6, 4 * mb, []string{}},                            // backward thread, no Python frames
		{"alloc", 7, 3 * mb, []string{}},                            // a backward intermediate
		{"free", 7, 3 * mb, nil},                                    //
		{"free", 2, 3 * mb, nil},                                    // the activation is used
		{"free", 5, 512, nil},                                       //
		{"alloc", 8, 2 * mb, []string{}},                            // second gradient
		{"alloc", 9, 32 * mb, []string{ws}},                         // cuBLAS workspace
		{"free", 4, 512, nil},                                       //
		{"alloc", 10, 4 * mb, []string{init, wrapper, main("14")}},  // exp_avg
		{"alloc", 11, 4 * mb, []string{init2, wrapper, main("14")}}, // exp_avg_sq
		{"alloc", 12, 2 * mb, []string{init, wrapper, main("14")}},
		{"alloc", 13, 2 * mb, []string{init2, wrapper, main("14")}},
		{"alloc", 14, 1 * mb, []string{adamw, wrapper, main("14")}}, // a step temporary
		{"free", 14, 1 * mb, nil},
		{"free", 1, 1 * mb, nil},
	}
	var events []ev
	for k, st := range steps {
		if st.action == "alloc" {
			events = append(events, ev{action: "alloc", addr: a(st.i), size: st.size, time: int64(k), frames: st.frames})
		} else {
			events = append(events,
				ev{action: "free_requested", addr: a(st.i), size: st.size, time: int64(k)},
				ev{action: "free_completed", addr: a(st.i), size: st.size, time: int64(k)})
		}
	}
	// Before the trace: two parameters, and a third 4 MiB block that
	// pairs by size but exceeds the one exp_avg per 4 MiB parameter.
	s := build(t, []seg{{addr: segAddr, blocks: []blk{
		{size: 4 * mb, req: 4 * mb, state: "active_allocated"},
		{size: 2 * mb, req: 2 * mb, state: "active_allocated"},
		{size: 4 * mb, req: 4 * mb, state: "active_allocated"},
		{size: 10 * mb, state: "inactive"},
	}}}, events)
	want := map[uint64]Category{
		segAddr: Parameter, segAddr + 4*mb: Parameter, segAddr + 6*mb: Unknown,
		a(1): Input, a(2): Activation, a(3): Temporary, a(4): Activation, a(5): AutogradDetail,
		a(6): Gradient, a(7): AutogradDetail, a(8): Gradient, a(9): Unknown,
		a(10): OptimizerState, a(11): OptimizerState, a(12): OptimizerState, a(13): OptimizerState, a(14): Temporary,
	}
	return NewDevice(s, 0), want
}

func TestClassify(t *testing.T) {
	d, want := trainStep(t)
	if d.Active.Len() != len(want) {
		t.Fatalf("%d allocations, want %d", d.Active.Len(), len(want))
	}
	for i := range d.Active.Len() {
		_, _, addr := d.itemSource(i)
		if got := d.Category(i); got != want[addr] {
			t.Errorf("allocation at %#x: %v, want %v", addr, got, want[addr])
		}
	}
	m, _ := d.Resolve("end")
	c := d.CategoriesAt(m)
	if c[Parameter] != 6*mb || c[OptimizerState] != 12*mb || c[Gradient] != 6*mb || c[Unknown] != 36*mb {
		t.Errorf("end totals %v", c)
	}
}

// TestRulesDocumented: docs/categories.md's rule table has a row for
// every rule, in classify's order of Rules() (none last there).
func TestRulesDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "categories.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, r := range Rules() {
		if !strings.Contains(doc, "\n| `"+r.String()+"` |") {
			t.Errorf("docs/categories.md has no row for rule %s", r)
		}
		if r.Reason() == "" {
			t.Errorf("rule %d has no reason", r)
		}
	}
}

// TestFrameEvidence: the frames each phase and strong rule is read from.
func TestFrameEvidence(t *testing.T) {
	for _, tt := range []struct {
		file, name string
		want       evidence
	}{
		{"??", "torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor> &&)", evEngine},
		{"??", "torch::autograd::generated::details::mm_mat1_backward(at::Tensor const&)", evEngine},
		{"??", "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)", evEngine},
		{"??", "torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor> &&)", evAccumulate},
		{"??", "at::cuda::getNewWorkspace()", evWorkspace},
		{"??", "c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::Bucket>)", evDDP},
		{"/venv/torch/nn/modules/module.py", "_call_impl", evPython | evForward},
		{"/tmp/torchinductor_root/x3/cx3.py", "call", evPython | evForward},
		{"/venv/torch/optim/adamw.py", "_init_group", evPython | evOptimInit | evOptim},
		{"/venv/megatron/core/optimizer/distrib_optimizer.py", "__init__", evPython | evOptim},
		{"/venv/torch/optim/optimizer.py", "zero_grad", evPython | evZeroGrad},
		{"/venv/torch/utils/checkpoint.py", "recompute_fn", evPython | evCheckpoint},
		{"/venv/torch/distributed/fsdp/_flat_param.py", "unshard", evPython | evFSDPGather},
		{"/venv/torch/distributed/fsdp/_flat_param.py", "flatten_tensors", evPython | evFSDPFlat},
		{"/venv/bitsandbytes/functional.py", "quantize_4bit", evPython | evQuant},
		{"/venv/peft/tuners/lora/layer.py", "forward", evPython | evAdapter | evForward},
		{"/venv/transformers/modeling_utils.py", "from_pretrained", evPython | evLoad},
		{"/venv/torch/utils/data/dataloader.py", "__next__", evPython | evDataLoader},
		{"train.py", "main", evPython},
	} {
		f := snapshot.Frame{Filename: tt.file, Name: tt.name}
		if got := frameEvidence(&f); got != tt.want {
			t.Errorf("%s:%s: evidence %b, want %b", tt.file, tt.name, got, tt.want)
		}
	}
}

// TestCountedGroups: stackless blocks from before the trace, alive to its
// end, of the size of a parameter whose gradient backward adds into in
// place (AccumulateGrad frees the incoming gradient and makes none) are
// counted per size: as many gradients as the first such pass adds into,
// then as many parameters as one optimizer-state site keeps; the rest
// stay unknown. Without the in-place adds (or where AccumulateGrad makes
// blocks of that size) no gradient is counted.
func TestCountedGroups(t *testing.T) {
	const (
		fwd     = "model.py:5:forward"
		call    = "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1750:_call_impl"
		node    = "??:0:torch::autograd::generated::MmBackward0::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"
		engine  = "??:0:torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"
		accum   = "??:0:torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)"
		bwd     = "/venv/lib/python3.11/site-packages/torch/_tensor.py:600:backward"
		init    = "/venv/lib/python3.11/site-packages/torch/optim/adamw.py:100:_init_group"
		init2   = "/venv/lib/python3.11/site-packages/torch/optim/adamw.py:101:_init_group"
		wrapper = "/venv/lib/python3.11/site-packages/torch/optim/optimizer.py:493:wrapper"
		segAddr = uint64(0x10000000)
		base    = uint64(0x20000000)
	)
	main := func(line string) string { return "train.py:" + line + ":main" }
	a := func(i int) uint64 { return base + uint64(i)*8*mb }
	// Two 4 MiB parameters, with two gradients kept from a backward
	// before the trace, and one more 4 MiB block from before it.
	before := []blk{}
	for k := 0; k < 5; k++ {
		before = append(before, blk{size: 4 * mb, req: 4 * mb, state: "active_allocated"})
	}
	events := func(accumMakes bool) []ev {
		out := []ev{
			{action: "alloc", addr: a(1), size: 1 * mb, time: 1, frames: []string{fwd, call, main("11")}}, // saved for backward
		}
		// Two backward passes: each adds into both kept gradients.
		for pass := 0; pass < 2; pass++ {
			for p := 0; p < 2; p++ {
				i := 2 + pass*2 + p
				out = append(out,
					ev{action: "alloc", addr: a(i), size: 4 * mb, time: 2, frames: []string{node, engine, bwd, main("12")}},
					ev{action: "free_requested", addr: a(i), size: 4 * mb, time: 3, frames: []string{accum, engine, bwd, main("12")}},
					ev{action: "free_completed", addr: a(i), size: 4 * mb, time: 3, frames: []string{accum, engine, bwd, main("12")}})
			}
			if pass == 0 {
				out = append(out,
					ev{action: "alloc", addr: a(6), size: 1 * mb, time: 4, frames: []string{fwd, call, main("11")}},
					ev{action: "free_requested", addr: a(6), size: 1 * mb, time: 4, frames: []string{fwd, call, main("11")}},
					ev{action: "free_completed", addr: a(6), size: 1 * mb, time: 4, frames: []string{fwd, call, main("11")}})
			}
		}
		if accumMakes {
			// AccumulateGrad making a 4 MiB block: its frees are old
			// gradients, not incoming ones.
			out = append(out, ev{action: "alloc", addr: a(9), size: 4 * mb, time: 5, frames: []string{accum, engine, bwd, main("12")}})
		}
		for k, f := range []string{init, init2, init, init2} {
			out = append(out, ev{action: "alloc", addr: a(10 + k), size: 4 * mb, time: 6, frames: []string{f, wrapper, main("14")}})
		}
		return out
	}
	for _, tt := range []struct {
		name                   string
		accumMakes             bool
		param, grad, unknownAt uint64 // bytes of the five blocks at the end
	}{
		{"in-place adds", false, 8 * mb, 8 * mb, 4 * mb},
		{"accumulate-grad makes blocks", true, 8 * mb, 0, 12 * mb},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDevice(build(t, []seg{{addr: segAddr, blocks: before}}, events(tt.accumMakes)), 0)
			var got [maxCategories]uint64
			rules := map[Rule]int{}
			for i := range d.Active.Len() {
				if _, _, addr := d.itemSource(i); addr >= segAddr && addr < segAddr+20*mb {
					got[d.Category(i)] += d.Active.Size(i)
					rules[d.CategoryRule(i)]++
				}
			}
			if got[Parameter] != tt.param || got[Gradient] != tt.grad || got[Unknown] != tt.unknownAt {
				t.Errorf("parameter %d gradient %d unknown %d, want %d %d %d (rules %v)", got[Parameter], got[Gradient], got[Unknown], tt.param, tt.grad, tt.unknownAt, rules)
			}
			if tt.grad > 0 && (rules[RuleGradsCounted] != 2 || rules[RuleWeightsCounted] != 2) {
				t.Errorf("rules %v, want 2 grads-counted and 2 weights-counted", rules)
			}
			for _, r := range []Rule{RuleGradsCounted, RuleWeightsCounted} {
				if !strings.Contains(r.Reason(), "which block is which is not recorded") {
					t.Errorf("%s's reason does not say the blocks are not told apart: %s", r, r.Reason())
				}
			}
		})
	}
}
