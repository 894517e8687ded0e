package synth

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/gpumem/gpumem/internal/atomicfile"
	"github.com/gpumem/gpumem/snapshot"
)

// Write writes s, a snapshot made by Generate, with snapshot.WritePickle
// (byte-identical to CPython's pickle.dump(obj, protocol=4)) or, with
// asJSON, snapshot.WriteJSON (json.dumps(obj)); memory_viz reads both.
func Write(w io.Writer, s *snapshot.Snapshot, asJSON bool) error {
	if asJSON {
		return snapshot.WriteJSON(w, s)
	}
	return snapshot.WritePickle(w, s)
}

// WriteFile writes s to path atomically (a temporary file in the same
// folder, renamed over path) and returns the bytes written. Path "-" writes
// to stdout.
func WriteFile(path string, s *snapshot.Snapshot, asJSON bool) (int64, error) {
	if path == "-" {
		cw := &countWriter{w: os.Stdout}
		err := Write(cw, s, asJSON)
		return cw.n, err
	}
	var n int64
	err := atomicfile.Write(path, func(w io.Writer) error {
		cw := &countWriter{w: w}
		err := Write(cw, s, asJSON)
		n = cw.n
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// encodedSize is the size of s written in the chosen encoding.
func encodedSize(s *snapshot.Snapshot, asJSON bool) (int64, error) {
	cw := &countWriter{w: io.Discard}
	err := Write(cw, s, asJSON)
	return cw.n, err
}

// GenerateSize is Generate with the step count chosen so that the written
// file is about targetBytes: it measures one- and two-step runs, sets the
// steps from the per-step growth, and corrects once. The workload's Steps
// is ignored. A run that hits OOM before reaching the size is returned as
// is.
func GenerateSize(w Workload, opt Options, targetBytes int64, asJSON bool) (*snapshot.Snapshot, *Result, error) {
	if targetBytes <= 0 {
		return nil, nil, fmt.Errorf("target size must be positive")
	}
	measure := func(steps int) (*snapshot.Snapshot, *Result, int64, error) {
		w.Steps = steps
		s, res, err := Generate(w, opt)
		if err != nil {
			return nil, nil, 0, err
		}
		n, err := encodedSize(s, asJSON)
		return s, res, n, err
	}
	s1, r1, n1, err := measure(1)
	if err != nil || r1.OOM != nil || n1 >= targetBytes {
		return s1, r1, err
	}
	_, r2, n2, err := measure(2)
	if err != nil || r2.OOM != nil {
		return s1, r1, err
	}
	steps := func(base, per float64) int {
		if per <= 0 {
			return 2
		}
		return int(math.Max(1, math.Min(1e6, math.Round((float64(targetBytes)-base)/per))))
	}
	per := float64(n2 - n1)
	n := steps(float64(n1)-per, per)
	s, res, got, err := measure(n)
	if err != nil || res.OOM != nil {
		return s, res, err
	}
	// One correction from the measured average, for fixed costs that do not
	// scale (the first step's optimizer states, the final segments).
	if diff := math.Abs(float64(got-targetBytes)) / float64(targetBytes); diff > 0.02 && n > 2 {
		per = float64(got-n1) / float64(n-1)
		if m := steps(float64(n1)-per, per); m != n {
			s, res, _, err = measure(m)
		}
	}
	return s, res, err
}
