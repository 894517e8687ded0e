package estimate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

// Arch is a Llama-style model given by its shape (estimate's --arch flags).
type Arch struct {
	Layers, Hidden, Heads, KVHeads, HeadDim, Intermediate, Vocab int
	Tied, PlainMLP                                               bool
}

// Given says whether any of the shape was given.
func (a *Arch) Given() bool {
	return a.Layers != 0 || a.Hidden != 0 || a.Heads != 0 || a.Intermediate != 0 || a.Vocab != 0
}

// Model is the Llama-style model of the shape (RMSNorm, gated MLP unless
// PlainMLP); KVHeads defaults to Heads and HeadDim to Hidden / Heads.
func (a *Arch) Model() (*Model, error) {
	for _, f := range []struct {
		name string
		v    int
	}{{"layers", a.Layers}, {"hidden", a.Hidden}, {"heads", a.Heads}, {"intermediate", a.Intermediate}, {"vocab", a.Vocab}} {
		if f.v <= 0 {
			return nil, fmt.Errorf("--arch flags: --%s is missing (give --layers, --hidden, --heads, --intermediate and --vocab)", f.name)
		}
	}
	m := &Model{
		Family: "arch", Layers: a.Layers, Hidden: a.Hidden, Heads: a.Heads, KVHeads: a.KVHeads,
		HeadDim: a.HeadDim, Intermediate: a.Intermediate, Vocab: a.Vocab, Tied: a.Tied,
		Gated: !a.PlainMLP, Norm: RMSNorm, NormsPerLayer: 2, FinalNorm: true,
	}
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	if m.HeadDim == 0 {
		if m.Hidden%m.Heads != 0 {
			return nil, fmt.Errorf("--arch flags: --heads %d does not divide --hidden %d; give --head-dim", m.Heads, m.Hidden)
		}
		m.HeadDim = m.Hidden / m.Heads
	}
	return m, nil
}

// ParseCount reads a parameter count: 6738415616, 6.7e9, 7B, 350M.
func ParseCount(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "B"):
		mult, t = 1e9, strings.TrimSuffix(t, "B")
	case strings.HasSuffix(t, "M"):
		mult, t = 1e6, strings.TrimSuffix(t, "M")
	case strings.HasSuffix(t, "K"):
		mult, t = 1e3, strings.TrimSuffix(t, "K")
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f <= 0 || f*mult > 1e15 {
		return 0, fmt.Errorf("--params %q: want a count such as 6738415616, 6.7e9 or 7B", s)
	}
	return int64(f*mult + 0.5), nil
}

// FlagCombinations applies --qlora's preset to the flags the user left
// unset and rejects the flags that contradict each other or would change
// nothing (the ones only the command line can see: which were given).
func FlagCombinations(o *Options, set map[string]bool, qlora bool) error {
	if set["precision"] && set["dtype"] {
		return fmt.Errorf("--precision replaces --dtype: give one")
	}
	if o.Inference {
		for _, f := range []string{"optimizer", "logits-fp32", "no-dropout", "qlora"} {
			if set[f] {
				return fmt.Errorf("--inference with --%s: that flag describes training", f)
			}
		}
	}
	if set["nodes"] && o.Nodes > 1 && o.ZeRO == 0 && !o.FSDP {
		return fmt.Errorf("--nodes %d without --zero or --fsdp changes nothing per GPU: data parallelism keeps a whole replica on each", o.Nodes)
	}
	if !qlora {
		return nil
	}
	if set["weights"] && o.Weights != "nf4" && o.Weights != "fp4" {
		return fmt.Errorf("--qlora quantizes the base to 4 bits; --weights %s contradicts it", o.Weights)
	}
	if set["precision"] && strings.HasPrefix(o.Precision, "fp32") {
		return fmt.Errorf("--qlora trains bf16 adapters; --precision fp32 contradicts it")
	}
	if o.Weights == "" {
		o.Weights = "nf4"
	}
	if !set["double-quant"] {
		o.DoubleQuant = true
	}
	if !set["lora-rank"] {
		o.LoRARank = 64
	}
	if !set["optimizer"] {
		o.Optimizer = "paged-adamw-8bit"
	}
	if !set["precision"] && !set["dtype"] {
		o.Precision = "bf16"
	}
	if !set["grad-checkpointing"] {
		o.GradCheckpointing = true
	}
	return nil
}

