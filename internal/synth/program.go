package synth

import (
	"math/rand/v2"

	"github.com/gpumem/gpumem/snapshot"
)

// kind says what a tensor is for; tests use it to check the workload's
// lifetimes (parameters and optimizer states live forever, activations die
// in backward, temporaries right away).
type kind uint8

const (
	kindParam kind = iota
	kindGrad
	kindOptState
	kindActivation
	kindTemp
	kindInput
	kindLeak     // kept by the user's code every step (Workload.Leak)
	kindAutograd // made and freed by backward (autograd detail)
	numKinds
)

var kindNames = [numKinds]string{"param", "grad", "optimizer_state", "activation", "temporary", "input", "leak", "autograd_detail"}

// categoryOf is the memory category (as gpumem's answers name it) of a
// tensor of kind k.
var categoryOf = [numKinds]string{"parameter", "gradient", "optimizer_state", "activation", "temporary", "input", "leak", "autograd_detail"}

func (k kind) String() string { return kindNames[k] }

// tensorID names a live synthetic tensor; ids are reused after a free.
type tensorID int32

// sink receives the training loop's allocator calls in program order. An
// error (out of memory) stops the program.
type sink interface {
	malloc(id tensorID, size uint64, k kind, stack snapshot.StackID, timeUS int64) error
	free(id tensorID, stack snapshot.StackID, timeUS int64) error
	annotate(name, stage string, timeUS int64)
	// startRecording marks where _record_memory_history was called:
	// what came before is not in the trace, and its blocks carry no stack.
	startRecording()
	// relabel sets the true kind of live tensor id (an OOM's unwind).
	relabel(id tensorID, k kind)
}

// startTimeUS is the synthetic run's first timestamp (2026-01-01 00:00 UTC),
// fixed so that output depends only on the workload and seed.
const startTimeUS int64 = 1767225600000000

// program is one synthetic training run in progress.
type program struct {
	w     Workload
	e     uint64 // element size
	rng   *rand.Rand
	now   int64
	out   sink
	st    *stackTable
	err   error
	sizes []uint64 // by tensorID; 0 when free
	kinds []kind
	spare []tensorID

	params []tensorID
	psize  []uint64
	grads  []tensorID
	states []tensorID // exp_avg, exp_avg_sq per param, created at first step

	stepsDone int

	// inForward is set during a forward pass; fwdLive lists the tensors
	// it made (for Workload.OOMUnwind).
	inForward bool
	fwdLive   []tensorID
	unwindAt  snapshot.StackID
	ddp       bool // gradients are bucket views: backward allocates none
	// accumulate is AccumulateGrad's stack (Workload.KeptGrads), interned
	// on first use.
	accumulate snapshot.StackID
}

const none tensorID = -1

func newProgram(w Workload, out sink) *program {
	return &program{
		w:   w,
		e:   w.DType.Size(),
		rng: rand.New(rand.NewPCG(uint64(w.Seed), 0x5eed_6a7e_0f_5717)),
		now: startTimeUS,
		out: out,
		st:  newStackTable(),
	}
}

// tick advances the clock by a kernel launch gap plus time proportional to
// the bytes touched (about 1.5 TB/s), with jitter.
func (p *program) tick(bytes uint64) {
	p.now += 2 + int64(p.rng.IntN(14)) + int64(bytes/1_500_000)
}

// flops advances the clock by the time a kernel of n floating-point
// operations takes at a sustained 20 TFLOP/s (fp32/TF32) or 60 TFLOP/s
// (bf16), so that steps last as long as they would on a data-centre GPU.
func (p *program) flops(n uint64) {
	rate := uint64(20_000_000) // per µs
	if p.w.DType == BF16 {
		rate = 60_000_000
	}
	p.now += int64(n / rate)
}

func (p *program) alloc(size uint64, k kind, stack snapshot.StackID) tensorID {
	if p.err != nil {
		return none
	}
	p.tick(size)
	var id tensorID
	if n := len(p.spare); n > 0 {
		id = p.spare[n-1]
		p.spare = p.spare[:n-1]
	} else {
		id = tensorID(len(p.sizes))
		p.sizes = append(p.sizes, 0)
		p.kinds = append(p.kinds, 0)
	}
	p.sizes[id], p.kinds[id] = size, k
	if err := p.out.malloc(id, size, k, stack, p.now); err != nil {
		p.err = err
		p.sizes[id] = 0
		p.spare = append(p.spare, id)
		if p.inForward && p.w.OOMUnwind {
			p.unwind()
		}
		return none
	}
	if p.inForward {
		p.fwdLive = append(p.fwdLive, id)
	}
	return id
}

func (p *program) free(id tensorID, stack snapshot.StackID) {
	if p.err != nil || id == none || p.sizes[id] == 0 {
		return
	}
	p.tick(0)
	if err := p.out.free(id, stack, p.now); err != nil {
		p.err = err
		return
	}
	p.sizes[id] = 0
	p.spare = append(p.spare, id)
}

func (p *program) annotate(name, stage string) {
	if p.err != nil || p.w.NoAnnotations {
		return
	}
	p.now += 1 + int64(p.rng.IntN(4))
	p.out.annotate(name, stage, p.now)
}

