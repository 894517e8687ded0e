package synth

import (
	"fmt"

	"github.com/gpumem/gpumem/snapshot"
)

// The patterns are kinds of runs people record besides a plain training
// loop (Workload's pattern fields). Each is built on the mlp, and every
// allocation's kind is its true category (Result.Truth):
//
//   - Inference: the weights are loaded before recording begins (their
//     blocks have no stack and no trace entry), then forward passes under
//     no_grad: the batch is the input, everything the layers make dies in
//     the pass (temporary), nothing is saved for a backward.
//   - LoRA: a frozen base (loaded before recording, never given a
//     gradient; with Quant "4bit" bitsandbytes' packed weights and their
//     absmax quantization state, dequantized per layer in forward and
//     backward) and trainable rank-8 adapters, also made before recording;
//     gradients and AdamW state for the adapters only.
//   - OOMUnwind: with a capacity, the out-of-memory error in a forward pass
//     propagates and Python drops the forward's locals: every tensor the
//     pass made and still held is freed after the oom entry. They were
//     live at the OOM and scale with the batch: their truth is activation.
//   - NoAnnotations: no external annotations (older PyTorch): phases come
//     from stack frames alone.
//   - Checkpointing: each layer is checkpointed; backward recomputes its
//     forward (torch/utils/checkpoint.py's recompute_fn under the autograd
//     engine): the recomputed tensors are activations.
//   - DDP: gradient_as_bucket_view: the Reducer's buckets, made at
//     construction, hold the gradients (truth gradient); backward makes
//     no per-parameter gradient.
//   - MixedPrecision: bf16 parameters; the optimizer keeps fp32 master
//     copies and fp32 moments (optimizer state), made in its first step.
//   - FSDP (2 ranks, one unit per layer and one for the head): each unit's
//     flat parameter shard (half its parameters) is made at construction
//     (parameter); forward and backward all-gather the full flat parameter
//     before the unit runs and free it after (temporary); backward makes
//     the full gradient (autograd detail) and keeps the reduce-scattered
//     shard (gradient); AdamW keeps state per shard.
//   - KeptGrads: zero_grad(set_to_none=False) zeroes the gradients in
//     place, so they are kept from step to step, and recording began after
//     a first forward and backward (a warm-up micro-batch): the gradients
//     were made before the trace, have no stack and live throughout beside
//     the parameters of the same sizes (truth gradient). Each recorded
//     backward computes a parameter's incoming gradient (autograd detail)
//     and AccumulateGrad adds it into .grad in place and frees it. AdamW's
//     first step, recorded, makes its state.
//   - Compile: torch.compile; Inductor's generated code (call() in
//     /tmp/torchinductor_*/…py) makes the forward's and the compiled
//     backward's buffers; what the forward saves for backward is
//     activation, the rest temporary or autograd detail.

// loraRank is the adapters' rank.
const loraRank = 8

// ddpBucketBytes is DDP's default bucket_cap_mb.
const ddpBucketBytes = 25 << 20

func (w Workload) checkPatterns() error {
	any := w.Inference || w.LoRA || w.OOMUnwind || w.NoAnnotations || w.Checkpointing || w.DDP || w.MixedPrecision || w.Quant != "" || w.FSDP || w.Compile || w.KeptGrads
	if !any {
		return nil
	}
	if w.Model != "mlp" {
		return fmt.Errorf("the run patterns (inference, lora, oom-unwind, no-annotations, checkpointing, ddp, mixed-precision, fsdp, compile, kept-grads) are built on the mlp: use --model mlp")
	}
	if w.Quant != "" && (w.Quant != "4bit" || !w.LoRA) {
		return fmt.Errorf("quant %q: want 4bit, with lora", w.Quant)
	}
	if w.Inference && (w.LoRA || w.Checkpointing || w.DDP || w.MixedPrecision || w.Leak > 0) {
		return fmt.Errorf("inference runs no backward: it does not combine with lora, checkpointing, ddp, mixed-precision or leak")
	}
	if w.LoRA && (w.Checkpointing || w.DDP || w.MixedPrecision) {
		return fmt.Errorf("lora does not combine with checkpointing, ddp or mixed-precision")
	}
	if w.FSDP && (w.Inference || w.LoRA || w.Checkpointing || w.DDP || w.MixedPrecision) {
		return fmt.Errorf("fsdp does not combine with inference, lora, checkpointing, ddp or mixed-precision")
	}
	if w.KeptGrads && (w.Inference || w.LoRA || w.DDP || w.FSDP || w.MixedPrecision || w.OOMUnwind) {
		return fmt.Errorf("kept-grads does not combine with inference, lora, ddp, fsdp, mixed-precision or oom-unwind")
	}
	if w.MixedPrecision && w.DType != BF16 {
		return fmt.Errorf("mixed-precision keeps bf16 parameters: use --dtype bf16")
	}
	return nil
}

