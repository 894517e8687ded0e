package estimate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
)

// Measured is what a snapshot of the same run recorded on one device.
// Category fields are -1 when the snapshot's categories are unknown.
type Measured struct {
	Source         string // file name, for the report
	Peak           int64  // peak allocated bytes (memory_viz's Active Memory Timeline)
	PeakReserved   int64  // peak reserved bytes (Active Cached Segment Timeline)
	Parameters     int64
	Gradients      int64
	OptimizerState int64
	Activations    int64
	Categories     string   // where the categories came from, or why there are none
	AtPeak         []Amount // categories live at the allocated peak
}

// Amount is bytes of one named category.
type Amount struct {
	Name  string
	Bytes int64
}

// CheckRow is one quantity estimated and measured.
type CheckRow struct {
	Name      string
	Estimated int64
	Measured  int64 // -1: not measured
	Reason    string
}

// unrelatedRatio is how far apart (either way) an estimate and a
// measurement may be and still be compared: beyond it the snapshot is not
// of this model, and a percentage (+757352900.0% against 512 bytes) would
// be noise.
const unrelatedRatio = 10

// Diff is (estimated - measured) / measured, NaN when not measured or
// when the two are not comparable (see Unrelated).
func (c CheckRow) Diff() float64 {
	if c.Measured <= 0 || c.Unrelated() {
		return math.NaN()
	}
	return float64(c.Estimated-c.Measured) / float64(c.Measured)
}

// Unrelated reports a measurement more than unrelatedRatio times from the
// estimate, either way: the snapshot does not look like this model's run.
func (c CheckRow) Unrelated() bool {
	return c.Measured > 0 && (float64(c.Estimated) > unrelatedRatio*float64(c.Measured) ||
		float64(c.Measured) > unrelatedRatio*float64(c.Estimated))
}

// Check is an estimate set beside a snapshot's measurements.
type Check struct {
	Measured Measured
	Rows     []CheckRow
	Notes    []string
}

