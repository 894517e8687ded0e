package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gpumem/gpumem/internal/estimate"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/snapshot"
)

func init() {
	Register(&Command{
		Name:    "estimate",
		Summary: "before the run: will a training or inference job fit, and the largest batch that does",
		Run:     runEstimate,
	})
}

func registerArch(a *estimate.Arch, fs *flag.FlagSet) {
	fs.IntVar(&a.Layers, "layers", 0, "arch: transformer blocks")
	fs.IntVar(&a.Hidden, "hidden", 0, "arch: hidden size")
	fs.IntVar(&a.Heads, "heads", 0, "arch: attention heads")
	fs.IntVar(&a.KVHeads, "kv-heads", 0, "arch: key/value heads (default: --heads; 1 = multi-query)")
	fs.IntVar(&a.HeadDim, "head-dim", 0, "arch: head dimension (default: hidden / heads)")
	fs.IntVar(&a.Intermediate, "intermediate", 0, "arch: MLP width")
	fs.IntVar(&a.Vocab, "vocab", 0, "arch: vocabulary size")
	fs.BoolVar(&a.Tied, "tied", false, "arch: the LM head shares the embedding")
	fs.BoolVar(&a.PlainMLP, "plain-mlp", false, "arch: two-matrix MLP (GELU) instead of gated (SwiGLU)")
}