func (w Workload) patternString() string {
	out := ""
	for _, f := range []struct {
		on   bool
		name string
	}{{w.Inference, "inference"}, {w.LoRA, "lora"}, {w.OOMUnwind, "oom-unwind"}, {w.NoAnnotations, "no-annotations"},
		{w.Checkpointing, "checkpointing"}, {w.DDP, "ddp"}, {w.MixedPrecision, "mixed-precision"}, {w.FSDP, "fsdp"}, {w.Compile, "compile"}, {w.KeptGrads, "kept-grads"}} {
		if f.on {
			out += " " + f.name
		}
	}
	if w.Quant != "" {
		out += " quant=" + w.Quant
	}
	return out
}

func (p *program) beginForward() { p.inForward, p.fwdLive = true, p.fwdLive[:0] }
func (p *program) endForward()   { p.inForward = false }

// unwind frees what the failed forward pass made and still held, as the
// exception leaves train_step: the frees carry the frame that catches it.
func (p *program) unwind() {
	if p.unwindAt == snapshot.NoStack {
		p.unwindAt = p.st.intern([]frame{{userTrain, 218, "main"}, moduleFrame})
	}
	for k := len(p.fwdLive) - 1; k >= 0; k-- {
		id := p.fwdLive[k]
		if p.sizes[id] == 0 {
			continue
		}
		p.out.relabel(id, kindActivation)
		p.tick(0)
		if err := p.out.free(id, p.unwindAt, p.now); err != nil {
			return
		}
		p.sizes[id] = 0
		p.spare = append(p.spare, id)
	}
	p.inForward = false
}

// patternSites are the stacks the patterns add to the mlp's.
type patternSites struct {
	pred                          snapshot.StackID // argmax of the logits (inference)
	loraA, loraB, loraAdd         snapshot.StackID // the adapters' forward
	dequant, bDequant             snapshot.StackID // bitsandbytes dequantize_4bit in forward / backward
	bLoraB, bLoraA                snapshot.StackID // the adapters' backward
	recomputeLinear, recomputeAct snapshot.StackID // checkpoint's recomputation
	ddpBucket                     snapshot.StackID
	fsdpFlat, fsdpGather          snapshot.StackID // FSDP construction, forward all-gather
	fsdpGatherBwd, fsdpReduce     snapshot.StackID // backward all-gather, reduce-scattered gradient
	fsdpReshard                   snapshot.StackID
}

