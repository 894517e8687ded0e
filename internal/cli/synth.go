package cli

import (
	"flag"
	"fmt"
	"io"
	"strconv"

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

const synthUsage = `Usage: gpumem synth [flags] -o OUT.pickle

Writes the snapshot torch.cuda.memory._dump_snapshot() would give after a
synthetic training run: the model's training loop (forward, backward, AdamW
with lazily created states, zero_grad(set_to_none)) runs through gpumem's
model of PyTorch's caching allocator, so segments, blocks and the trace are
what the allocator would produce. Python stacks on every entry, time_us,
one ProfilerStep#N annotation per step, allocator_settings for --config.
Output is deterministic for the same flags and --seed.

Examples:
  gpumem synth --model transformer --layers 4 --d-model 1024 --batch 8 --seq 512 --steps 3 -o run.pickle
  gpumem synth --model mlp --layers 8 --hidden 8192 --dtype bf16 --capacity 24GiB -o oom.pickle
  gpumem synth --config expandable_segments:True --json -o run.json
  gpumem synth --target-mb 250 -o big.pickle

Flags:
`

func runSynth(env *Env, args []string) error {
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprint(env.Stderr, synthUsage)
		fs.PrintDefaults()
	}
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
	device := fs.Int("device", 0, "CUDA device ordinal of the run")
	asJSON := fs.Bool("json", false, "write JSON (which memory_viz also reads) instead of a pickle")
	targetMB := fs.Float64("target-mb", 0, "choose --steps so the file is about this many MB (10^6 bytes)")
	out := fs.String("o", "", "output file (- for stdout)")
	fs.StringVar(out, "output", "", "same as -o")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "gpumem synth: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return ErrUsage
	}
	if *out == "" {
		fmt.Fprintln(env.Stderr, "gpumem synth: -o OUT is required")
		fs.Usage()
		return ErrUsage
	}
	dt, err := synth.ParseDType(*dtype)
	if err != nil {
		return err
	}
	var capBytes uint64
	if *capacity != "" {
		if capBytes, err = units.Parse(*capacity); err != nil {
			return fmt.Errorf("--capacity: %v", err)
		}
	}
	w := synth.Workload{Model: *model, Layers: *layers, Hidden: *hidden, DModel: *dModel, Heads: *heads,
		Seq: *seq, Vocab: *vocab, Batch: *batch, Steps: *steps, DType: dt, Seed: *seed}
	opt := synth.Options{Config: *config, Capacity: capBytes, Device: *device}

	var snap *snapshot.Snapshot
	var res *synth.Result
	if *targetMB > 0 {
		if *targetMB > 1e6 {
			return fmt.Errorf("--target-mb %g too large", *targetMB)
		}
		snap, res, err = synth.GenerateSize(w, opt, int64(*targetMB*1e6), *asJSON)
	} else {
		snap, res, err = synth.Generate(w, opt)
	}
	if err != nil {
		return err
	}
	n, err := synth.WriteFile(*out, snap, *asJSON)
	if err != nil {
		return fmt.Errorf("writing %s: %v", *out, err)
	}
	report := env.Stdout
	if *out == "-" {
		report = env.Stderr
	}
	printSynthSummary(report, *out, n, *asJSON, res)
	return nil
}

// printSynthSummary says what was written and what the run did.
func printSynthSummary(w io.Writer, out string, n int64, asJSON bool, res *synth.Result) {
	enc := "pickle (protocol 4)"
	if asJSON {
		enc = "JSON"
	}
	fmt.Fprintf(w, "wrote %s: %s, %s bytes (%.1f MB)\n", out, enc, strconv.FormatInt(n, 10), float64(n)/1e6)
	fmt.Fprintf(w, "workload: %s\n", res.Workload)
	st := res.Stats
	fmt.Fprintf(w, "steps completed: %d of %d; trace entries: %d; cudaMalloc calls: %d\n",
		res.StepsDone, res.Workload.Steps, res.Events, st.NumDeviceAlloc)
	fmt.Fprintf(w, "peak allocated: %s; peak reserved: %s; at dump: %s allocated, %s reserved\n",
		units.PythonBytes(uint64(st.AllocatedBytes[0].Peak)), units.PythonBytes(uint64(st.ReservedBytes[0].Peak)),
		units.PythonBytes(uint64(st.AllocatedBytes[0].Current)), units.PythonBytes(uint64(st.ReservedBytes[0].Current)))
	if res.OOM != nil {
		fmt.Fprintf(w, "stopped at OOM (recorded as the last trace entry): %s\n", res.OOM.Error())
	}
}
