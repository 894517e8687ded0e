package estimate

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// Options describe the job: the model, its precision, the optimizer, the
// batch and the memory-saving techniques. Batch is per GPU.
type Options struct {
	Model  *Model // nil when only the parameter count is known
	Params int64  // the parameter count when Model is nil

	Dtype          string // fp32, bf16 or fp16: weights, gradients and activations (when Precision is empty)
	MixedPrecision bool   // 16-bit weights and gradients plus fp32 master weights in the optimizer
	// Precision, when set, replaces Dtype/MixedPrecision: fp32, bf16, fp16
	// (weights, gradients, optimizer state and activations in that type,
	// as torch.optim keeps state in the parameter's dtype), amp-bf16 or
	// amp-fp16 (fp32 weights, gradients and state; autocast activations
	// and a 16-bit copy of each Linear weight cached through the step).
	Precision string
	// Weights, when set, stores the frozen base weights as bf16, fp16,
	// fp32, int8 (bitsandbytes LLM.int8), nf4 or fp4 (bitsandbytes 4-bit);
	// the quantized kinds need LoRA.
	Weights       string
	DoubleQuant   bool   // 4-bit: quantize the absmax constants too (QLoRA's double quantization)
	Optimizer     string // adamw, adam, sgd, sgd-momentum, adafactor, adamw-8bit, paged-adamw-8bit, paged-adamw
	OptimizerImpl string // foreach (PyTorch's default), fused, loop
	OptimizerLoop bool   // per-parameter update loop: OptimizerImpl "loop"
	KeepGrads     bool   // zero_grad(set_to_none=False): gradients stay allocated through the forward
	FirstStep     bool   // the first step: the optimizer state appears only in the optimizer step
	LogitsFP32    bool   // the loss upcasts the logits to fp32 (Hugging Face's causal-LM loss)
	NoDropout     bool   // train without the config's dropout (no masks)

	Batch, Seq        int
	GradCheckpointing bool
	FlashAttention    bool
	ZeRO              int    // 0..3
	FSDP              bool   // FSDP full sharding: ZeRO-3's partitioning with each block wrapped
	GPUs              int    // data-parallel GPUs per node the ZeRO stages shard over
	Nodes             int    // nodes (0 or 1: one)
	Offload           string // "", optimizer, params, both (DeepSpeed ZeRO-Offload/Infinity to CPU)
	LoRARank          int    // >0: only rank-r adapters train
	LoRATargets       string // all (attention and MLP projections, the default) or attention
	Inference         bool

	Calibration *Calibration // measured activations and step temporaries from small real runs

	CUDAContext   int64   // bytes the CUDA context takes outside the allocator
	CacheOverhead float64 // allocator caching and fragmentation, a fraction of the peak
}

// DefaultCUDAContext is the memory a CUDA context and PyTorch's kernels
// take on the device before the first tensor (about 500 MiB on recent GPUs
// with lazy module loading); the allocator never sees it, so snapshots
// don't either.
const DefaultCUDAContext = 512 << 20

// DefaultCacheOverhead is reserved-but-unallocated memory as a fraction of
// the allocated peak: the caching allocator's rounding, split blocks and
// cached free segments (2% to 12% in the real training runs of the test
// corpus; gpumem estimate --check shows a run's own).
const DefaultCacheOverhead = 0.10

// Term keys, as in the JSON "terms" object.
const (
	TermParameters             = "parameters"
	TermGradients              = "gradients"
	TermOptimizerState         = "optimizer_state"
	TermOptimizerIntermediates = "optimizer_intermediates"
	TermActivations            = "activations"
	TermKVCache                = "kv_cache"
	TermAutocastCache          = "autocast_cache"
	TermCUDAContext            = "cuda_context"
	TermAllocatorOverhead      = "allocator_overhead"
)

// Term is one part of the estimate with the formula that gave it.
type Term struct {
	Key     string
	Name    string
	Bytes   int64
	Formula string
}

// Phase is the memory in use at one point of a training step.
type Phase struct {
	Name    string
	Bytes   int64
	Formula string
	Temps   int64 // of Bytes, what lives only inside the phase (logits gradient, optimizer intermediates)
}

