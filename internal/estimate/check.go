package estimate

import (
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
	Categories     string // where the categories came from, or why there are none
}

// CheckRow is one quantity estimated and measured.
type CheckRow struct {
	Name      string
	Estimated int64
	Measured  int64 // -1: not measured
	Reason    string
}

// Diff is (estimated - measured) / measured, NaN when not measured.
func (c CheckRow) Diff() float64 {
	if c.Measured <= 0 {
		return math.NaN()
	}
	return float64(c.Estimated-c.Measured) / float64(c.Measured)
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
		if d := row.Diff(); !math.IsNaN(d) {
			row.Reason = reason(d)
		} else {
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
		case math.Abs(d) <= 0.15:
			return "close: the saved tensors of the assumed eager blocks"
		case d > 0:
			return "fewer saved tensors: fused kernels (flash attention, fused norms) or checkpointing keep less than eager PyTorch"
		default:
			if o.FlashAttention {
				return "more saved tensors: hand-written norms, softmax or casts keep intermediates the eager formula does not count"
			}
			return "more saved tensors: a hand-written softmax or RMSNorm keeps several L×L or hidden-size intermediates where eager PyTorch keeps one"
		}
	})
	peakReason := func(d float64) string {
		phase := r.peakPhase()
		switch {
		case math.Abs(d) <= 0.05:
			return "close: the peak is reached at the " + phase
		case d > 0:
			return "measured peak lower: the snapshot's step starts without the optimizer state (first step) or ends before the " + phase
		default:
			return "measured peak higher: temporaries the terms leave out (casts, the loss, the allocator's rounding of many small tensors) at the " + phase
		}
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
	Notes      []string       `json:"notes"`
}

// CheckRowJSON is one row; measured is null and diff absent when unknown.
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
		}
		fmt.Fprintf(w, "%-18s %10s %10s %8s  %s\n", row.Name, Size(row.Estimated), meas, diff, row.Reason)
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}
