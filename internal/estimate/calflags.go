package estimate

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// CalibrationFlags are estimate's --calibrate snapshots with the
// per-GPU batch and sequence length of each (given once for all, or once
// each).
type CalibrationFlags struct {
	Paths      []string
	Batch, Seq []int
}

// PathsValue is --calibrate FILE, repeatable.
func (c *CalibrationFlags) PathsValue() flag.Value { return (*paths)(&c.Paths) }

// BatchValue is --calibrate-batch N, repeatable: a positive batch.
func (c *CalibrationFlags) BatchValue() flag.Value { return (*positives)(&c.Batch) }

// SeqValue is --calibrate-seq N, repeatable: a positive length.
func (c *CalibrationFlags) SeqValue() flag.Value { return (*positives)(&c.Seq) }

type paths []string

func (l *paths) String() string     { return strings.Join(*l, ",") }
func (l *paths) Set(v string) error { *l = append(*l, v); return nil }

type positives []int

func (l *positives) String() string { return fmt.Sprint(*l) }
func (l *positives) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive integer, got %q", v)
	}
	*l = append(*l, n)
	return nil
}

// Given reports whether any calibration flag was given.
func (c *CalibrationFlags) Given() bool {
	return len(c.Paths) > 0 || len(c.Batch) > 0 || len(c.Seq) > 0
}

// Validate checks that the flags go together; the messages name them.
func (c *CalibrationFlags) Validate() error {
	if len(c.Paths) == 0 {
		return fmt.Errorf("--calibrate-batch and --calibrate-seq need --calibrate SNAPSHOT")
	}
	for _, l := range []struct {
		name string
		n    int
	}{{"calibrate-batch", len(c.Batch)}, {"calibrate-seq", len(c.Seq)}} {
		if l.n != 1 && l.n != len(c.Paths) {
			return fmt.Errorf("--%s given %d times for %d --calibrate snapshots (give it once, or once each)", l.name, l.n, len(c.Paths))
		}
	}
	return nil
}

// Observations measures each snapshot with measure and pairs it with its
// batch and sequence length.
func (c *CalibrationFlags) Observations(measure func(path string) (Measured, error)) ([]Observation, error) {
	pick := func(list []int, i int) int {
		if len(list) == 1 {
			return list[0]
		}
		return list[i]
	}
	var obs []Observation
	for i, p := range c.Paths {
		m, err := measure(p)
		if err != nil {
			return nil, err
		}
		obs = append(obs, Observation{Batch: pick(c.Batch, i), Seq: pick(c.Seq, i), Measured: m})
	}
	return obs, nil
}

// ReadConfigFile reads at most MaxConfigBytes + 1 bytes of a config.json,
// so that a hostile or mistaken file (a checkpoint given as the config)
// costs bounded memory; ParseConfig refuses the oversize. Its errors are
// the file system's, without the path.
func ReadConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
}
