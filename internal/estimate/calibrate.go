package estimate

import (
	"errors"
	"fmt"
	"math"
)

// Observation is one small real run of the job: its per-GPU shape and
// what its snapshot measured.
type Observation struct {
	Batch, Seq int
	Measured   Measured
}

// Calibration is what small real runs say the model keeps, in place of
// the architecture's assumptions (the seed blog's method, made exact):
// activations per sequence = PerToken × L + PerSeqSq × L², fitted by least
// squares over the runs, and the optimizer step's temporaries as measured.
type Calibration struct {
	PerToken  float64 // activation bytes per token
	PerSeqSq  float64 // activation bytes per sequence per L² (0 with one length)
	Lengths   int     // distinct sequence lengths among the runs
	Runs      int
	B0, L0    int     // with one length: the run's shape, to scale the architecture
	A0        float64 // with one length: its measured activations
	StepTemps int64   // what the optimizer step allocated beyond weights, gradients, state and activations; -1 when no run peaked there
}

// Calibrate fits the calibration to two or more observations (one gives
// a scale factor on the architecture's activations, without the L² part).
func Calibrate(obs []Observation) (*Calibration, error) {
	if len(obs) == 0 {
		return nil, errors.New("no calibration runs")
	}
	c := &Calibration{Runs: len(obs), StepTemps: -1}
	lengths := map[int]bool{}
	var s11, s12, s22, t1, t2 float64 // normal equations of y = a·L + q·L²
	for _, ob := range obs {
		m := ob.Measured
		if ob.Batch <= 0 || ob.Seq <= 0 {
			return nil, fmt.Errorf("%s: batch and seq must be positive (got %d and %d)", m.Source, ob.Batch, ob.Seq)
		}
		if m.Activations <= 0 {
			return nil, fmt.Errorf("%s: no activations measured (%s): a calibration run must record a training forward with stacks", m.Source, m.Categories)
		}
		lengths[ob.Seq] = true
		L := float64(ob.Seq)
		y := float64(m.Activations) / float64(ob.Batch)
		s11 += L * L
		s12 += L * L * L
		s22 += L * L * L * L
		t1 += L * y
		t2 += L * L * y
		c.B0, c.L0, c.A0 = ob.Batch, ob.Seq, float64(m.Activations)
		// A run that peaked in its optimizer step (little activation live)
		// shows what the step allocates.
		if atPeak(m, "activation") < m.Activations/2 {
			temps := m.Peak - atPeak(m, "parameter") - atPeak(m, "gradient") - atPeak(m, "optimizer_state") - atPeak(m, "activation")
			c.StepTemps = max(c.StepTemps, temps)
		}
	}
	c.Lengths = len(lengths)
	if c.Lengths >= 2 {
		det := s11*s22 - s12*s12
		c.PerToken = (t1*s22 - t2*s12) / det
		c.PerSeqSq = (s11*t2 - s12*t1) / det
	}
	return c, nil
}

// activations predicts the activations at batch B and sequence S; arch
// gives the architecture's figure at a shape (used with one length).
func (c *Calibration) activations(B, S int64, arch func(B, S int64) int64) (int64, string) {
	if c.Lengths >= 2 {
		perSeq := c.PerToken*float64(S) + c.PerSeqSq*float64(S)*float64(S)
		n := int64(math.Round(math.Max(0, perSeq) * float64(B)))
		return n, fmt.Sprintf("calibrated from %d runs at %d lengths: B %d × (%.1f B/token × L %d + %.4f B × L²) = %s",
			c.Runs, c.Lengths, B, c.PerToken, S, c.PerSeqSq, count(n))
	}
	at := arch(int64(c.B0), int64(c.L0))
	scale := c.A0 / float64(max(at, 1))
	n := int64(math.Round(float64(arch(B, S)) * scale))
	return n, fmt.Sprintf("calibrated from 1 length (L %d): the architecture's figure × %.3f measured/estimated = %s (a second length would measure the L² part)",
		c.L0, scale, count(n))
}