func newPatternSites(st *stackTable) patternSites {
	linear := frame{torchDir + "nn/modules/linear.py", 125, "forward"}
	container := frame{torchDir + "nn/modules/container.py", 250, "forward"}
	fwd := cat(nn(frame{userModel, 42, "forward"}), trainStep(154))
	peft := "/usr/local/lib/python3.11/site-packages/peft/tuners/lora/"
	bnb := "/usr/local/lib/python3.11/site-packages/bitsandbytes/"
	lora := func(line int64) []frame {
		return cat([]frame{{peft + "layer.py", line, "forward"}, callImpl, wrappedCall}, nn(container), fwd)
	}
	ckpt := torchDir + "utils/checkpoint.py"
	fsdp := torchDir + "distributed/fsdp/"
	gather := []frame{{fsdp + "_flat_param.py", 1415, "_alloc_padded_unsharded_flat_param"}, {fsdp + "_flat_param.py", 1360, "unshard"}, {fsdp + "_runtime_utils.py", 295, "_unshard"}}
	recompute := func(f frame) []frame {
		return cat(nn(f), nn(container), []frame{{ckpt, 1533, "recompute_fn"}, {ckpt, 1122, "unpack_hook"}}, backwardFrames("ReluBackward0"))
	}
	return patternSites{
		pred:    st.intern([]frame{{userTrain, 171, "evaluate"}, mainFrame, moduleFrame}),
		loraA:   st.intern(cat(nn(linear), lora(571))),
		loraB:   st.intern(cat(nn(linear), lora(572))),
		loraAdd: st.intern(lora(573)),
		dequant: st.intern(cat([]frame{{bnb + "functional.py", 1391, "dequantize_4bit"}, {bnb + "nn/modules.py", 491, "forward"}, callImpl, wrappedCall}, lora(560))),
		bDequant: st.intern(cat([]frame{{bnb + "functional.py", 1391, "dequantize_4bit"}, {bnb + "autograd/_functions.py", 402, "backward"}},
			backwardFrames("MatMul4BitBackward"))),
		bLoraB:          st.backward("MmBackward0"),
		bLoraA:          st.backward("MmBackward0"),
		recomputeLinear: st.intern(recompute(linear)),
		recomputeAct:    st.intern(recompute(frame{torchDir + "nn/modules/activation.py", 133, "forward"})),
		fsdpFlat: st.intern([]frame{{fsdp + "_flat_param.py", 790, "flatten_tensors"}, {fsdp + "_flat_param.py", 705, "_init_flat_param_and_metadata"},
			{fsdp + "_init_utils.py", 610, "_init_param_handle_from_params"}, {fsdp + "fully_sharded_data_parallel.py", 483, "__init__"}, {userTrain, 186, "main"}, moduleFrame}),
		fsdpGather:    st.intern(cat(gather, []frame{{fsdp + "_runtime_utils.py", 380, "_pre_forward_unshard"}, {fsdp + "fully_sharded_data_parallel.py", 853, "forward"}, callImpl, wrappedCall}, nn(container), fwd)),
		fsdpReshard:   st.intern(cat([]frame{{fsdp + "_runtime_utils.py", 395, "_post_forward_reshard"}, {fsdp + "fully_sharded_data_parallel.py", 857, "forward"}, callImpl, wrappedCall}, nn(container), fwd)),
		fsdpGatherBwd: st.intern(cat(gather, []frame{{fsdp + "_runtime_utils.py", 700, "_pre_backward_hook"}}, backwardFrames("AddmmBackward0"))),
		fsdpReduce:    st.intern(cat([]frame{{fsdp + "_runtime_utils.py", 905, "_reduce_grad"}, {fsdp + "_runtime_utils.py", 840, "_post_backward_hook"}}, backwardFrames("AddmmBackward0"))),
		ddpBucket: st.intern(cat(cpp("c10d::Reducer::initialize_buckets(std::vector<c10d::Reducer::Bucket, std::allocator<c10d::Reducer::Bucket> >)"),
			[]frame{{torchDir + "nn/parallel/distributed.py", 1190, "_ddp_init_helper"}, {torchDir + "nn/parallel/distributed.py", 870, "__init__"}, {userTrain, 189, "main"}, moduleFrame})),
	}
}