// Result is an estimate for one GPU.
type Result struct {
	Options    Options
	Parameters int64 // the model's exact count
	Trainable  int64 // parameters with gradients and optimizer state (adapters only with LoRA)
	Terms      []Term
	Heuristic  *Term // the blog's linear activation heuristic, for comparison
	Arch       *Term // with a calibration: the architecture's activations, for comparison
	Phases     []Phase
	BlogPeak   int64 // the blog's peak: model + optimizer + max(gradients + intermediates, activations)
	PeakBytes  int64 // allocated peak: the largest phase (at least BlogPeak in steady state)
	TotalBytes int64 // what the GPU must hold: peak + allocator overhead + CUDA context
	HostBytes  int64 // host RAM per node for offloaded state (0 without --offload)
	HostNote   string
}

// Term returns the bytes of the term with key k (0 when absent).
func (r *Result) Term(k string) int64 {
	for _, t := range r.Terms {
		if t.Key == k {
			return t.Bytes
		}
	}
	return 0
}

var dtypeBytes = map[string]int64{"fp32": 4, "bf16": 2, "fp16": 2}

// optimizerStates is how many full-size states each optimizer keeps per
// trainable parameter (Adafactor's and the 8-bit AdamW's are computed apart).
var optimizerStates = map[string]int64{"adamw": 2, "adam": 2, "sgd": 0, "sgd-momentum": 1, "adafactor": 0,
	"adamw-8bit": 0, "paged-adamw-8bit": 0, "paged-adamw": 2}

// Optimizers lists the names Options.Optimizer accepts.
func Optimizers() []string {
	return []string{"adamw", "adam", "sgd", "sgd-momentum", "adafactor", "adamw-8bit", "paged-adamw-8bit", "paged-adamw"}
}

// Precisions lists the names Options.Precision accepts.
func Precisions() []string { return []string{"fp32", "bf16", "fp16", "amp-bf16", "amp-fp16"} }

// WeightKinds lists the names Options.Weights accepts.
func WeightKinds() []string { return []string{"fp32", "bf16", "fp16", "int8", "nf4", "fp4"} }

// precision is the bytes per element of each kind of tensor.
type precision struct {
	W, G, S, A int64 // weights, gradients, optimizer state, activations
	Master     bool  // an fp32 master copy in the optimizer
	Autocast   bool  // autocast caches a 16-bit copy of each Linear weight
	Name       string
}

func (o *Options) precision() precision {
	switch o.Precision {
	case "fp32":
		return precision{4, 4, 4, 4, false, false, "fp32"}
	case "bf16", "fp16":
		return precision{2, 2, 2, 2, false, false, o.Precision + " (weights, gradients, state, activations)"}
	case "amp-bf16", "amp-fp16":
		return precision{4, 4, 4, 2, false, true, o.Precision + " (fp32 weights, gradients and state; " + o.Precision[4:] + " autocast activations)"}
	}
	P := dtypeBytes[o.Dtype]
	if o.MixedPrecision {
		return precision{P, P, 4, P, true, false, o.Dtype + " + fp32 master weights"}
	}
	return precision{P, P, P, P, false, false, o.Dtype}
}

func (o *Options) impl() string {
	if o.OptimizerLoop {
		return "loop"
	}
	if o.OptimizerImpl == "" {
		return "foreach"
	}
	return o.OptimizerImpl
}

// TotalGPUs is the data-parallel world size.
func (o *Options) TotalGPUs() int64 { return int64(o.GPUs) * int64(max(o.Nodes, 1)) }

func (o *Options) quantized() bool {
	return o.Weights == "int8" || o.Weights == "nf4" || o.Weights == "fp4"
}

func (o *Options) stage() int {
	if o.FSDP {
		return 3
	}
	return o.ZeRO
}

func (o *Options) offloadOptimizer() bool { return o.Offload == "optimizer" || o.Offload == "both" }
func (o *Options) offloadParams() bool    { return o.Offload == "params" || o.Offload == "both" }

// loraTargets reports whether the adapters go on a matrix of this part.
func (o *Options) loraTarget(part string) bool {
	if o.LoRATargets == "attention" {
		return part == "attention"
	}
	return part == "attention" || part == "mlp"
}