func runEstimate(env *Env, args []string) error {
	fs := newFlagSet(env, "estimate", "(--config config.json | --layers ... | --params N) [flags]", help.About("estimate"))
	q := estimate.Request{}
	fs.StringVar(&q.ConfigPath, "config", "", "Hugging Face `config.json` of the model")
	registerArch(&q.Arch, fs)
	fs.StringVar(&q.Params, "params", "", "parameter count when no architecture is given (7B, 6.7e9)")
	o := &q.Options
	fs.StringVar(&o.Dtype, "dtype", "bf16", "fp32, bf16 or fp16: weights, gradients, activations")
	fs.BoolVar(&o.MixedPrecision, "mixed-precision", false, "16-bit weights and gradients with fp32 master weights in the optimizer")
	fs.StringVar(&o.Precision, "precision", "", "instead of --dtype: "+strings.Join(estimate.Precisions(), ", ")+" (amp-bf16: the Trainer's --bf16, fp32 weights and state, bf16 autocast)")
	fs.StringVar(&o.Weights, "weights", "", "store the frozen base weights as "+strings.Join(estimate.WeightKinds(), ", ")+" (int8, nf4, fp4: bitsandbytes; needs --lora-rank)")
	fs.BoolVar(&o.DoubleQuant, "double-quant", false, "4-bit weights: quantize the absmax constants too")
	fs.BoolVar(&q.QLoRA, "qlora", false, "QLoRA: nf4 double-quantized base, bf16 LoRA r=64 on attention and MLP, paged 8-bit AdamW, checkpointing")
	fs.StringVar(&o.Optimizer, "optimizer", "adamw", strings.Join(estimate.Optimizers(), ", "))
	fs.StringVar(&o.OptimizerImpl, "optimizer-impl", "", "foreach (PyTorch's default), fused or loop")
	fs.BoolVar(&o.OptimizerLoop, "optimizer-loop", false, "the optimizer updates one parameter at a time (foreach=False, or hand-written)")
	fs.BoolVar(&o.LogitsFP32, "logits-fp32", true, "the loss upcasts the logits to fp32 (Hugging Face's causal-LM loss)")
	fs.BoolVar(&o.NoDropout, "no-dropout", false, "train without the config's dropout (no masks kept)")
	fs.BoolVar(&q.BaseModel, "base-model", false, "count the bare model AutoModel builds (no LM or task head)")
	fs.BoolVar(&o.FirstStep, "first-step", false, "the first training step: the optimizer state is created in the optimizer step, not live through forward and backward")
	fs.BoolVar(&o.KeepGrads, "keep-grads", false, "gradients are zeroed in place (zero_grad(set_to_none=False)), so they stay allocated through the forward")
	fs.IntVar(&o.Batch, "batch", 1, "micro-batch per GPU")
	fs.IntVar(&o.Seq, "seq", 2048, "sequence length")
	fs.BoolVar(&o.GradCheckpointing, "grad-checkpointing", false, "recompute each block in backward (keep only block inputs)")
	fs.BoolVar(&o.FlashAttention, "flash-attention", false, "fused attention: no L×L probabilities kept")
	fs.IntVar(&o.ZeRO, "zero", 0, "ZeRO stage 0-3 over --gpus (1: optimizer state, 2: + gradients, 3: + parameters)")
	fs.BoolVar(&o.FSDP, "fsdp", false, "FSDP full sharding over --gpus (same as --zero 3)")
	fs.IntVar(&o.GPUs, "gpus", 1, "data-parallel GPUs per node the ZeRO stages shard over")
	fs.IntVar(&o.Nodes, "nodes", 1, "nodes of --gpus GPUs each")
	fs.StringVar(&o.Offload, "offload", "", "optimizer, params or both: DeepSpeed's CPU offload (prints the host RAM)")
	fs.IntVar(&o.LoRARank, "lora-rank", 0, "train only rank-R LoRA adapters on the block projections")
	fs.StringVar(&o.LoRATargets, "lora-targets", "", "all (attention and MLP projections, the default) or attention")
	fs.BoolVar(&o.Inference, "inference", false, "inference: weights + KV cache for batch × seq + one forward")
	fs.StringVar(&q.GPU, "gpu", "", "GPU name (H100, A100-40GB, ...) or total memory (80GiB): does it fit, and the largest batch")
	fs.BoolVar(&q.MaxBatch, "max-batch", false, "print only the largest batch that fits on --gpu")
	fs.StringVar(&q.CUDAContext, "cuda-context", "512MiB", "memory of the CUDA context outside the allocator")
	fs.Float64Var(&o.CacheOverhead, "allocator-overhead", estimate.DefaultCacheOverhead, "reserved-but-free memory as a fraction of the peak")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.StringVar(&q.CheckPath, "check", "", "compare with what the snapshot `FILE` of the same run measured")
	cal := &q.Calibration
	fs.Var(cal.PathsValue(), "calibrate", "a snapshot `FILE` of a small real run of the same job (repeatable: two lengths measure the L² part)")
	fs.Var(cal.BatchValue(), "calibrate-batch", "per-GPU batch of each --calibrate run (once for all, or once each)")
	fs.Var(cal.SeqValue(), "calibrate-seq", "sequence length of each --calibrate run (once for all, or once each)")
	device := deviceFlag(fs, "with --check: measure device")
	fs.BoolVar(&q.Demo, "demo", false, "estimate the embedded demo's model (with --check: against the demo snapshot)")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError(fs, env.Stderr, fmt.Sprintf("unexpected argument %q (the model comes from --config, --arch flags or --params)", rest[0]))
	}
	q.Device, q.Set = *device, map[string]bool{}
	fs.Visit(func(f *flag.Flag) { q.Set[f.Name] = true })
	a, err := q.Run(func(p string) (*snapshot.Snapshot, string, error) {
		s, err := LoadFile(env, p)
		return s, report.BaseName(p), err
	})
	// Every mistake in a flag's value is a usage mistake (exit 2); only the
	// files (--config, --check, --calibrate) give exit 1.
	var usage *estimate.UsageError
	var fe *estimate.FileError
	switch {
	case errors.As(err, &usage):
		return usageError(fs, env.Stderr, usage.Error())
	case errors.As(err, &fe):
		return prefixError(fe.Path, fe.Err)
	case err != nil:
		return err
	}
	return writeStdout(env, func(bw io.Writer) error {
		switch {
		case q.MaxBatch && !*asJSON:
			_, err := fmt.Fprintln(bw, a.Verdict.MaxBatch)
			return err
		case *asJSON:
			return a.Result.WriteJSON(bw, a.Verdict, a.Check)
		}
		return a.Result.WriteText(bw, a.Verdict, a.Check)
	})
}
