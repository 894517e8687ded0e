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
	if len(d.Active.Items) != len(want) {
		t.Fatalf("%d allocations, want %d", len(d.Active.Items), len(want))
	}
	for i := range d.Active.Items {
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
