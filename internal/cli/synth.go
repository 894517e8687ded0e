package cli

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
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
	workload synth.Workload
	opt      synth.Options
	json     bool
	targetMB float64
	out      string
}

func parseSynthArgs(env *Env, args []string) (*synthArgs, error) {
	fs := newFlagSet(env, "synth", "[flags] -o OUT.pickle", help.About("synth"))
	model := fs.String("model", "transformer", "workload: mlp or transformer")
	layers := fs.Int("layers", 0, "layers (default 4)")
	hidden := fs.Int("hidden", 0, "mlp width (default 4096)")
	dModel := fs.Int("d-model", 0, "transformer width (default 1024)")
	heads := fs.Int("heads", 0, "attention heads (default 16)")
	seq := fs.Int("seq", 0, "sequence length (default 512)")
	vocab := fs.Int("vocab", 0, "vocabulary size (default 32000)")
	batch := fs.Int("batch", 0, "batch size (default 8 for transformer, 64 for mlp)")
	steps := fs.Int("steps", 0, "training steps (default 3)")
	dtype := fs.String("dtype", "fp32", "parameter and activation dtype: fp32 or bf16")
	seed := fs.Int64("seed", 0, "seed for timing jitter")
	config := fs.String("config", "", "PYTORCH_CUDA_ALLOC_CONF for the allocator model, e.g. expandable_segments:True")
	capacity := fs.String("capacity", "", "device memory, e.g. 24GiB (default unlimited); the run stops at the first OOM and records it")
	device := deviceFlag(fs, "record the run as device")
	leak := fs.String("leak", "", "keep a tensor of `SIZE` every step and never free it (a leak for gpumem steps to find), e.g. 64MiB")
	var pw synth.Workload
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
	a := &synthArgs{}
	fs.BoolVar(&a.json, "json", false, "write JSON (which memory_viz also reads) instead of a pickle")
	fs.Float64Var(&a.targetMB, "target-mb", 0, "choose --steps so the file is about this many MB (10^6 bytes)")
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
	dt, err := synth.ParseDType(*dtype)
	if err != nil {
		return nil, usageError(fs, env.Stderr, "--dtype: "+err.Error())
	}
	if *model != "mlp" && *model != "transformer" {
		return nil, usageError(fs, env.Stderr, fmt.Sprintf("--model %q: want mlp or transformer", *model))
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"layers", *layers}, {"hidden", *hidden}, {"d-model", *dModel}, {"heads", *heads}, {"seq", *seq}, {"vocab", *vocab}, {"batch", *batch}, {"steps", *steps}} {
		if n.v < 0 {
			return nil, usageError(fs, env.Stderr, fmt.Sprintf("--%s %d: want a positive number (0: the default)", n.name, n.v))
		}
	}
	if a.targetMB < 0 || a.targetMB > 1e6 {
		return nil, usageError(fs, env.Stderr, fmt.Sprintf("--target-mb %g: want a size between 0 and 10^6 MB", a.targetMB))
	}
	if _, err := alloc.ParseConfig(*config); err != nil {
		return nil, usageError(fs, env.Stderr, "--config: "+err.Error())
	}
	var capBytes uint64
	if *capacity != "" {
		if capBytes, err = units.Parse(*capacity); err != nil {
			return nil, usageError(fs, env.Stderr, "--capacity: "+err.Error())
		}
	}
	var leakBytes uint64
	if *leak != "" {
		if leakBytes, err = units.Parse(*leak); err != nil {
			return nil, usageError(fs, env.Stderr, "--leak: "+err.Error())
		}
	}
	a.workload = synth.Workload{Model: *model, Layers: *layers, Hidden: *hidden, DModel: *dModel, Heads: *heads,
		Seq: *seq, Vocab: *vocab, Batch: *batch, Steps: *steps, DType: dt, Seed: *seed, Leak: leakBytes,
		Inference: pw.Inference, LoRA: pw.LoRA, Quant: pw.Quant, OOMUnwind: pw.OOMUnwind, NoAnnotations: pw.NoAnnotations,
		Checkpointing: pw.Checkpointing, DDP: pw.DDP, MixedPrecision: pw.MixedPrecision, FSDP: pw.FSDP, Compile: pw.Compile, KeptGrads: pw.KeptGrads}
	if pw.OOMUnwind && *capacity == "" {
		return nil, usageError(fs, env.Stderr, "--oom-unwind needs --capacity (the OOM it unwinds)")
	}
	if _, err := a.workload.Validate(); err != nil {
		return nil, usageError(fs, env.Stderr, err.Error())
	}
	a.opt = synth.Options{Config: *config, Capacity: capBytes, Device: max(*device, 0)}
	return a, nil
}

func runSynth(env *Env, args []string) error {
	a, err := parseSynthArgs(env, args)
	if err != nil {
		return err
	}
	w, opt := a.workload, a.opt
	var snap *snapshot.Snapshot
	var res *synth.Result
	if a.targetMB > 0 {
		snap, res, err = synth.GenerateSize(w, opt, int64(a.targetMB*1e6), a.json)
	} else {
		snap, res, err = synth.Generate(w, opt)
	}
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
