package cli

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/synth"
)

func init() {
	Register(&Command{
		Name:    "synth",
		Summary: "write a synthetic training-run snapshot (mlp or transformer + AdamW through the allocator model)",
		Run:     runSynth,
	})
}

// synthArgs is synth's command line, read into a workload.
type synthArgs struct {
	flags synth.Flags
	opt   synth.Options
	json  bool
	out   string
}

func parseSynthArgs(env *Env, args []string) (*synthArgs, error) {
	fs := newFlagSet(env, "synth", "[flags] -o OUT.pickle", help.About("synth"))
	a := &synthArgs{}
	f := &a.flags
	pw := &f.Workload
	fs.StringVar(&pw.Model, "model", "transformer", "workload: mlp or transformer")
	fs.IntVar(&pw.Layers, "layers", 0, "layers (default 4)")
	fs.IntVar(&pw.Hidden, "hidden", 0, "mlp width (default 4096)")
	fs.IntVar(&pw.DModel, "d-model", 0, "transformer width (default 1024)")
	fs.IntVar(&pw.Heads, "heads", 0, "attention heads (default 16)")
	fs.IntVar(&pw.Seq, "seq", 0, "sequence length (default 512)")
	fs.IntVar(&pw.Vocab, "vocab", 0, "vocabulary size (default 32000)")
	fs.IntVar(&pw.Batch, "batch", 0, "batch size (default 8 for transformer, 64 for mlp)")
	fs.IntVar(&pw.Steps, "steps", 0, "training steps (default 3)")
	fs.StringVar(&f.DType, "dtype", "fp32", "parameter and activation dtype: fp32 or bf16")
	fs.Int64Var(&pw.Seed, "seed", 0, "seed for timing jitter")
	fs.StringVar(&f.Config, "config", "", "PYTORCH_CUDA_ALLOC_CONF for the allocator model, e.g. expandable_segments:True")
	fs.StringVar(&f.Capacity, "capacity", "", "device memory, e.g. 24GiB (default unlimited); the run stops at the first OOM and records it")
	device := deviceFlag(fs, "record the run as device")
	fs.StringVar(&f.Leak, "leak", "", "keep a tensor of `SIZE` every step and never free it (a leak for gpumem steps to find), e.g. 64MiB")
	fs.BoolVar(&pw.Inference, "inference", false, "pattern: weights loaded before recording, forward passes under no_grad (--model mlp)")
	fs.BoolVar(&pw.LoRA, "lora", false, "pattern: a frozen base loaded before recording and trained rank-8 adapters (--model mlp)")
	fs.StringVar(&pw.Quant, "quant", "", "with --lora: 4bit quantizes the frozen base as bitsandbytes does")
	fs.BoolVar(&pw.OOMUnwind, "oom-unwind", false, "pattern: with --capacity, the OOM's exception frees the forward pass's tensors (--model mlp)")
	fs.BoolVar(&pw.NoAnnotations, "no-annotations", false, "pattern: no annotations, phases only in the stacks (--model mlp)")
	fs.BoolVar(&pw.Checkpointing, "checkpointing", false, "pattern: activation checkpointing per layer, recomputed in backward (--model mlp)")
	fs.BoolVar(&pw.DDP, "ddp", false, "pattern: DDP with gradient_as_bucket_view, gradients in the Reducer's buckets (--model mlp)")
	fs.BoolVar(&pw.MixedPrecision, "mixed-precision", false, "pattern: bf16 parameters, fp32 master copies and moments in AdamW (--model mlp --dtype bf16)")
	fs.BoolVar(&pw.FSDP, "fsdp", false, "pattern: FSDP on 2 ranks, flat parameter shards and all-gathers (--model mlp)")
	fs.BoolVar(&pw.Compile, "compile", false, "pattern: torch.compile, Inductor's generated code makes the buffers (--model mlp)")
	fs.BoolVar(&pw.KeptGrads, "kept-grads", false, "pattern: gradients made before recording, kept by zero_grad(set_to_none=False) and added into in place (--model mlp)")
	fs.BoolVar(&a.json, "json", false, "write JSON (which memory_viz also reads) instead of a pickle")
	fs.Float64Var(&f.TargetMB, "target-mb", 0, "choose --steps so the file is about this many MB (10^6 bytes)")
	fs.StringVar(&a.out, "o", "", "output file (- for stdout)")
	fs.StringVar(&a.out, "output", "", "same as -o")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usageError(fs, env.Stderr, fmt.Sprintf("unexpected argument %q", pos[0]))
	}
	if a.out == "" {
		return nil, usageError(fs, env.Stderr, "-o OUT is required")
	}
	f.Device = *device
	if a.opt, err = f.Check(); err != nil {
		return nil, usageError(fs, env.Stderr, err.Error())
	}
	return a, nil
}

func runSynth(env *Env, args []string) error {
	a, err := parseSynthArgs(env, args)
	if err != nil {
		return err
	}
	snap, res, err := a.flags.Generate(a.opt, a.json)
	if err != nil {
		return err
	}
	n, err := synth.WriteFile(a.out, snap, a.json)
	if err != nil {
		return err // names a.out
	}
	report := env.Stdout
	if a.out == "-" {
		report = env.Stderr
	}
	res.WriteSummary(report, a.out, n, a.json)
	return nil
}