// addParam registers a parameter made by model.to("cuda") at stack s.
func (p *program) addParam(size uint64, s snapshot.StackID) {
	p.params = append(p.params, p.alloc(size, kindParam, s))
	p.psize = append(p.psize, size)
	p.grads = append(p.grads, none)
}

// grad allocates parameter i's gradient the first time backward reaches it
// in a step (AccumulateGrad steals the computed tensor as .grad).
//
// With Workload.KeptGrads a gradient kept from before is added into in
// place: the node computes the incoming gradient and AccumulateGrad adds
// it to .grad and frees it.
func (p *program) grad(i int, s snapshot.StackID) {
	switch {
	case p.ddp:
	case p.grads[i] == none:
		p.grads[i] = p.alloc(p.psize[i], kindGrad, s)
	case p.w.KeptGrads:
		g := p.alloc(p.psize[i], kindAutograd, s)
		if p.accumulate == snapshot.NoStack {
			p.accumulate = p.st.intern(accumulateFrames())
		}
		p.free(g, p.accumulate)
	}
}

// run executes the whole training loop.
func (p *program) run() error {
	if p.w.Model == "mlp" {
		newMLP(p).run()
	} else {
		newTransformer(p).run()
	}
	return p.err
}

// common sites shared by both models.
type optimSites struct {
	toDevice  snapshot.StackID // model.to("cuda") parameter copies
	zeroGrad  snapshot.StackID
	initState snapshot.StackID
	sqrt      snapshot.StackID
	sqrtFree  snapshot.StackID
	endStep   snapshot.StackID
}

func newOptimSites(st *stackTable) optimSites {
	adamw := torchDir + "optim/adamw.py"
	optim := torchDir + "optim/optimizer.py"
	stepFrames := func(line int64, fn string) []frame {
		return cat([]frame{
			{adamw, line, fn},
			{adamw, 243, "adamw"},
			{optim, 155, "maybe_fallback"},
			{adamw, 209, "step"},
			{optim, 485, "wrapper"},
			{torchDir + "optim/lr_scheduler.py", 124, "wrapper"},
		}, trainStep(159))
	}
	apply := frame{torchDir + "nn/modules/module.py", 928, "_apply"}
	return optimSites{
		toDevice: st.intern(cat(
			cpp("at::native::_to_copy(at::Tensor const&, std::optional<c10::ScalarType>, std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, bool, std::optional<c10::MemoryFormat>)"),
			[]frame{
				{torchDir + "nn/modules/module.py", 1341, "convert"},
				{torchDir + "nn/modules/module.py", 955, "_apply"},
				apply, apply,
				{torchDir + "nn/modules/module.py", 1355, "to"},
				{userTrain, 187, "main"}, moduleFrame,
			})),
		zeroGrad: st.intern(cat([]frame{
			{optim, 968, "zero_grad"},
			{torchDir + "_compile.py", 32, "inner"},
		}, trainStep(150))),
		initState: st.intern(stepFrames(118, "_init_group")),
		sqrt:      st.intern(stepFrames(570, "_multi_tensor_adamw")),
		sqrtFree:  st.intern(stepFrames(585, "_multi_tensor_adamw")),
		endStep:   st.intern(trainStep(161)),
	}
}

// zeroGrad is optimizer.zero_grad() with set_to_none=True: grads are
// freed; with Workload.KeptGrads set_to_none=False: they are zeroed in
// place (torch._foreach_zero_), which allocates nothing.
func (p *program) zeroGrad(s *optimSites) {
	p.annotate("Optimizer.zero_grad#AdamW.zero_grad", "START")
	if p.w.KeptGrads {
		p.annotate("Optimizer.zero_grad#AdamW.zero_grad", "END")
		return
	}
	for i, g := range p.grads {
		p.free(g, s.zeroGrad)
		p.grads[i] = none
	}
	p.annotate("Optimizer.zero_grad#AdamW.zero_grad", "END")
}

// optimizerStep is AdamW.step() with the default foreach implementation:
// exp_avg and exp_avg_sq are created lazily at the first step and kept, and
// _multi_tensor_adamw makes one temporary per parameter
// (torch._foreach_sqrt(exp_avg_sqs)) that dies at the end of the step.
func (p *program) optimizerStep(s *optimSites) {
	p.annotate("Optimizer.step#AdamW.step", "START")
	// Mixed precision: fp32 master copies and moments of bf16 parameters.
	mult := uint64(1)
	if p.w.MixedPrecision {
		mult = 2
	}
	if p.states == nil {
		for i := range p.params {
			if p.w.MixedPrecision {
				p.states = append(p.states, p.alloc(mult*p.psize[i], kindOptState, s.initState))
			}
			p.states = append(p.states,
				p.alloc(mult*p.psize[i], kindOptState, s.initState),
				p.alloc(mult*p.psize[i], kindOptState, s.initState))
		}
	}
	tmp := make([]tensorID, len(p.params))
	for i := range p.params {
		tmp[i] = p.alloc(mult*p.psize[i], kindTemp, s.sqrt)
	}
	for i := range p.params {
		p.tick(3 * p.psize[i])
	}
	for _, t := range tmp {
		p.free(t, s.sqrtFree)
	}
	p.annotate("Optimizer.step#AdamW.step", "END")
}