// DemoOptions sets the model and run of the embedded demo snapshot (a
// GPT-style block: LayerNorm, fused qkv and 4x GELU MLP with biases, untied
// head, flash attention, fp32, AdamW) for the flags the user left unset.
func DemoOptions(o *Options, set map[string]bool) {
	w := demo.Workload
	o.Model = &Model{
		Family: "demo", Layers: w.Layers, Hidden: w.DModel, Heads: w.Heads, KVHeads: w.Heads,
		HeadDim: w.DModel / w.Heads, Intermediate: 4 * w.DModel, Vocab: w.Vocab,
		QKVBias: true, OutBias: true, MLPBias: true, Norm: LayerNorm, NormsPerLayer: 2, FinalNorm: true,
	}
	if !set["dtype"] {
		o.Dtype = "fp32"
	}
	if !set["batch"] {
		o.Batch = w.Batch
	}
	if !set["seq"] {
		o.Seq = w.Seq
	}
	if !set["flash-attention"] {
		o.FlashAttention = true
	}
}

// Measure measures one device of a snapshot: the peaks of the
// Active Memory and Active Cached Segment timelines, each category's
// largest live total over the trace (categories from internal/analysis),
// and the categories live at the allocated peak.
func Measure(s *snapshot.Snapshot, device int) Measured {
	d := analysis.NewDevice(s, device)
	lt := d.Active
	// Sweep the actions once, keeping every category's maximum.
	sweep := d.NewCategorySweep()
	cur := &sweep.Live
	var most, atPeak analysis.Totals
	most = *cur
	if lt.PeakAction < 0 {
		atPeak = *cur
	}
	for k := range lt.Events {
		sweep.Apply(k)
		for c := range cur {
			most[c] = max(most[c], cur[c])
		}
		if k == lt.PeakAction {
			atPeak = *cur
		}
	}
	// The Active Cached Segment Timeline's peak is the one replay.Peaks
	// reports; d replayed it already.
	reserved := d.Segments.PeakBytes
	m := Measured{
		Peak:           int64(lt.PeakBytes),
		PeakReserved:   int64(reserved),
		Parameters:     int64(most[analysis.Parameter]),
		Gradients:      int64(most[analysis.Gradient]),
		OptimizerState: int64(most[analysis.OptimizerState]),
		Activations:    int64(most[analysis.Activation]),
		Categories:     "internal/analysis, each category's largest live total",
	}
	// Without a trace or stacks the categories are unknown, not zero.
	if unknown := atPeak[analysis.Unknown]; unknown > 0 && unknown >= lt.PeakBytes/2 {
		m.Categories = fmt.Sprintf("internal/analysis could not categorise %s of the %s peak (no trace or no stacks)",
			Size(int64(unknown)), Size(int64(lt.PeakBytes)))
		for _, v := range []*int64{&m.Parameters, &m.Gradients, &m.OptimizerState, &m.Activations} {
			if *v == 0 {
				*v = -1
			}
		}
	}
	for _, c := range analysis.Categories() {
		if atPeak[c] > 0 {
			m.AtPeak = append(m.AtPeak, Amount{Name: c.String(), Bytes: int64(atPeak[c])})
		}
	}
	return m
}

// ParseGPU reads --gpu: a GPU of analysis's table (H100, A100-40GB, ...)
// or a size (80GiB).
func ParseGPU(s string) (GPU, error) {
	g, err := analysis.LookupGPU(s)
	if err == nil {
		return GPU{Name: g.Name, Bytes: int64(g.Bytes)}, nil
	}
	if a := (*analysis.AmbiguousGPUError)(nil); errors.As(err, &a) {
		return GPU{}, fmt.Errorf("--gpu %w", err)
	}
	if b, err := ParseSize(s); err == nil && b > 0 {
		return GPU{Name: s, Bytes: b}, nil
	}
	names := make([]string, len(analysis.GPUs))
	for i, g := range analysis.GPUs {
		names[i] = g.Name
	}
	return GPU{}, fmt.Errorf("--gpu %q: not a known GPU (%s) or a size such as 80GiB", s, strings.Join(names, ", "))
}
