// Package synth generates synthetic PyTorch training-run memory snapshots by
// running a described model's training loop through the caching-allocator
// simulator.
package synth

import (
	"fmt"
	"strings"
)

// DType is the element type of the model's parameters and activations.
type DType uint8

// The element types a workload can use.
const (
	FP32 DType = iota
	BF16
)

// Size returns the element size in bytes.
func (d DType) Size() uint64 {
	if d == BF16 {
		return 2
	}
	return 4
}

// String returns the flag spelling ("fp32" or "bf16").
func (d DType) String() string {
	if d == BF16 {
		return "bf16"
	}
	return "fp32"
}

// ParseDType parses "fp32"/"float32" or "bf16"/"bfloat16".
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(s) {
	case "fp32", "float32", "float":
		return FP32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	}
	return FP32, fmt.Errorf("unknown dtype %q (want fp32 or bf16)", s)
}

// Workload describes the training run to synthesize. Zero fields take the
// defaults of DefaultWorkload for the chosen model.
type Workload struct {
	Model  string // "mlp" or "transformer"
	Layers int
	Batch  int
	Steps  int
	DType  DType
	Seed   int64

	// Hidden is the mlp's width (input, hidden and output features).
	Hidden int

	// Transformer shape.
	DModel int
	Heads  int
	Seq    int
	Vocab  int

	// Leak, when non-zero, is the bytes of a tensor the training loop
	// keeps every step and never frees (a metrics list holding GPU
	// tensors): a memory leak for `gpumem steps` to find.
	Leak uint64

	// Patterns (mlp only), each a kind of run whose every allocation's
	// true category Result.Truth records (see patterns.go).
	Inference      bool   // weights loaded before recording, forward passes only
	LoRA           bool   // frozen base loaded before recording, trainable adapters
	Quant          string // with LoRA: "4bit" quantizes the frozen base (bitsandbytes)
	OOMUnwind      bool   // with a capacity: an OOM mid-forward, then the exception frees the step's tensors
	NoAnnotations  bool   // no annotations (phases from frames alone)
	Checkpointing  bool   // activation checkpointing per layer: recomputation in backward
	DDP            bool   // DistributedDataParallel: gradients are views into the Reducer's buckets
	MixedPrecision bool   // bf16 parameters, fp32 master copies and states in the optimizer
	FSDP           bool   // FullyShardedDataParallel on 2 ranks: flat parameter shards, all-gathers
	Compile        bool   // torch.compile: Inductor's generated code makes the buffers
	KeptGrads      bool   // gradients made before recording, kept and accumulated into in place
}

// DefaultWorkload returns the defaults used for fields left zero.
func DefaultWorkload(model string) Workload {
	switch model {
	case "mlp":
		return Workload{Model: "mlp", Layers: 4, Hidden: 4096, Batch: 64, Steps: 3}
	default:
		return Workload{Model: "transformer", Layers: 4, DModel: 1024, Heads: 16, Seq: 512, Batch: 8, Vocab: 32000, Steps: 3}
	}
}

// Validate fills zero fields and checks the shape and patterns.
func (w Workload) Validate() (Workload, error) { return w.withDefaults() }

// withDefaults fills zero fields and validates the shape.
func (w Workload) withDefaults() (Workload, error) {
	if w.Model == "" {
		w.Model = "transformer"
	}
	if w.Model != "mlp" && w.Model != "transformer" {
		return w, fmt.Errorf("unknown model %q (want mlp or transformer)", w.Model)
	}
	d := DefaultWorkload(w.Model)
	fill := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	fill(&w.Layers, d.Layers)
	fill(&w.Batch, d.Batch)
	fill(&w.Steps, d.Steps)
	if w.Model == "mlp" {
		fill(&w.Hidden, d.Hidden)
	} else {
		fill(&w.DModel, d.DModel)
		fill(&w.Heads, d.Heads)
		fill(&w.Seq, d.Seq)
		fill(&w.Vocab, d.Vocab)
		if w.DModel%w.Heads != 0 {
			return w, fmt.Errorf("d-model %d is not a multiple of heads %d", w.DModel, w.Heads)
		}
	}
	if err := w.checkPatterns(); err != nil {
		return w, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", w.Layers}, {"batch", w.Batch}, {"steps", w.Steps}, {"hidden", w.Hidden}, {"d-model", w.DModel}, {"heads", w.Heads}, {"seq", w.Seq}, {"vocab", w.Vocab}} {
		if f.v < 0 {
			return w, fmt.Errorf("%s must be positive, got %d", f.name, f.v)
		}
	}
	// Keep single tensors below 2^50 bytes so size arithmetic cannot overflow.
	if w.Model == "transformer" {
		if uint64(w.Batch)*uint64(w.Seq)*uint64(w.Vocab) > 1<<46 || uint64(w.DModel)*uint64(w.Vocab) > 1<<46 || uint64(w.Batch)*uint64(w.Heads)*uint64(w.Seq) > 1<<46 {
			return w, fmt.Errorf("model shape too large")
		}
	} else if uint64(w.Hidden)*uint64(w.Hidden) > 1<<46 || uint64(w.Batch)*uint64(w.Hidden) > 1<<46 {
		return w, fmt.Errorf("model shape too large")
	}
	if w.Layers > 10000 || w.Steps > 1000000 {
		return w, fmt.Errorf("layers (max 10000) or steps (max 1000000) too large")
	}
	return w, nil
}

// String describes the workload in one line, like the flags that make it.
func (w Workload) String() string {
	leak := ""
	if w.Leak > 0 {
		leak = fmt.Sprintf(" leak=%d", w.Leak)
	}
	leak += w.patternString()
	if w.Model == "mlp" {
		return fmt.Sprintf("mlp layers=%d hidden=%d batch=%d steps=%d dtype=%s seed=%d%s", w.Layers, w.Hidden, w.Batch, w.Steps, w.DType, w.Seed, leak)
	}
	return fmt.Sprintf("transformer layers=%d d-model=%d heads=%d seq=%d batch=%d vocab=%d steps=%d dtype=%s seed=%d%s",
		w.Layers, w.DModel, w.Heads, w.Seq, w.Batch, w.Vocab, w.Steps, w.DType, w.Seed, leak)
}
