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

	Dtype          string // fp32, bf16 or fp16: weights, gradients and activations
	MixedPrecision bool   // 16-bit weights and gradients plus fp32 master weights in the optimizer
	Optimizer      string // adamw, adam, sgd, sgd-momentum, adafactor, adamw-8bit
	OptimizerLoop  bool   // per-parameter update loop (foreach=False, or a hand-written optimizer)
	KeepGrads      bool   // zero_grad(set_to_none=False): gradients stay allocated through the forward
	FirstStep      bool   // the first step: the optimizer state appears only in the optimizer step

	Batch, Seq        int
	GradCheckpointing bool
	FlashAttention    bool
	ZeRO              int // 0..3; FSDP full sharding is 3
	GPUs              int // data-parallel ranks the ZeRO stages shard over
	LoRARank          int // >0: only rank-r adapters on every block projection train
	Inference         bool

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
	Phases     []Phase
	BlogPeak   int64 // the blog's peak: model + optimizer + max(gradients + intermediates, activations)
	PeakBytes  int64 // allocated peak: the largest phase (at least BlogPeak in steady state)
	TotalBytes int64 // what the GPU must hold: peak + allocator overhead + CUDA context
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
var optimizerStates = map[string]int64{"adamw": 2, "adam": 2, "sgd": 0, "sgd-momentum": 1, "adafactor": 0, "adamw-8bit": 0}

// Optimizers lists the names Options.Optimizer accepts.
func Optimizers() []string {
	return []string{"adamw", "adam", "sgd", "sgd-momentum", "adafactor", "adamw-8bit"}
}

