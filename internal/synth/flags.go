package synth

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// Flags is gpumem synth's command line as typed: the workload's numbers
// and switches go straight into Workload; the values still to be read
// (DType, Config, Capacity, Leak) are read by Check.
type Flags struct {
	Workload                      Workload
	DType, Config, Capacity, Leak string
	TargetMB                      float64
	Device                        int // -1: not given
}

// Check reads and checks the flags' values, with the flags' names in its
// messages: it completes Workload and returns the run's options.
func (f *Flags) Check() (Options, error) {
	w := &f.Workload
	dt, err := ParseDType(f.DType)
	if err != nil {
		return Options{}, errors.New("--dtype: " + err.Error())
	}
	w.DType = dt
	if w.Model != "mlp" && w.Model != "transformer" {
		return Options{}, fmt.Errorf("--model %q: want mlp or transformer", w.Model)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"layers", w.Layers}, {"hidden", w.Hidden}, {"d-model", w.DModel}, {"heads", w.Heads}, {"seq", w.Seq}, {"vocab", w.Vocab}, {"batch", w.Batch}, {"steps", w.Steps}} {
		if n.v < 0 {
			return Options{}, fmt.Errorf("--%s %d: want a positive number (0: the default)", n.name, n.v)
		}
	}
	if f.TargetMB < 0 || f.TargetMB > 1e6 {
		return Options{}, fmt.Errorf("--target-mb %g: want a size between 0 and 10^6 MB", f.TargetMB)
	}
	if _, err := alloc.ParseConfig(f.Config); err != nil {
		return Options{}, errors.New("--config: " + err.Error())
	}
	var capBytes uint64
	if f.Capacity != "" {
		if capBytes, err = units.Parse(f.Capacity); err != nil {
			return Options{}, errors.New("--capacity: " + err.Error())
		}
	}
	if f.Leak != "" {
		if w.Leak, err = units.Parse(f.Leak); err != nil {
			return Options{}, errors.New("--leak: " + err.Error())
		}
	}
	if w.OOMUnwind && f.Capacity == "" {
		return Options{}, errors.New("--oom-unwind needs --capacity (the OOM it unwinds)")
	}
	if _, err := w.Validate(); err != nil {
		return Options{}, err
	}
	return Options{Config: f.Config, Capacity: capBytes, Device: max(f.Device, 0)}, nil
}

// Generate makes the run the flags ask for, with the options Check
// returned: sized to about TargetMB megabytes of the file (written as
// JSON when asJSON, else as a pickle) when given, else as the flags say.
func (f *Flags) Generate(opt Options, asJSON bool) (*snapshot.Snapshot, *Result, error) {
	if f.TargetMB > 0 {
		return GenerateSize(f.Workload, opt, int64(f.TargetMB*1e6), asJSON)
	}
	return Generate(f.Workload, opt)
}