func oneOf(v string, list []string) bool {
	for _, s := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (o *Options) check() error {
	if _, ok := dtypeBytes[o.Dtype]; !ok {
		return fmt.Errorf("dtype %q: want fp32, bf16 or fp16", o.Dtype)
	}
	if o.MixedPrecision && o.Dtype == "fp32" {
		return errors.New("--mixed-precision needs --dtype bf16 or fp16 (the fp32 copy is the master)")
	}
	if o.Precision != "" && !oneOf(o.Precision, Precisions()) {
		return fmt.Errorf("precision %q: want one of %s", o.Precision, strings.Join(Precisions(), ", "))
	}
	if o.Precision != "" && o.MixedPrecision {
		return errors.New("--precision replaces --mixed-precision: give one (amp-bf16 is fp32 master weights with bf16 activations)")
	}
	if o.Weights != "" && !oneOf(o.Weights, WeightKinds()) {
		return fmt.Errorf("weights %q: want one of %s", o.Weights, strings.Join(WeightKinds(), ", "))
	}
	if o.DoubleQuant && o.Weights != "nf4" && o.Weights != "fp4" {
		return errors.New("double quantization applies to 4-bit weights: give --weights nf4 or fp4")
	}
	if _, ok := optimizerStates[o.Optimizer]; !ok && !o.Inference {
		return fmt.Errorf("optimizer %q: want one of %s", o.Optimizer, strings.Join(Optimizers(), ", "))
	}
	if o.OptimizerImpl != "" && !oneOf(o.OptimizerImpl, []string{"foreach", "fused", "loop"}) {
		return fmt.Errorf("optimizer implementation %q: want foreach, fused or loop", o.OptimizerImpl)
	}
	if o.OptimizerLoop && o.OptimizerImpl != "" && o.OptimizerImpl != "loop" {
		return fmt.Errorf("--optimizer-loop contradicts --optimizer-impl %s", o.OptimizerImpl)
	}
	if (o.OptimizerImpl != "" || o.OptimizerLoop) && !o.Inference && !oneOf(o.Optimizer, []string{"adamw", "adam", "paged-adamw", "adafactor"}) {
		return fmt.Errorf("--optimizer-impl applies to torch.optim's Adam and AdamW; %s has one implementation", o.Optimizer)
	}
	if o.Model == nil && o.Params <= 0 {
		return errors.New("no model: give --config, --arch flags or --params")
	}
	if o.Batch <= 0 || o.Seq <= 0 {
		return fmt.Errorf("batch and seq must be positive (got %d and %d)", o.Batch, o.Seq)
	}
	if o.ZeRO < 0 || o.ZeRO > 3 {
		return fmt.Errorf("zero stage %d: want 0, 1, 2 or 3", o.ZeRO)
	}
	if o.GPUs <= 0 || o.GPUs > 1<<20 {
		return fmt.Errorf("gpus must be between 1 and 2^20 (got %d)", o.GPUs)
	}
	if o.Nodes < 0 || o.Nodes > 1<<20 {
		return fmt.Errorf("nodes must be between 1 and 2^20 (got %d)", o.Nodes)
	}
	if o.LoRARank < 0 {
		return fmt.Errorf("lora rank must not be negative (got %d)", o.LoRARank)
	}
	if o.CacheOverhead < 0 || o.CacheOverhead > 10 {
		return fmt.Errorf("allocator overhead %g: want a fraction such as 0.1", o.CacheOverhead)
	}
	if o.Offload != "" && !oneOf(o.Offload, []string{"optimizer", "params", "both"}) {
		return fmt.Errorf("offload %q: want optimizer, params or both", o.Offload)
	}
	if o.LoRATargets != "" && !oneOf(o.LoRATargets, []string{"all", "attention"}) {
		return fmt.Errorf("lora targets %q: want all (attention and MLP projections) or attention", o.LoRATargets)
	}
	if err := o.checkCombinations(); err != nil {
		return err
	}
	if m := o.Model; m != nil {
		if err := m.validate(); err != nil {
			return err
		}
		// Bound batch × seq so that no activation count overflows int64.
		tokens := float64(o.Batch) * float64(o.Seq)
		if tokens*float64(m.Layers+2*m.DecoderLayers)*(float64(m.Hidden)+float64(m.Vocab)+4*float64(max(m.Intermediate, m.ExpertIntermediate))*float64(max(m.ExpertsPerTok, 1)+m.SharedExperts)+
			2*float64(m.Heads)*float64(o.Seq))*8 > 1e18 {
			return fmt.Errorf("batch %d × seq %d is too large for this model (over an exabyte)", o.Batch, o.Seq)
		}
		if o.LoRARank > 0 && !o.Inference {
			for _, mt := range m.Matrices(false) {
				if o.loraTarget(mt.Part) && int64(o.LoRARank) > min(mt.Rows, mt.Cols) {
					return fmt.Errorf("--lora-rank %d is above the width of the adapted %s projection (%d × %d): a rank-r adapter has r ≤ min(rows, cols)",
						o.LoRARank, mt.Part, mt.Rows, mt.Cols)
				}
			}
		}
	} else if float64(o.Params)*float64(o.Batch)*float64(o.Seq) > 1e18 {
		return fmt.Errorf("batch %d × seq %d is too large (over an exabyte)", o.Batch, o.Seq)
	}
	if o.Model == nil {
		switch {
		case o.Inference:
			return errors.New("--inference needs the architecture for the KV cache: give --config or --arch flags")
		case o.Optimizer == "adafactor":
			return errors.New("adafactor's state depends on the weight shapes: give --config or --arch flags")
		case o.LoRARank > 0:
			return errors.New("--lora-rank needs the weight shapes: give --config or --arch flags")
		case o.Weights != "" && o.quantized():
			return fmt.Errorf("--weights %s quantizes the Linear layers only: give --config or --arch flags", o.Weights)
		}
	}
	return nil
}

// checkCombinations rejects every combination that is contradictory or
// would change nothing, saying why, instead of silently answering
// another question.
func (o *Options) checkCombinations() error {
	if o.Inference {
		for _, f := range []struct {
			set  bool
			flag string
		}{
			{o.ZeRO > 0, fmt.Sprintf("--zero %d", o.ZeRO)}, {o.FSDP, "--fsdp"}, {o.Offload != "", "--offload"},
			{o.LoRARank > 0, "--lora-rank"}, {o.GradCheckpointing, "--grad-checkpointing"}, {o.FirstStep, "--first-step"},
			{o.KeepGrads, "--keep-grads"}, {o.MixedPrecision, "--mixed-precision"}, {o.OptimizerLoop || o.OptimizerImpl != "", "--optimizer-impl"},
			{strings.HasPrefix(o.Precision, "amp-"), "--precision " + o.Precision}, {o.Calibration != nil, "--calibrate"},
		} {
			if f.set {
				return fmt.Errorf("--inference with %s: that flag describes training (an inference forward keeps every weight on each GPU and no gradients or optimizer state)", f.flag)
			}
		}
		return nil
	}
	G := o.TotalGPUs()
	switch {
	case o.FSDP && (o.ZeRO == 1 || o.ZeRO == 2):
		return fmt.Errorf("--fsdp is full sharding (ZeRO-3 of weights, gradients and state); --zero %d contradicts it: give one", o.ZeRO)
	case o.FSDP && G == 1 && o.Offload == "":
		return errors.New("--fsdp over 1 GPU shards nothing: give --gpus N (N > 1)")
	case o.ZeRO > 0 && G == 1 && o.Offload == "":
		return fmt.Errorf("--zero %d over 1 GPU shards nothing: give --gpus N (N > 1), or --offload", o.ZeRO)
	case o.offloadOptimizer() && o.stage() == 0:
		return errors.New("--offload optimizer is DeepSpeed's ZeRO-Offload: give --zero 1, 2 or 3")
	case o.offloadParams() && o.stage() != 3:
		return fmt.Errorf("--offload %s moves the weights, which only ZeRO-3 or FSDP partition: give --zero 3 or --fsdp", o.Offload)
	case o.quantized() && o.LoRARank == 0:
		return fmt.Errorf("--weights %s freezes the base in %s: only adapters can train; add --lora-rank R (or --qlora)", o.Weights, o.Weights)
	case o.quantized() && o.stage() == 3:
		return fmt.Errorf("--weights %s: bitsandbytes weights are not partitioned by ZeRO-3/FSDP in this estimate; use --zero 2 or less", o.Weights)
	case o.LoRATargets != "" && o.LoRARank == 0:
		return errors.New("--lora-targets needs --lora-rank")
	case o.OptimizerLoop && o.offloadOptimizer(), o.OptimizerImpl != "" && o.offloadOptimizer():
		return errors.New("--optimizer-impl with --offload optimizer: the step runs in DeepSpeed's CPU Adam, not torch.optim")
	}
	return nil
}

// Estimate computes the memory of the job described by o on one GPU.
func Estimate(o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	r := &Result{Options: o}
	if o.Model != nil {
		r.Parameters = o.Model.Params().Total()
	} else {
		r.Parameters = o.Params
	}
	if o.Inference {
		r.inference()
	} else {
		r.training()
	}
	overhead := int64(math.Round(float64(r.PeakBytes) * o.CacheOverhead))
	r.Terms = append(r.Terms,
		Term{TermCUDAContext, "CUDA context", o.CUDAContext,
			"CUDA context and kernels, outside PyTorch's allocator (not in snapshots)"},
		Term{TermAllocatorOverhead, "allocator overhead", overhead,
			fmt.Sprintf("%.0f%% of the peak: 512-byte rounding, split blocks, cached free segments", o.CacheOverhead*100)})
	r.TotalBytes = r.PeakBytes + overhead + o.CUDAContext
	return r, nil
}

func count(n int64) string { return units.Thousands(n) }

// quantBytes is one weight of rows × cols = elems in a bitsandbytes layout:
// LLM.int8 keeps int8 values and an fp32 scale per output row; 4-bit
// (NF4/FP4) packs two values a byte with an fp32 absmax per block of 64,
// or with double quantization an 8-bit absmax per block plus, per 256
// blocks, an fp32 second-level absmax, a 256-entry fp32 code and an offset.
func quantBytes(kind string, rows, elems int64, double bool) int64 {
	if kind == "int8" {
		return elems + rows*4
	}
	blocks := ceilDiv(elems, 64)
	packed := ceilDiv(elems, 2)
	if double {
		return packed + blocks + ceilDiv(blocks, 256)*4 + 256*4 + 4
	}
	return packed + blocks*4
}

// baseWeights is the bytes of the model's N weights as stored: the
// working precision, --weights' dtype, or a bitsandbytes layout for the
// blocks' Linear weights with the rest (embeddings, LM head, norms,
// biases) in 16 bits, as transformers' bitsandbytes integration leaves them.
func (r *Result) baseWeights(W int64) (int64, string) {
	o, m, N := &r.Options, r.Options.Model, r.Parameters
	switch {
	case o.Weights == "":
		return N * W, fmt.Sprintf("%s × %d B", count(N), W)
	case !o.quantized():
		b := dtypeBytes[o.Weights]
		return N * b, fmt.Sprintf("%s × %d B (%s)", count(N), b, o.Weights)
	}
	var q, qBytes int64
	for _, mt := range m.Matrices(false) {
		if mt.Linear() {
			q += mt.Rows * mt.Cols * mt.Count
			qBytes += quantBytes(o.Weights, mt.Rows, mt.Rows*mt.Cols, o.DoubleQuant) * mt.Count
		}
	}
	layout := "int8 + fp32 scale per row"
	if o.Weights != "int8" {
		layout = o.Weights + " 4-bit + fp32 absmax per 64"
		if o.DoubleQuant {
			layout = o.Weights + " 4-bit + double-quantized absmax"
		}
	}
	rest := N - q
	return qBytes + rest*2, fmt.Sprintf("%s Linear weights in %s = %s + %s others (embeddings, head, norms, biases) × 2 B",
		count(q), layout, Size(qBytes), count(rest))
}

// loraAdapters is the adapters' parameters: r × (rows + cols) per adapted weight.
func (o *Options) loraAdapters() int64 {
	var n int64
	for _, mt := range o.Model.Matrices(false) {
		if o.loraTarget(mt.Part) {
			n += int64(o.LoRARank) * (mt.Rows + mt.Cols) * mt.Count
		}
	}
	return n
}

// loraPerToken is what the adapters keep for backward per token: the
// rank-wide output of each A, which B's gradient needs (the input of A is
// the frozen layer's input, already counted).
func (o *Options) loraPerToken() int64 {
	if o.LoRARank == 0 || o.Model == nil {
		return 0
	}
	var n int64
	for _, mt := range o.Model.Matrices(false) {
		if o.loraTarget(mt.Part) {
			n += int64(o.LoRARank) * mt.Count
		}
	}
	return n
}

// gathered is what ZeRO-3 or FSDP materialises in full at once: FSDP
// wraps each block, and the root holds the embedding (and an untied head),
// so the largest unit is computed, with the next block prefetched beside
// it; DeepSpeed's ZeRO-3 fetches module by module, the largest module's
// weight with the next one prefetched (its estimator's 4 B × the largest
// layer's parameters at 16 bits).
func (r *Result) gathered(W int64) (int64, string) {
	o, m := &r.Options, r.Options.Model
	if m == nil {
		return 0, "gathered units unknown without the architecture"
	}
	if o.FSDP {
		unit, name := m.LargestUnit()
		layer := m.LayerParams()
		return (unit + layer) * W, fmt.Sprintf("gathered: the largest FSDP unit (%s, %s) + the next block prefetched (%s) × %d B",
			name, count(unit), count(layer), W)
	}
	t := m.LargestTensor()
	return 2 * t * W, fmt.Sprintf("gathered: the largest module's weight (%s) and the next prefetched, 2 × %s × %d B", count(t), count(t), W)
}

// training fills the terms, phases and peak of a training step.
func (r *Result) training() {
	o, m := &r.Options, r.Options.Model
	pr := o.precision()
	N := r.Parameters
	G := o.TotalGPUs()
	stage := o.stage()
	shard := func(s int) (int64, string) {
		if stage >= s && G > 1 {
			return G, fmt.Sprintf(" / %d GPUs", G)
		}
		return 1, ""
	}
	offOpt, offPar := o.offloadOptimizer(), o.offloadParams()

	// Trainable parameters: everything, or the LoRA adapters only.
	r.Trainable = N
	var adapters int64
	if o.LoRARank > 0 {
		adapters = o.loraAdapters()
		r.Trainable = adapters
	}
	T := r.Trainable

	// Parameters: the weights (and adapters) at the working precision.
	pDiv, pNote := shard(3)
	base, formula := r.baseWeights(pr.W)
	params := ceilDiv(base+adapters*pr.W, pDiv)
	if adapters > 0 {
		formula = fmt.Sprintf("%s + %s adapters × %d B", formula, count(adapters), pr.W)
	}
	if pDiv > 1 {
		formula = "(" + formula + ")" + pNote
	}
	var hostParams int64
	if offPar {
		hostParams = params
		params, formula = 0, "16-bit shards offloaded to host memory"
	}
	if stage == 3 {
		g, gf := r.gathered(pr.W)
		params += g
		formula += " + " + gf
	}
	r.Terms = append(r.Terms, Term{TermParameters, "parameters", params, formula})

	// Gradients: one per trainable parameter, at the gradients' precision.
	gDiv, gNote := shard(2)
	grads := ceilDiv(T*pr.G, gDiv)
	gFormula := fmt.Sprintf("%s trainable × %d B%s", count(T), pr.G, gNote)
	if offOpt {
		grads, gFormula = 0, "reduced bucket by bucket into host memory for the CPU optimizer (the offloaded step)"
	}
	r.Terms = append(r.Terms, Term{TermGradients, "gradients", grads, gFormula})

	// Optimizer state, in fp32 with mixed precision (plus the master copy).
	sDiv, sNote := shard(1)
	stateBytes := pr.S
	var state int64
	var sFormula string
	switch o.Optimizer {
	case "adafactor":
		var factored int64
		if o.LoRARank > 0 {
			// Each adapted rows×cols weight trains A (r×cols) and B (rows×r).
			r := int64(o.LoRARank)
			for _, mt := range m.Matrices(false) {
				if o.loraTarget(mt.Part) {
					factored += (mt.Rows + mt.Cols + 2*r) * mt.Count
				}
			}
		} else {
			for _, mt := range m.Matrices(true) {
				factored += (mt.Rows + mt.Cols) * mt.Count
			}
			factored += N - matrixElems(m.Matrices(true)) // 1-D parameters keep a full second moment
		}
		state = factored * stateBytes
		sFormula = fmt.Sprintf("factored second moment: Σ(rows + cols) over matrices + 1-D params = %s × %d B", count(factored), stateBytes)
	case "adamw-8bit", "paged-adamw-8bit":
		blocks := 2 * ceilDiv(T, 256)
		state = 2*T + 4*blocks
		sFormula = fmt.Sprintf("2 states × %s × 1 B + %s blocks of 256 × 4 B absmax", count(T), count(blocks))
	default:
		k := optimizerStates[o.Optimizer]
		state = k * T * stateBytes
		sFormula = fmt.Sprintf("%d state%s × %s × %d B", k, plural(k), count(T), stateBytes)
	}
	if strings.HasPrefix(o.Optimizer, "paged-") {
		sFormula += " (paged: CUDA unified memory, on the GPU until memory runs short)"
	}
	if pr.Master {
		state += 4 * T
		sFormula += fmt.Sprintf(" + fp32 master %s × 4 B", count(T))
	}
	if sNote != "" {
		sFormula = "(" + sFormula + ")" + sNote
	}
	state = ceilDiv(state, sDiv)
	if offOpt {
		// DeepSpeed's CPU optimizer holds the state, the fp32 master and
		// the fp32 gradients of this rank's partition in host memory.
		master := int64(0)
		if !pr.Master {
			master = ceilDiv(4*T, sDiv)
		}
		perRank := state + master + ceilDiv(4*T, sDiv) + hostParams
		r.HostBytes = perRank * int64(o.GPUs)
		r.HostNote = fmt.Sprintf("per node: %d GPUs × (optimizer state and fp32 master %s + fp32 gradients %s", o.GPUs, Size(state+master), Size(ceilDiv(4*T, sDiv)))
		if hostParams > 0 {
			r.HostNote += " + 16-bit weights " + Size(hostParams)
		}
		r.HostNote += ")"
		state, sFormula = 0, "offloaded: "+sFormula+" in host memory"
	} else if offPar {
		r.HostBytes = hostParams * int64(o.GPUs)
		r.HostNote = fmt.Sprintf("per node: %d GPUs × 16-bit weight shards %s", o.GPUs, Size(hostParams))
	}
	r.Terms = append(r.Terms, Term{TermOptimizerState, "optimizer state", state, sFormula})

	// Optimizer intermediates: temporaries of the update.
	var inter int64
	var iFormula string
	largest := int64(0)
	if m != nil {
		largest = m.LargestTensor()
		if o.LoRARank > 0 {
			largest = 0
			for _, mt := range m.Matrices(false) {
				if o.loraTarget(mt.Part) {
					largest = max(largest, int64(o.LoRARank)*max(mt.Rows, mt.Cols))
				}
			}
		}
	}
	switch {
	case offOpt:
		iFormula = "none on the GPU: the step runs on the CPU"
	case strings.Contains(o.Optimizer, "8bit"):
		iFormula = "none: bitsandbytes updates in place in one kernel per tensor"
	case o.Optimizer == "sgd" || o.Optimizer == "sgd-momentum":
		iFormula = "none: the foreach update works in place"
	case o.impl() == "fused":
		iFormula = "none: the fused kernel updates each tensor in place"
	case o.Optimizer == "adafactor" || o.impl() == "loop":
		inter = 2 * largest * stateBytes
		iFormula = fmt.Sprintf("per-parameter loop: 2 temporaries of the largest tensor, 2 × %s × %d B", count(largest), stateBytes)
		if m == nil {
			iFormula = "per-parameter loop: 2 temporaries of the largest tensor (unknown without --config or --arch)"
		}
	default:
		inter = ceilDiv(T*stateBytes, sDiv)
		iFormula = fmt.Sprintf("foreach update: sqrt of the second moment for all tensors at once, %s × %d B", count(T), stateBytes)
		if pr.Master {
			inter += ceilDiv(T*4, sDiv)
			iFormula = fmt.Sprintf("foreach update: sqrt of the second moment and an fp32 copy of the gradients, 2 × %s × 4 B", count(T))
		}
		iFormula += sNote
	}
	r.Terms = append(r.Terms, Term{TermOptimizerIntermediates, "optimizer intermediates", inter, iFormula})

	// Autocast's cache: a 16-bit copy of each Linear weight, made in the
	// forward and freed when the autocast region ends after the backward.
	var cache int64
	if pr.Autocast {
		elems := N
		if m != nil {
			elems = 0
			for _, mt := range m.Matrices(false) {
				if mt.Linear() {
					elems += mt.Rows * mt.Cols * mt.Count
				}
			}
			if b := m.Params(); b.Head > 0 {
				elems += b.Head
			}
		}
		cache = elems * 2
		cFormula := fmt.Sprintf("16-bit copies of %s Linear weights × 2 B, live through forward and backward", count(elems))
		if stage == 3 && m != nil {
			// The casts are of the gathered units, freed with them.
			g, _ := r.gathered(2)
			cache = g
			cFormula = "16-bit copies of the gathered units only (the casts go with the resharded weights): " + Size(g)
		}
		r.Terms = append(r.Terms, Term{TermAutocastCache, "autocast weight cache", cache, cFormula})
	}

	// Activations saved for backward.
	B, S, P := int64(o.Batch), int64(o.Seq), pr.A
	blogA := blogActivationsPerToken(N)
	heuristic := int64(math.Round(blogA / 2 * float64(B*S*P)))
	r.Heuristic = &Term{TermActivations, "activations (blog heuristic)", heuristic,
		fmt.Sprintf("A = 4.6894e-4 × N + 1.8494e6 = %s B/token at 16 bits; A/2 × B %d × L %d × %d B", count(int64(math.Round(blogA))), B, S, P)}
	var act int64
	var aFormula string
	var logitsGrad int64
	if m != nil {
		act, aFormula = m.activations(ActOptions{B: B, S: S, P: P, Flash: o.FlashAttention, Checkpointing: o.GradCheckpointing,
			Dropout: !o.NoDropout, LogitsFP32: o.LogitsFP32, LoRA: o.loraPerToken()})
		if !m.BaseOnly && (m.Kind != Encoder || m.MLMHead) {
			logitsGrad = int64(m.Vocab) * B * S * P
			if o.LogitsFP32 && P < 4 {
				logitsGrad += int64(m.Vocab) * B * S * 4
			}
		}
	} else {
		act, aFormula = heuristic, "no architecture: the blog heuristic below"
	}
	if c := o.Calibration; c != nil {
		arch := func(B, S int64) int64 {
			if m == nil {
				return int64(math.Round(blogA / 2 * float64(B*S*P)))
			}
			a, _ := m.activations(ActOptions{B: B, S: S, P: P, Flash: o.FlashAttention, Checkpointing: o.GradCheckpointing,
				Dropout: !o.NoDropout, LogitsFP32: o.LogitsFP32, LoRA: o.loraPerToken()})
			return a
		}
		r.Arch = &Term{TermActivations, "  architecture", act, aFormula}
		act, aFormula = c.activations(B, S, arch)
		if c.StepTemps >= 0 {
			inter = c.StepTemps
			for i := range r.Terms {
				if r.Terms[i].Key == TermOptimizerIntermediates {
					r.Terms[i].Bytes = inter
					r.Terms[i].Formula = fmt.Sprintf("measured in the calibration runs' optimizer step: %s (the architecture's: %s)", count(inter), r.Terms[i].Formula)
				}
			}
		}
	}
	r.Terms = append(r.Terms, Term{TermActivations, "activations", act, aFormula})

	M, O, Gr, I := params, state, grads, inter
	r.BlogPeak = M + O + max(Gr+I, act)
	// The state lives through forward and backward from the second step
	// on; in the first step it is created in the optimizer step.
	O1, state1 := O, "optimizer state"
	if o.FirstStep {
		O1, state1 = 0, "no optimizer state yet"
	}
	G1, grads1 := int64(0), ""
	if o.KeepGrads {
		G1, grads1 = Gr, " + kept gradients"
	}
	cacheF := ""
	if cache > 0 {
		cacheF = " + autocast cache"
	}
	r.Phases = []Phase{
		{"forward", M + O1 + G1 + cache + act, "parameters + " + state1 + grads1 + cacheF + " + activations", 0},
		{"backward", M + O1 + cache + max(act+G1, Gr) + logitsGrad,
			"parameters + " + state1 + cacheF + " + max(activations" + grads1 + ", gradients) + logits gradient", logitsGrad},
		{"optimizer step", M + O + Gr + I, "parameters + optimizer state + gradients + intermediates", I},
	}
	// The blog's peak is the larger of the forward and the optimizer step
	// in steady state; the backward can exceed both.
	for _, p := range r.Phases {
		r.PeakBytes = max(r.PeakBytes, p.Bytes)
	}
}

// inference fills the terms of a forward pass with a KV cache.
func (r *Result) inference() {
	o, m := &r.Options, r.Options.Model
	P := o.precision().A
	N := r.Parameters
	B, S := int64(o.Batch), int64(o.Seq)
	weights, wFormula := r.baseWeights(P)
	kv, kvFormula := m.kvCache(B, S, P)
	act, aFormula := m.forwardActivations(B, S, P, o.FlashAttention)
	_ = N
	r.Trainable = 0
	r.Terms = []Term{
		{TermParameters, "parameters", weights, wFormula},
		{TermKVCache, "KV cache", kv, kvFormula},
		{TermActivations, "activations", act, aFormula},
	}
	r.PeakBytes = weights + kv + act
	r.BlogPeak = r.PeakBytes
	r.Phases = []Phase{{"forward", r.PeakBytes, "parameters + KV cache + activations of one forward", 0}}
}

// blogActivationsPerToken is the blog's linear fit, read as bytes per
// token of a 16-bit model (README: "The blog's heuristic and its units").
func blogActivationsPerToken(n int64) float64 {
	return 4.6894e-4*float64(n) + 1.8494e6
}

func matrixElems(ms []Matrix) int64 {
	var n int64
	for _, m := range ms {
		n += m.Rows * m.Cols * m.Count
	}
	return n
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