// Compare sets the estimate r beside the measurements m and explains each
// difference from what the estimate assumed.
func Compare(r *Result, m Measured) *Check {
	o := &r.Options
	c := &Check{Measured: m}
	add := func(name string, est, meas int64, reason func(d float64) string) {
		row := CheckRow{Name: name, Estimated: est, Measured: meas}
		switch d := row.Diff(); {
		case !math.IsNaN(d):
			row.Reason = reason(d)
		case row.Unrelated():
			row.Reason = fmt.Sprintf("not comparable: %s measured against %s estimated, over %d× apart; "+
				"the snapshot does not look like this model's run (another model, or another part of the run)", Size(meas), Size(est), unrelatedRatio)
		case meas == 0 && atPeak(m, "unknown") >= est/2:
			row.Reason = fmt.Sprintf("none categorised, but %s at the measured peak has no category (blocks without stacks, "+
				"made before the trace) and may hold it", Size(atPeak(m, "unknown")))
		case meas == 0:
			row.Reason = "none in the snapshot: a forward-only run, or this part of the step happened outside the trace"
		default:
			row.Reason = "not measured: " + m.Categories
		}
		c.Rows = append(c.Rows, row)
	}
	add("parameters", r.Term(TermParameters), m.Parameters, func(d float64) string {
		switch {
		case math.Abs(d) <= 0.01:
			return "matches: the architecture's exact count × bytes per parameter"
		case d > 0:
			return "fewer parameter bytes live: some weights were allocated before the trace began or live on another device"
		default:
			return "more parameter-like tensors than weights: buffers (RoPE tables, masks) or copies counted with the parameters"
		}
	})
	add("gradients", r.Term(TermGradients), m.Gradients, func(d float64) string {
		switch {
		case math.Abs(d) <= 0.01:
			return "matches: one gradient per trainable parameter"
		case d > 0:
			return "fewer gradients live at once: the snapshot misses part of backward, or gradients are freed as they are used"
		default:
			return "more gradient bytes: gradient accumulation buffers or gradients kept in fp32 for 16-bit weights"
		}
	})
	add("optimizer state", r.Term(TermOptimizerState), m.OptimizerState, func(d float64) string {
		switch {
		case math.Abs(d) <= 0.01:
			return fmt.Sprintf("matches: %s state for every trainable parameter", o.Optimizer)
		case d > 0:
			return "less state live: the state is created lazily during the first step, or the snapshot ends before it"
		default:
			return "more state: step counters and per-parameter scalars, or a master copy the estimate did not assume"
		}
	})
	add("activations", r.Term(TermActivations), m.Activations, func(d float64) string {
		switch {
		case math.Abs(d) <= 0.15 && o.Calibration != nil:
			return "close: what the calibration runs kept, scaled to this shape"
		case math.Abs(d) <= 0.15:
			return "close: the saved tensors of the assumed eager blocks"
		case d > 0:
			return "fewer saved tensors: fused kernels (flash attention, fused norms) or checkpointing keep less than eager PyTorch"
		}
		gap := m.Activations - r.Term(TermActivations)
		if mod := o.Model; mod != nil && !o.FlashAttention && !o.GradCheckpointing {
			P := dtypeBytes[o.Dtype]
			perLayer := gap / int64(mod.Layers)
			score := int64(o.Batch) * int64(mod.Heads) * int64(o.Seq) * int64(o.Seq) * P
			hidden := int64(o.Batch) * int64(o.Seq) * int64(mod.Hidden) * P
			return fmt.Sprintf("more saved tensors: %s more per layer, %.1f× the B×H×L² score tensor (%s) or %.1f× a B×L×hidden tensor (%s): "+
				"a hand-written softmax or RMSNorm keeps several such intermediates where PyTorch's fused ops keep one",
				Size(perLayer), float64(perLayer)/float64(score), Size(score), float64(perLayer)/float64(hidden), Size(hidden))
		}
		return fmt.Sprintf("more saved tensors (%s): hand-written norms, softmax or casts keep intermediates the eager formula does not count", Size(gap))
	})
	peakReason := func(d float64) string {
		phase := r.peakPhase()
		if math.Abs(d) <= 0.05 {
			return "close: the peak is reached at the " + phase
		}
		if u := atPeak(m, "unknown"); u >= m.Peak/2 {
			return fmt.Sprintf("%s of the measured peak has no category, so the terms cannot be compared; the estimate's peak is the %s", Size(u), phase)
		}
		A := r.Term(TermActivations)
		if d > 0 && !o.FirstStep && !o.Inference && phase != "optimizer step" && atPeak(m, "optimizer_state") > 0 && atPeak(m, "activation") < A/2 {
			return fmt.Sprintf("the measured peak is the optimizer step (little activation live), not the %s with the optimizer state beside the activations: "+
				"in a first step the state is created only in the optimizer step; --first-step models that", phase)
		}
		if d < 0 && !o.KeepGrads && !o.Inference && phase != "optimizer step" && atPeak(m, "gradient") > r.Term(TermGradients)/2 && atPeak(m, "activation") >= A/2 {
			return fmt.Sprintf("gradients (%s) are live at the measured peak beside the activations: the run keeps them allocated "+
				"(zeroed in place, e.g. zero_grad(set_to_none=False)) instead of freeing them; --keep-grads models that", Size(atPeak(m, "gradient")))
		}
		if cat, est, meas, ok := largestGapAtPeak(r, m); ok {
			return fmt.Sprintf("at the measured peak %s is %s against %s in the estimate's peak phase (%s)", cat, Size(meas), Size(est), phase)
		}
		if d > 0 {
			return "measured peak lower: the snapshot's step starts without the optimizer state (first step) or ends before the " + phase
		}
		return "measured peak higher: temporaries the terms leave out (casts, the loss, many small tensors) at the " + phase
	}
	add("peak (allocated)", r.PeakBytes, m.Peak, peakReason)
	if m.PeakReserved > 0 {
		est := r.PeakBytes + r.Term(TermAllocatorOverhead)
		add("peak reserved", est, m.PeakReserved, func(d float64) string {
			frag := float64(m.PeakReserved)/float64(max(m.Peak, 1)) - 1
			return fmt.Sprintf("the run's allocator kept %.1f%% above its allocated peak; the estimate assumed %.0f%% (--allocator-overhead)", frag*100, o.CacheOverhead*100)
		})
	}
	c.Notes = append(c.Notes, "the CUDA context ("+Size(r.Term(TermCUDAContext))+") is outside the allocator, so no snapshot shows it")
	return c
}

// largestGapAtPeak compares the categories live at the measured peak with
// the estimate's terms and returns the one that differs most.
func largestGapAtPeak(r *Result, m Measured) (cat string, est, meas int64, ok bool) {
	terms := map[string]string{"parameter": TermParameters, "gradient": TermGradients,
		"optimizer_state": TermOptimizerState, "activation": TermActivations}
	var best int64
	for _, a := range m.AtPeak {
		k, known := terms[a.Name]
		if !known {
			continue
		}
		if g := abs(a.Bytes - r.Term(k)); g > best {
			best, cat, est, meas, ok = g, a.Name, r.Term(k), a.Bytes, true
		}
	}
	// What lives only inside a phase: backward's autograd buffers and the
	// step's temporaries against the estimate's logits gradient or
	// optimizer intermediates.
	temps := atPeak(m, "autograd_detail") + atPeak(m, "temporary")
	var estTemps int64
	for _, p := range r.Phases {
		if p.Name == r.peakPhase() {
			estTemps = p.Temps
		}
	}
	if g := abs(temps - estTemps); g > best {
		cat, est, meas, ok = "autograd_detail + temporary", estTemps, temps, true
	}
	return cat, est, meas, ok
}

