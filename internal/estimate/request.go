package estimate

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

// Request is one estimate as gpumem estimate asks it: where the model
// comes from (exactly one of ConfigPath, Arch, Params and Demo), the run
// (Options), the GPU to fit it on and the snapshots to calibrate with or
// check against. Run turns it into an Answer.
type Request struct {
	Options
	ConfigPath string // a Hugging Face config.json
	Arch       Arch   // the shape given flag by flag
	Params     string // a parameter count (7B, 6.7e9)
	Demo       bool   // the embedded demo's model (and, for the check, its snapshot)
	BaseModel  bool   // the bare model AutoModel builds (no head)
	QLoRA      bool
	// Set names the flags given, for the presets and contradictions only
	// the command line can see (FlagCombinations).
	Set         map[string]bool
	CUDAContext string // a size; "" keeps Options.CUDAContext
	GPU         string // a GPU name or size: the verdict and the largest batch
	MaxBatch    bool   // only the largest batch is asked for (needs GPU)
	CheckPath   string // a snapshot of the same run to compare with
	Calibration CalibrationFlags
	Device      int // the device measured in the check and calibration snapshots (-1: each one's default)
}

// Answer is what an estimate request answers.
type Answer struct {
	Result  *Result
	Verdict *Verdict // nil without Request.GPU
	Check   *Check   // nil without Request.CheckPath or Demo
}

// UsageError is a mistake in the request itself (a flag's value, or flags
// that do not go together), as opposed to a file that cannot be read or
// measured: the command line answers the one with its usage (exit 2), the
// other with exit 1.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// FileError is an input file that cannot be read, with the file system's
// error (the caller names the path as it names every missing input).
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// Opener opens a snapshot named on the command line and says how answers
// name it; its errors are returned as they are.
type Opener func(path string) (s *snapshot.Snapshot, name string, err error)

func usage(format string, a ...any) error { return &UsageError{fmt.Errorf(format, a...)} }

// Run makes the estimate: it reads the model from its one source, applies
// the calibration, fits it on the GPU and compares it with the check
// snapshot. A mistake in the request is a *UsageError, a config file that
// cannot be read a *FileError; the checks come in the order a user fixes
// them (flags, then the model, then the files measured).
func (q *Request) Run(open Opener) (*Answer, error) {
	o := &q.Options
	if err := FlagCombinations(o, q.Set, q.QLoRA); err != nil {
		return nil, &UsageError{err}
	}
	if q.CUDAContext != "" {
		n, err := ParseSize(q.CUDAContext)
		if err != nil {
			return nil, usage("--cuda-context: %v", err)
		}
		o.CUDAContext = n
	}
	if err := q.model(); err != nil {
		return nil, err
	}
	if q.Calibration.Given() {
		if err := q.Calibration.Validate(); err != nil {
			return nil, &UsageError{err}
		}
		obs, err := q.Calibration.Observations(func(p string) (Measured, error) { return q.measure(p, open) })
		if err != nil {
			return nil, err
		}
		if o.Calibration, err = Calibrate(obs); err != nil {
			return nil, err
		}
	}
	// ParseConfig has checked a config file's model, so what Estimate
	// still rejects comes from the flags.
	res, err := Estimate(*o)
	if err != nil {
		return nil, &UsageError{err}
	}
	a := &Answer{Result: res}
	if q.GPU != "" {
		if a.Verdict, err = VerdictOn(*o, res, q.GPU); err != nil {
			return nil, &UsageError{err}
		}
	} else if q.MaxBatch {
		return nil, usage("--max-batch needs --gpu")
	}
	if q.CheckPath != "" || q.Demo {
		m, err := q.measure(q.CheckPath, open)
		if err != nil {
			return nil, err
		}
		a.Check = Compare(res, m)
	}
	return a, nil
}

// model sets the model from the request's one source.
func (q *Request) model() error {
	o := &q.Options
	sources := 0
	for _, given := range []bool{q.ConfigPath != "", q.Arch.Given(), q.Params != "", q.Demo} {
		if given {
			sources++
		}
	}
	var err error
	switch {
	case sources == 0:
		return usage("no model: give --config, --arch flags (--layers ...) or --params")
	case sources > 1:
		return usage("give only one of --config, --arch flags, --params and --demo")
	case q.ConfigPath != "":
		data, err := ReadConfigFile(q.ConfigPath)
		if err != nil {
			return &FileError{q.ConfigPath, err}
		}
		if o.Model, err = ParseConfig(data); err != nil {
			return fmt.Errorf("%s: %v", q.ConfigPath, err)
		}
	case q.Arch.Given():
		if o.Model, err = q.Arch.Model(); err != nil {
			return &UsageError{err}
		}
	case q.Params != "":
		if o.Params, err = ParseCount(q.Params); err != nil {
			return &UsageError{err}
		}
	case q.Demo:
		DemoOptions(o, q.Set)
	}
	if q.BaseModel {
		if o.Model == nil {
			return usage("--base-model needs the architecture: give --config")
		}
		o.Model = o.Model.Bare()
	}
	return nil
}

// measure measures a --calibrate or --check snapshot ("": the demo's) on
// the request's device.
func (q *Request) measure(path string, open Opener) (Measured, error) {
	var (
		s    *snapshot.Snapshot
		name = "demo"
		err  error
	)
	if path == "" {
		if s, err = demo.Open(); err != nil {
			err = fmt.Errorf("demo: %w", err)
		}
	} else {
		s, name, err = open(path)
	}
	if err != nil {
		return Measured{}, err
	}
	device, err := analysis.OneDevice(s, q.Device)
	if err != nil {
		return Measured{}, err
	}
	m := Measure(s, device)
	m.Source = name
	return m, nil
}