// runPattern runs the patterns that replace the mlp's training loop once
// its parameters are on the device; false when the plain loop runs.
func (m *mlp) runPattern() bool {
	m.ps = newPatternSites(m.st)
	switch {
	case m.w.Inference:
		m.out.startRecording()
		m.inference()
		return true
	case m.w.KeptGrads:
		// A warm-up forward and backward before recording makes the
		// gradients; the loop's zero_grad then keeps them.
		x := m.alloc(uint64(m.w.Batch)*uint64(m.w.Hidden)*m.e, kindInput, m.batchX)
		y := m.alloc(uint64(m.w.Batch)*8, kindInput, m.batchY)
		loss := m.forwardBackward()
		m.free(loss, m.lossFree)
		m.free(x, m.freeBatch)
		m.free(y, m.freeBatch)
		m.out.startRecording()
	case m.w.DDP:
		m.ddp = true
		var bucket uint64
		for i := len(m.psize) - 1; i >= 0; i-- {
			bucket += m.psize[i]
			if bucket >= ddpBucketBytes || i == 0 {
				m.alloc(bucket, kindGrad, m.ps.ddpBucket)
				bucket = 0
			}
		}
	}
	return false
}

// inference runs Steps forward passes under no_grad.
func (m *mlp) inference() {
	e, B, H, C := m.e, uint64(m.w.Batch), uint64(m.w.Hidden), uint64(mlpClasses)
	for step := 0; step < m.w.Steps && m.err == nil; step++ {
		name := fmt.Sprintf("ProfilerStep#%d", step)
		m.annotate(name, "START")
		x := m.alloc(B*H*e, kindInput, m.batchX)
		m.beginForward()
		prev := x
		for l := 0; l < m.w.Layers; l++ {
			m.flops(2 * B * H * H)
			z := m.alloc(B*H*e, kindTemp, m.linear)
			if prev != x {
				m.free(prev, m.linear)
			}
			a := m.alloc(B*H*e, kindTemp, m.relu)
			m.free(z, m.relu)
			prev = a
		}
		logits := m.alloc(B*C*e, kindTemp, m.head)
		if prev != x {
			m.free(prev, m.head)
		}
		m.endForward()
		pred := m.alloc(B*8, kindTemp, m.ps.pred)
		m.free(logits, m.ps.pred)
		m.free(pred, m.freeBatch)
		m.free(x, m.freeBatch)
		m.annotate(name, "END")
		if m.err == nil {
			m.stepsDone++
		}
		m.now += 100 + int64(m.rng.IntN(200))
	}
}

// loraRun loads the frozen base and the adapters, starts recording and
// trains the adapters.
func (m *mlp) loraRun() {
	e, H, C := m.e, uint64(m.w.Hidden), uint64(mlpClasses)
	r := uint64(loraRank)
	for l := 0; l < m.w.Layers; l++ {
		if m.w.Quant == "4bit" {
			m.alloc(H*H/2, kindParam, m.opt.toDevice)    // packed 4-bit weight
			m.alloc(H*H/64*4, kindParam, m.opt.toDevice) // absmax per 64-block
		} else {
			m.alloc(H*H*e, kindParam, m.opt.toDevice)
		}
		m.alloc(H*e, kindParam, m.opt.toDevice) // bias
		m.addParam(r*H*e, m.opt.toDevice)       // lora_A
		m.addParam(H*r*e, m.opt.toDevice)       // lora_B
	}
	m.alloc(C*H*e, kindParam, m.opt.toDevice) // the head, frozen
	m.alloc(C*e, kindParam, m.opt.toDevice)
	m.ps = newPatternSites(m.st)
	m.out.startRecording()
	m.trainLoop(&m.trainSites, &m.opt, uint64(m.w.Batch)*H*e, uint64(m.w.Batch)*8, 100, m.forwardBackward)
}

