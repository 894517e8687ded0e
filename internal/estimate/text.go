package estimate

import (
	"fmt"
	"io"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// Verdict is the answer for one GPU: does the job fit, and the largest
// per-GPU batch that does.
type Verdict struct {
	GPU      GPU
	Fits     bool
	MaxBatch int
}

// JSON is the estimate as gpumem estimate --json prints it.
type JSON struct {
	Parameters int64       `json:"parameters"`
	Trainable  int64       `json:"trainable_parameters"`
	PeakBytes  int64       `json:"peak_bytes"`
	BlogPeak   int64       `json:"blog_peak_bytes"`
	TotalBytes int64       `json:"total_bytes"`
	HostBytes  int64       `json:"host_bytes_per_node,omitempty"`
	Terms      TermsJSON   `json:"terms"`
	Heuristic  *int64      `json:"activations_blog_heuristic_bytes,omitempty"`
	Arch       *int64      `json:"activations_architecture_bytes,omitempty"`
	Formulas   []TermJSON  `json:"formulas"`
	Phases     []PhaseJSON `json:"phases"`
	GPU        string      `json:"gpu,omitempty"`
	GPUBytes   int64       `json:"gpu_bytes,omitempty"`
	Fits       *bool       `json:"fits,omitempty"`
	MaxBatch   *int        `json:"max_batch,omitempty"`
}

// TermsJSON is bytes per term.
type TermsJSON struct {
	Parameters             int64 `json:"parameters"`
	Gradients              int64 `json:"gradients"`
	OptimizerState         int64 `json:"optimizer_state"`
	OptimizerIntermediates int64 `json:"optimizer_intermediates"`
	Activations            int64 `json:"activations"`
	KVCache                int64 `json:"kv_cache"`
	AutocastCache          int64 `json:"autocast_cache,omitempty"`
	CUDAContext            int64 `json:"cuda_context"`
	AllocatorOverhead      int64 `json:"allocator_overhead"`
}

// TermJSON is one term with its formula.
type TermJSON struct {
	Term    string `json:"term"`
	Bytes   int64  `json:"bytes"`
	Formula string `json:"formula"`
}

// PhaseJSON is one phase of a step.
type PhaseJSON struct {
	Phase string `json:"phase"`
	Bytes int64  `json:"bytes"`
}

// ToJSON converts r (and the GPU verdict, when a GPU was given).
func (r *Result) ToJSON(v *Verdict) JSON {
	j := JSON{
		Parameters: r.Parameters,
		Trainable:  r.Trainable,
		PeakBytes:  r.PeakBytes,
		BlogPeak:   r.BlogPeak,
		TotalBytes: r.TotalBytes,
		HostBytes:  r.HostBytes,
		Terms: TermsJSON{
			Parameters:             r.Term(TermParameters),
			Gradients:              r.Term(TermGradients),
			OptimizerState:         r.Term(TermOptimizerState),
			OptimizerIntermediates: r.Term(TermOptimizerIntermediates),
			Activations:            r.Term(TermActivations),
			KVCache:                r.Term(TermKVCache),
			AutocastCache:          r.Term(TermAutocastCache),
			CUDAContext:            r.Term(TermCUDAContext),
			AllocatorOverhead:      r.Term(TermAllocatorOverhead),
		},
	}
	for _, t := range r.Terms {
		j.Formulas = append(j.Formulas, TermJSON{t.Key, t.Bytes, t.Formula})
	}
	if r.Heuristic != nil {
		h := r.Heuristic.Bytes
		j.Heuristic = &h
		j.Formulas = append(j.Formulas, TermJSON{"activations_blog_heuristic", h, r.Heuristic.Formula})
	}
	if r.Arch != nil {
		a := r.Arch.Bytes
		j.Arch = &a
	}
	for _, p := range r.Phases {
		j.Phases = append(j.Phases, PhaseJSON{p.Name, p.Bytes})
	}
	if v != nil {
		j.GPU, j.GPUBytes = v.GPU.Name, v.GPU.Bytes
		fits, mb := v.Fits, v.MaxBatch
		j.Fits, j.MaxBatch = &fits, &mb
	}
	return j
}

// Size formats a byte count as "12.6GiB".
func Size(n int64) string { return strings.TrimSpace(units.Python(n)) }

// Describe is the one-line summary of the job.
func (o *Options) Describe() string {
	var parts []string
	if o.Inference {
		parts = append(parts, "inference")
	} else {
		parts = append(parts, "training")
	}
	parts = append(parts, o.precision().Name)
	if o.Weights != "" {
		w := o.Weights + " weights"
		if o.DoubleQuant {
			w += " (double quantization)"
		}
		parts = append(parts, w)
	}
	if !o.Inference {
		opt := o.Optimizer
		switch o.impl() {
		case "loop":
			opt += " (per-parameter loop)"
		case "fused":
			opt += " (fused)"
		}
		parts = append(parts, opt)
	}
	parts = append(parts, fmt.Sprintf("batch %d × seq %d per GPU", o.Batch, o.Seq))
	if o.KeepGrads && !o.Inference {
		parts = append(parts, "gradients kept through the forward")
	}
	if o.FirstStep && !o.Inference {
		parts = append(parts, "first step")
	}
	if o.GradCheckpointing {
		parts = append(parts, "gradient checkpointing")
	}
	if c := o.Calibration; c != nil && !o.Inference {
		parts = append(parts, fmt.Sprintf("calibrated on %d runs", c.Runs))
	}
	if o.FlashAttention {
		parts = append(parts, "flash attention")
	}
	switch {
	case o.FSDP:
		parts = append(parts, fmt.Sprintf("FSDP full sharding over %d GPUs", o.TotalGPUs()))
	case o.ZeRO > 0:
		parts = append(parts, fmt.Sprintf("ZeRO-%d over %d GPU%s", o.ZeRO, o.TotalGPUs(), plural(o.TotalGPUs())))
	}
	if o.Offload != "" {
		parts = append(parts, "offload "+o.Offload+" to CPU")
	}
	if o.LoRARank > 0 {
		t := "attention and MLP projections"
		if o.LoRATargets == "attention" {
			t = "attention projections"
		}
		parts = append(parts, fmt.Sprintf("LoRA rank %d on the %s", o.LoRARank, t))
	}
	if o.LogitsFP32 && o.Model != nil && !o.Inference && o.precision().A < 4 {
		parts = append(parts, "fp32 logits in the loss")
	}
	return strings.Join(parts, ", ")
}

// Write prints the estimate: the model, every term with its formula, the
// phases, the peak and the total, and the GPU verdict when given.
func (r *Result) Write(w io.Writer, v *Verdict) error {
	o := &r.Options
	name := "from --params"
	if o.Model != nil {
		name = o.Model.Family
	}
	fmt.Fprintf(w, "model      %s: %s parameters (%.2f B)", name, count(r.Parameters), float64(r.Parameters)/1e9)
	if !o.Inference && r.Trainable != r.Parameters {
		fmt.Fprintf(w, ", %s trainable", count(r.Trainable))
	}
	fmt.Fprintf(w, "\njob        %s\n\n", o.Describe())
	fmt.Fprintf(w, "%-26s %10s  %s\n", "term", "size", "formula")
	row := func(t Term) {
		fmt.Fprintf(w, "%-26s %10s  %s\n", t.Name, Size(t.Bytes), t.Formula)
	}
	for _, t := range r.Terms {
		row(t)
		if t.Key == TermActivations && r.Arch != nil {
			row(*r.Arch)
		}
		if t.Key == TermActivations && r.Heuristic != nil && o.Model != nil {
			row(Term{Name: "  blog heuristic", Bytes: r.Heuristic.Bytes, Formula: r.Heuristic.Formula})
		}
	}
	if r.Heuristic != nil && o.Model == nil {
		row(Term{Name: "  (heuristic used)", Bytes: r.Heuristic.Bytes, Formula: r.Heuristic.Formula})
	}
	fmt.Fprintf(w, "\n%-26s %10s\n", "phase", "size")
	for _, p := range r.Phases {
		fmt.Fprintf(w, "%-26s %10s  %s\n", p.Name, Size(p.Bytes), p.Formula)
	}
	if o.Inference {
		fmt.Fprintf(w, "\npeak       %s (%d bytes) = parameters + KV cache + activations\n", Size(r.PeakBytes), r.PeakBytes)
	} else {
		fmt.Fprintf(w, "\nblog peak  %s (%d bytes) = parameters + optimizer state + max(gradients + optimizer intermediates, activations)\n",
			Size(r.BlogPeak), r.BlogPeak)
		fmt.Fprintf(w, "peak       %s (%d bytes) = the largest phase, the %s\n", Size(r.PeakBytes), r.PeakBytes, r.peakPhase())
	}
	fmt.Fprintf(w, "total      %s (%d bytes) = peak + allocator overhead + CUDA context\n", Size(r.TotalBytes), r.TotalBytes)
	if r.HostBytes > 0 {
		fmt.Fprintf(w, "host RAM   %s (%d bytes) %s\n", Size(r.HostBytes), r.HostBytes, r.HostNote)
	}
	if v != nil {
		verdict := "fits"
		if !v.Fits {
			verdict = "does NOT fit"
		}
		fmt.Fprintf(w, "gpu        %s, %s: %s (%s %s)\n", v.GPU.Name, Size(v.GPU.Bytes), verdict,
			Size(abs(v.GPU.Bytes-r.TotalBytes)), map[bool]string{true: "to spare", false: "short"}[v.Fits])
		if v.MaxBatch > 0 {
			fmt.Fprintf(w, "max batch  %d per GPU at seq %d\n", v.MaxBatch, o.Seq)
		} else {
			fmt.Fprintf(w, "max batch  0: not even a batch of 1 fits\n")
		}
	}
	return nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