func (o *Options) check() error {
	if _, ok := dtypeBytes[o.Dtype]; !ok {
		return fmt.Errorf("dtype %q: want fp32, bf16 or fp16", o.Dtype)
	}
	if o.MixedPrecision && o.Dtype == "fp32" {
		return errors.New("--mixed-precision needs --dtype bf16 or fp16 (the fp32 copy is the master)")
	}
	if _, ok := optimizerStates[o.Optimizer]; !ok && !o.Inference {
		return fmt.Errorf("optimizer %q: want one of %s", o.Optimizer, strings.Join(Optimizers(), ", "))
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
	if o.GPUs <= 0 {
		return fmt.Errorf("gpus must be positive (got %d)", o.GPUs)
	}
	if o.LoRARank < 0 {
		return fmt.Errorf("lora rank must not be negative (got %d)", o.LoRARank)
	}
	if o.CacheOverhead < 0 || o.CacheOverhead > 10 {
		return fmt.Errorf("allocator overhead %g: want a fraction such as 0.1", o.CacheOverhead)
	}
	if m := o.Model; m != nil {
		if err := m.validate(); err != nil {
			return err
		}
		// Bound batch × seq so that no activation count overflows int64.
		tokens := float64(o.Batch) * float64(o.Seq)
		if tokens*float64(m.Layers)*(float64(m.Hidden)+float64(m.Vocab)+4*float64(m.Intermediate)*float64(max(m.ExpertsPerTok, 1))+float64(m.Heads)*float64(o.Seq))*8 > 1e18 {
			return fmt.Errorf("batch %d × seq %d is too large for this model (over an exabyte)", o.Batch, o.Seq)
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
		}
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

// training fills the terms, phases and peak of a training step.
func (r *Result) training() {
	o, m := &r.Options, r.Options.Model
	P := dtypeBytes[o.Dtype]
	N := r.Parameters
	G := int64(o.GPUs)
	shard := func(stage int) (int64, string) {
		if o.ZeRO >= stage && G > 1 {
			return G, fmt.Sprintf(" / %d GPUs", G)
		}
		return 1, ""
	}

	// Trainable parameters: everything, or the LoRA adapters only.
	r.Trainable = N
	var adapters int64
	if o.LoRARank > 0 {
		for _, mt := range m.Matrices(false) {
			adapters += int64(o.LoRARank) * (mt.Rows + mt.Cols) * mt.Count
		}
		r.Trainable = adapters
	}
	T := r.Trainable

	// Parameters: the weights (and adapters) at the working precision.
	pDiv, pNote := shard(3)
	params := ceilDiv((N+adapters)*P, pDiv)
	formula := fmt.Sprintf("%s × %d B%s", count(N), P, pNote)
	if adapters > 0 {
		formula = fmt.Sprintf("(%s + %s adapters) × %d B%s", count(N), count(adapters), P, pNote)
	}
	if pDiv > 1 && m != nil {
		gathered := 2 * m.LayerParams() * P
		params += gathered
		formula += fmt.Sprintf(" + 2 gathered layers × %s × %d B", count(m.LayerParams()), P)
	}
	r.Terms = append(r.Terms, Term{TermParameters, "parameters", params, formula})

	// Gradients: one per trainable parameter, at the weights' precision.
	gDiv, gNote := shard(2)
	grads := ceilDiv(T*P, gDiv)
	r.Terms = append(r.Terms, Term{TermGradients, "gradients", grads,
		fmt.Sprintf("%s trainable × %d B%s", count(T), P, gNote)})

	// Optimizer state, in fp32 with mixed precision (plus the master copy).
	sDiv, sNote := shard(1)
	stateBytes := P
	if o.MixedPrecision {
		stateBytes = 4
	}
	var state int64
	var sFormula string
	switch o.Optimizer {
	case "adafactor":
		var factored int64
		if o.LoRARank > 0 {
			// Each adapted rows×cols weight trains A (r×cols) and B (rows×r).
			r := int64(o.LoRARank)
			for _, mt := range m.Matrices(false) {
				factored += (mt.Rows + mt.Cols + 2*r) * mt.Count
			}
		} else {
			for _, mt := range m.Matrices(true) {
				factored += (mt.Rows + mt.Cols) * mt.Count
			}
			factored += N - matrixElems(m.Matrices(true)) // 1-D parameters keep a full second moment
		}
		state = factored * stateBytes
		sFormula = fmt.Sprintf("factored second moment: Σ(rows + cols) over matrices + 1-D params = %s × %d B", count(factored), stateBytes)
	case "adamw-8bit":
		blocks := 2 * ceilDiv(T, 256)
		state = 2*T + 4*blocks
		sFormula = fmt.Sprintf("2 states × %s × 1 B + %s blocks of 256 × 4 B absmax", count(T), count(blocks))
	default:
		k := optimizerStates[o.Optimizer]
		state = k * T * stateBytes
		sFormula = fmt.Sprintf("%d state%s × %s × %d B", k, plural(k), count(T), stateBytes)
	}
	if o.MixedPrecision {
		state += 4 * T
		sFormula += fmt.Sprintf(" + fp32 master %s × 4 B", count(T))
	}
	if sNote != "" {
		sFormula = "(" + sFormula + ")" + sNote
	}
	state = ceilDiv(state, sDiv)
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
				largest = max(largest, int64(o.LoRARank)*max(mt.Rows, mt.Cols))
			}
		}
	}
	switch {
	case o.Optimizer == "adamw-8bit":
		iFormula = "none: bitsandbytes updates in place in one kernel per tensor"
	case o.Optimizer == "sgd" || o.Optimizer == "sgd-momentum":
		iFormula = "none: the foreach update works in place"
	case o.Optimizer == "adafactor" || o.OptimizerLoop:
		inter = 2 * largest * stateBytes
		iFormula = fmt.Sprintf("per-parameter loop: 2 temporaries of the largest tensor, 2 × %s × %d B", count(largest), stateBytes)
		if m == nil {
			iFormula = "per-parameter loop: 2 temporaries of the largest tensor (unknown without --config or --arch)"
		}
	default:
		inter = ceilDiv(T*stateBytes, sDiv)
		iFormula = fmt.Sprintf("foreach update: sqrt of the second moment for all tensors at once, %s × %d B", count(T), stateBytes)
		if o.MixedPrecision {
			inter += ceilDiv(T*4, sDiv)
			iFormula = fmt.Sprintf("foreach update: sqrt of the second moment and an fp32 copy of the gradients, 2 × %s × 4 B", count(T))
		}
		iFormula += sNote
	}
	r.Terms = append(r.Terms, Term{TermOptimizerIntermediates, "optimizer intermediates", inter, iFormula})

	// Activations saved for backward.
	B, S := int64(o.Batch), int64(o.Seq)
	blogA := blogActivationsPerToken(N)
	heuristic := int64(math.Round(blogA / 2 * float64(B*S*P)))
	r.Heuristic = &Term{TermActivations, "activations (blog heuristic)", heuristic,
		fmt.Sprintf("A = 4.6894e-4 × N + 1.8494e6 = %s B/token at 16 bits; A/2 × B %d × L %d × %d B", count(int64(math.Round(blogA))), B, S, P)}
	var act int64
	var aFormula string
	var logitsGrad int64
	if m != nil {
		act, aFormula = m.activations(B, S, P, o.FlashAttention, o.GradCheckpointing)
		logitsGrad = int64(m.Vocab) * B * S * P
	} else {
		act, aFormula = heuristic, "no architecture: the blog heuristic below"
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
	r.Phases = []Phase{
		{"forward", M + O1 + G1 + act, "parameters + " + state1 + grads1 + " + activations", 0},
		{"backward", M + O1 + max(act+G1, Gr) + logitsGrad,
			"parameters + " + state1 + " + max(activations" + grads1 + ", gradients) + logits gradient", logitsGrad},
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
	P := dtypeBytes[o.Dtype]
	N := r.Parameters
	B, S := int64(o.Batch), int64(o.Seq)
	weights := N * P
	kv := 2 * int64(m.Layers) * int64(m.KVHeads) * int64(m.HeadDim) * B * S * P
	act, aFormula := m.forwardActivations(B, S, P, o.FlashAttention)
	r.Trainable = 0
	r.Terms = []Term{
		{TermParameters, "parameters", weights, fmt.Sprintf("%s × %d B", count(N), P)},
		{TermKVCache, "KV cache", kv, fmt.Sprintf("2 (K,V) × %d layers × %d kv-heads × %d head-dim × B %d × L %d × %d B",
			m.Layers, m.KVHeads, m.HeadDim, B, S, P)},
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