// patternForwardBackward is the training step of LoRA and checkpointing.
func (m *mlp) patternForwardBackward() tensorID {
	e, B, H, C := m.e, uint64(m.w.Batch), uint64(m.w.Hidden), uint64(mlpClasses)
	r := uint64(loraRank)
	L := m.w.Layers
	quant := m.w.Quant == "4bit"
	m.beginForward()
	acts := make([]tensorID, L)
	ts := make([]tensorID, L) // x @ lora_A, saved for lora_B's backward
	for l := 0; l < L && m.err == nil; l++ {
		m.flops(2 * B * H * H)
		var wd tensorID = none
		if quant {
			wd = m.alloc(H*H*e, kindTemp, m.ps.dequant)
		}
		z := m.alloc(B*H*e, kindTemp, m.linear)
		m.free(wd, m.ps.dequant)
		if m.w.LoRA {
			ts[l] = m.alloc(B*r*e, kindActivation, m.ps.loraA)
			u := m.alloc(B*H*e, kindTemp, m.ps.loraB)
			y := m.alloc(B*H*e, kindTemp, m.ps.loraAdd)
			m.free(z, m.ps.loraAdd)
			m.free(u, m.ps.loraAdd)
			z = y
		}
		acts[l] = m.alloc(B*H*e, kindActivation, m.relu)
		m.free(z, m.relu)
	}
	m.flops(2 * B * H * C)
	logits := m.alloc(B*C*e, kindTemp, m.head)
	lsm := m.alloc(B*C*4, kindActivation, m.logSoftmax)
	m.free(logits, m.logSoftmax)
	loss := m.alloc(4, kindActivation, m.nll)
	if m.err != nil {
		return loss
	}
	g2 := m.lossBackward(&m.trainSites, B*C, B*C*e, lsm)
	n := len(m.params)
	if !m.w.LoRA {
		m.grad(n-2, m.bHead)
		m.grad(n-1, m.bHead)
	}
	gx := m.alloc(B*H*e, kindAutograd, m.bHead)
	m.free(g2, m.bHead)
	for l := L - 1; l >= 0 && m.err == nil; l-- {
		var za, aa tensorID = none, none
		if m.w.Checkpointing {
			// Recompute the layer from its saved input.
			za = m.alloc(B*H*e, kindActivation, m.ps.recomputeLinear)
			aa = m.alloc(B*H*e, kindActivation, m.ps.recomputeAct)
			m.free(za, m.ps.recomputeAct)
		}
		gz := m.alloc(B*H*e, kindAutograd, m.bRelu)
		m.free(gx, m.bRelu)
		m.free(aa, m.bRelu)
		m.free(acts[l], m.bRelu)
		m.flops(4 * B * H * H)
		if m.w.LoRA {
			m.grad(2*l+1, m.ps.bLoraB) // lora_B
			gt := m.alloc(B*r*e, kindAutograd, m.ps.bLoraB)
			m.free(ts[l], m.ps.bLoraB)
			m.grad(2*l, m.ps.bLoraA) // lora_A
			gx = none
			if l > 0 {
				var wd tensorID = none
				if quant {
					wd = m.alloc(H*H*e, kindAutograd, m.ps.bDequant)
				}
				gx = m.alloc(B*H*e, kindAutograd, m.bLinear)
				m.free(wd, m.bLinear)
			}
			m.free(gt, m.bLinear)
		} else {
			m.grad(2*l, m.bLinear)
			m.grad(2*l+1, m.bLinear)
			gx = none
			if l > 0 {
				gx = m.alloc(B*H*e, kindAutograd, m.bLinear)
			}
		}
		m.free(gz, m.bLinear)
	}
	return loss
}

// fsdpRun shards each unit's flat parameter at construction and trains.
func (m *mlp) fsdpRun() {
	e, H, C := m.e, uint64(m.w.Hidden), uint64(mlpClasses)
	m.ps = newPatternSites(m.st)
	m.fsdpFull = nil
	for l := 0; l < m.w.Layers; l++ {
		m.fsdpFull = append(m.fsdpFull, H*H*e+H*e)
	}
	m.fsdpFull = append(m.fsdpFull, C*H*e+C*e)
	for _, full := range m.fsdpFull {
		m.addParam((full+1)/2, m.ps.fsdpFlat) // this rank's shard
	}
	m.trainLoop(&m.trainSites, &m.opt, uint64(m.w.Batch)*H*e, uint64(m.w.Batch)*8, 100, m.fsdpForwardBackward)
}

