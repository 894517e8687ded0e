package alloc

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// SimRequest is gpumem sim's question as its flags give it, before it is
// run: Validate checks the values and reads --capacity, with the flags'
// names in its messages.
type SimRequest struct {
	Script     string  // a script file ("-": standard input); "" replays a snapshot
	Config     string  // PYTORCH_CUDA_ALLOC_CONF syntax; "" or "default": PyTorch's defaults
	Capacity   string  // a size, "oom" (what the recorded OOM implies), or "" (unlimited)
	Fraction   float64 // per-process memory fraction of Capacity
	Sweep      bool
	BatchScale float64 // 0: no batch what-if
	Curve      int     // buckets of the reserved curves (SimOptions.Curve); 0: none

	// Set by Validate from Capacity.
	CapacityBytes uint64
	CapacityOOM   bool
}

// Validate checks the request's values and how they combine.
func (r *SimRequest) Validate() error {
	r.CapacityOOM, r.CapacityBytes = r.Capacity == "oom", 0
	if r.Capacity != "" && !r.CapacityOOM {
		c, err := units.Parse(r.Capacity)
		if err != nil {
			return errors.New("--capacity: " + err.Error())
		}
		r.CapacityBytes = c
	}
	if r.Fraction < 0 || r.Fraction > 1 {
		return fmt.Errorf("--fraction must be in [0, 1], got %g", r.Fraction)
	}
	if r.Fraction > 0 && r.Capacity == "" {
		return errors.New("--fraction needs --capacity")
	}
	if _, err := ConfigOrDefault(r.Config); err != nil {
		return errors.New("--config: " + err.Error())
	}
	switch {
	case r.Curve < 0 || r.Curve > MaxCurve:
		return fmt.Errorf("--curve %d: want a number of buckets from 1 to %d", r.Curve, MaxCurve)
	case r.Curve > 0 && (r.Script != "" || r.BatchScale != 0):
		return errors.New("--curve draws a snapshot's replay: it does not combine with --script or --batch-scale")
	}
	switch {
	case r.BatchScale == 0:
		return nil
	case !(r.BatchScale > 0) || r.BatchScale > 1000:
		return fmt.Errorf("--batch-scale %g: want a number above 0 (and at most 1000), e.g. 0.5", r.BatchScale)
	case r.Script != "":
		return fmt.Errorf("--batch-scale replays a snapshot, not a script")
	case r.Sweep || r.Config != "" || r.Fraction > 0:
		return fmt.Errorf("--batch-scale replays under the recorded settings: it does not combine with --sweep, --config or --fraction")
	}
	return nil
}

// Options is the replay of a snapshot the request asks for, on device
// (-1: every device with alloc events); fromEmptySet tells whether
// fromEmpty was given at all (a sweep chooses by itself otherwise).
func (r *SimRequest) Options(device int, fromEmpty, fromEmptySet bool) (SimOptions, error) {
	o := SimOptions{Device: device, Capacity: r.CapacityBytes, CapacityOOM: r.CapacityOOM, Sweep: r.Sweep,
		FromEmpty: fromEmpty, FromEmptySet: fromEmptySet, Curve: r.Curve}
	if r.Config != "" {
		c, err := ConfigOrDefault(r.Config)
		if err != nil {
			return o, err
		}
		if r.Fraction > 0 {
			c.MemoryFraction = r.Fraction
		}
		o.Config = &c
	}
	return o, nil
}

// ConfigOrDefault parses allocator settings; "" and "default" are
// PyTorch's defaults.
func ConfigOrDefault(s string) (Config, error) {
	if s == "" || s == "default" {
		return DefaultConfig(), nil
	}
	return ParseConfig(s)
}

// ReplayDevices is the devices of s with alloc events to replay, or only
// device (-1: all); path names the snapshot in the errors.
func ReplayDevices(s *snapshot.Snapshot, path string, device int) ([]int, error) {
	devs := Replayable(s)
	if len(devs) == 0 {
		return nil, fmt.Errorf("%s: no device trace with alloc events to replay (record with torch.cuda.memory._record_memory_history())", path)
	}
	if device >= 0 {
		if !slices.Contains(devs, device) {
			return nil, fmt.Errorf("%s: device %d has no alloc events to replay (devices with alloc events: %s)", path, device, units.List(devs))
		}
		devs = []int{device}
	}
	return devs, nil
}