// atPeak is the measured bytes of one category at the peak.
func atPeak(m Measured, name string) int64 {
	for _, a := range m.AtPeak {
		if a.Name == name {
			return a.Bytes
		}
	}
	return 0
}

// peakPhase names the phase with the most memory.
func (r *Result) peakPhase() string {
	best := Phase{}
	for _, p := range r.Phases {
		if p.Bytes > best.Bytes {
			best = p
		}
	}
	return best.Name
}

// CheckJSON is the check as --json prints it.
type CheckJSON struct {
	Snapshot   string         `json:"snapshot"`
	Categories string         `json:"categories"`
	Rows       []CheckRowJSON `json:"rows"`
	AtPeak     []AmountJSON   `json:"at_peak"`
	Notes      []string       `json:"notes"`
}

// AmountJSON is one category's bytes.
type AmountJSON struct {
	Category string `json:"category"`
	Bytes    int64  `json:"bytes"`
}

// CheckRowJSON is one row; measured is null when unknown, and diff absent
// when unknown or not comparable (the reason says which).
type CheckRowJSON struct {
	Name      string   `json:"name"`
	Estimated int64    `json:"estimated_bytes"`
	Measured  *int64   `json:"measured_bytes"`
	Diff      *float64 `json:"diff,omitempty"`
	Reason    string   `json:"reason"`
}

// ToJSON converts the check.
func (c *Check) ToJSON() *CheckJSON {
	j := &CheckJSON{Snapshot: c.Measured.Source, Categories: c.Measured.Categories, Notes: c.Notes}
	for _, a := range c.Measured.AtPeak {
		j.AtPeak = append(j.AtPeak, AmountJSON{a.Name, a.Bytes})
	}
	for _, row := range c.Rows {
		rj := CheckRowJSON{Name: row.Name, Estimated: row.Estimated, Reason: row.Reason}
		if row.Measured >= 0 {
			m := row.Measured
			rj.Measured = &m
		}
		if d := row.Diff(); !math.IsNaN(d) {
			rj.Diff = &d
		}
		j.Rows = append(j.Rows, rj)
	}
	return j
}

// Write prints the check as a table with a reason per row.
func (c *Check) Write(w io.Writer) error {
	fmt.Fprintf(w, "check against %s (categories: %s)\n", c.Measured.Source, c.Measured.Categories)
	fmt.Fprintf(w, "%-18s %10s %10s %8s  %s\n", "", "estimated", "measured", "diff", "likely reason")
	for _, row := range c.Rows {
		meas, diff := "-", "-"
		if row.Measured >= 0 {
			meas = Size(row.Measured)
		}
		if d := row.Diff(); !math.IsNaN(d) {
			diff = fmt.Sprintf("%+.1f%%", d*100)
		} else if row.Unrelated() {
			diff = "n/a"
		}
		fmt.Fprintf(w, "%-18s %10s %10s %8s  %s\n", row.Name, Size(row.Estimated), meas, diff, row.Reason)
	}
	if len(c.Measured.AtPeak) > 0 {
		fmt.Fprintf(w, "at the measured peak:")
		for i, a := range c.Measured.AtPeak {
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(w, "%s %s %s", sep, a.Name, Size(a.Bytes))
		}
		fmt.Fprintln(w)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// WriteJSON writes "gpumem estimate --json": the estimate, with the
// verdict on a GPU and the check against a snapshot when there are any.
func (r *Result) WriteJSON(w io.Writer, v *Verdict, chk *Check) error {
	j := r.ToJSON(v)
	var out any = j
	if chk != nil {
		out = struct {
			JSON
			Check *CheckJSON `json:"check"`
		}{j, chk.ToJSON()}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteText writes "gpumem estimate": the estimate, then the check.
func (r *Result) WriteText(w io.Writer, v *Verdict, chk *Check) error {
	if err := r.Write(w, v); err != nil {
		return err
	}
	if chk != nil {
		fmt.Fprintln(w)
		return chk.Write(w)
	}
	return nil
}