// fsdpForwardBackward is an FSDP training step: each unit all-gathers
// its flat parameter before it runs and frees it after.
func (m *mlp) fsdpForwardBackward() tensorID {
	e, B, H, C := m.e, uint64(m.w.Batch), uint64(m.w.Hidden), uint64(mlpClasses)
	L := m.w.Layers
	m.beginForward()
	acts := make([]tensorID, L)
	for l := 0; l < L && m.err == nil; l++ {
		g := m.alloc(m.fsdpFull[l], kindTemp, m.ps.fsdpGather)
		m.flops(2 * B * H * H)
		z := m.alloc(B*H*e, kindTemp, m.linear)
		acts[l] = m.alloc(B*H*e, kindActivation, m.relu)
		m.free(z, m.relu)
		m.free(g, m.ps.fsdpReshard)
	}
	g := m.alloc(m.fsdpFull[L], kindTemp, m.ps.fsdpGather)
	logits := m.alloc(B*C*e, kindTemp, m.head)
	m.free(g, m.ps.fsdpReshard)
	lsm := m.alloc(B*C*4, kindActivation, m.logSoftmax)
	m.free(logits, m.logSoftmax)
	loss := m.alloc(4, kindActivation, m.nll)
	if m.err != nil {
		return loss
	}
	g2 := m.lossBackward(&m.trainSites, B*C, B*C*e, lsm)
	gw := m.alloc(m.fsdpFull[L], kindTemp, m.ps.fsdpGatherBwd)
	full := m.alloc(m.fsdpFull[L], kindAutograd, m.bHead)
	m.grad(L, m.ps.fsdpReduce)
	m.free(full, m.ps.fsdpReduce)
	gx := m.alloc(B*H*e, kindAutograd, m.bHead)
	m.free(g2, m.bHead)
	m.free(gw, m.bHead)
	for l := L - 1; l >= 0 && m.err == nil; l-- {
		gw := m.alloc(m.fsdpFull[l], kindTemp, m.ps.fsdpGatherBwd)
		gz := m.alloc(B*H*e, kindAutograd, m.bRelu)
		m.free(gx, m.bRelu)
		m.free(acts[l], m.bRelu)
		m.flops(4 * B * H * H)
		full := m.alloc(m.fsdpFull[l], kindAutograd, m.bLinear)
		m.grad(l, m.ps.fsdpReduce)
		m.free(full, m.ps.fsdpReduce)
		gx = none
		if l > 0 {
			gx = m.alloc(B*H*e, kindAutograd, m.bLinear)
		}
		m.free(gz, m.bLinear)
		m.free(gw, m.bLinear)
	}
	return loss
}

// compileSites swaps the mlp's stacks for torch.compile's: Inductor's
// generated call() under the compiled forward, and under the compiled
// backward (CompiledFunctionBackward).
func (m *mlp) compileSites() {
	st := m.st
	aot := torchDir + "_functorch/_aot_autograd/runtime_wrappers.py"
	fwd := func(line int64) snapshot.StackID {
		return st.intern(cat([]frame{{"/tmp/torchinductor_root/x3/cx3kq7vbwzm5.py", line, "call"}, {torchDir + "_inductor/output_code.py", 466, "__call__"},
			{aot, 336, "runtime_wrapper"}, {aot, 1769, "forward"}, {torchDir + "autograd/function.py", 575, "apply"}, {torchDir + "_dynamo/eval_frame.py", 655, "_fn"},
			callImpl, wrappedCall}, trainStep(154)))
	}
	bwd := func(line int64) snapshot.StackID {
		return st.intern(cat([]frame{{"/tmp/torchinductor_root/y7/cy7d2mfa4k3q.py", line, "call"}, {torchDir + "_inductor/output_code.py", 466, "__call__"},
			{aot, 2105, "call_compiled_backward"}, {aot, 2153, "backward"}, {torchDir + "autograd/function.py", 307, "apply"}},
			backwardFrames("CompiledFunctionBackward")))
	}
	m.linear, m.relu, m.head = fwd(120), fwd(124), fwd(131)
	m.bHead, m.bRelu, m.bLinear = bwd(210), bwd(214), bwd(218)
}
