package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

// checkBatchScale checks --batch-scale against the flags it excludes.
func (f *simFlags) checkBatchScale() error {
	switch {
	case f.batchScale == 0:
		return nil
	case !(f.batchScale > 0) || f.batchScale > 1000:
		return fmt.Errorf("--batch-scale %g: want a number above 0 (and at most 1000), e.g. 0.5", f.batchScale)
	case f.script != "":
		return fmt.Errorf("--batch-scale replays a snapshot, not a script")
	case f.sweep || f.config != "" || f.fraction > 0:
		return fmt.Errorf("--batch-scale replays under the recorded settings: it does not combine with --sweep, --config or --fraction")
	}
	return nil
}

// batchJSON is sim --batch-scale's answer for one device.
type batchJSON struct {
	File   string  `json:"file"`
	Device int     `json:"device"`
	Scale  float64 `json:"scale"`
	// CapacityBytes is the device the replays ran on (null: unlimited);
	// CapacitySource says where it came from (recorded_oom, given).
	CapacityBytes  *uint64 `json:"capacity_bytes"`
	CapacitySource string  `json:"capacity_source"`
	// RecordedOOM: the trace records an out-of-memory.
	RecordedOOM bool `json:"recorded_oom"`
	// Control is the same replay at scale 1: the recorded run as the model
	// replays it from empty (its OOM reproduced or not).
	Control analysis.BatchOutcome `json:"control"`
	Scaled  analysis.BatchOutcome `json:"scaled"`
	// ScaledAllocations of Allocations scale with the batch; their
	// requested bytes before and after.
	ScaledAllocations int    `json:"scaled_allocations"`
	Allocations       int    `json:"allocations"`
	ScaledBytes       uint64 `json:"scaled_bytes_before"`
	ScaledBytesAfter  uint64 `json:"scaled_bytes_after"`
}

func simBatch(env *Env, f *simFlags, files []string, capacity uint64) error {
	s, err := loadOne(env, files, f.demo)
	if err != nil {
		return err
	}
	path := "demo"
	if len(files) == 1 {
		path = files[0]
	}
	devs := alloc.Replayable(s)
	if len(devs) == 0 {
		return fmt.Errorf("%s: no device trace with alloc events to replay (record with torch.cuda.memory._record_memory_history())", path)
	}
	if f.device >= 0 {
		if !slices.Contains(devs, f.device) {
			return fmt.Errorf("%s: device %d has no alloc events to replay (devices with alloc events: %s)", path, f.device, joinInts(devs))
		}
		devs = []int{f.device}
	}
	var out []any
	for _, dev := range devs {
		start := time.Now()
		d := analysis.NewDevice(s, dev)
		j := batchJSON{File: path, Device: dev, Scale: f.batchScale}
		c, oomErr := alloc.ImpliedCapacity(s, dev)
		j.RecordedOOM = oomErr == nil
		switch {
		case f.capacityOOM && oomErr != nil:
			return fmt.Errorf("%s: --capacity oom: %w", path, oomErr)
		case f.capacityOOM || oomErr == nil && capacity == 0:
			if oomErr == nil {
				cc := c.Capacity
				j.CapacityBytes, j.CapacitySource = &cc, "recorded_oom"
			}
		case capacity > 0:
			cc := capacity
			j.CapacityBytes, j.CapacitySource = &cc, "given"
		default:
			j.CapacitySource = "unlimited"
		}
		var devCap uint64
		if j.CapacityBytes != nil {
			devCap = *j.CapacityBytes
		}
		control, err := d.BatchWhatIf([]float64{1}, devCap)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		start = time.Now() // the scaled replay alone (the categories are made now)
		scaled, err := d.BatchWhatIf([]float64{f.batchScale}, devCap)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		elapsed := time.Since(start)
		j.Control, j.Scaled = control[0], scaled[0]
		for i := range d.Active.Items {
			j.Allocations++
			if analysis.BatchDependent(d.CategoryRule(i)) {
				j.ScaledAllocations++
				sz := d.Active.Items[i].Size
				j.ScaledBytes += sz
				j.ScaledBytesAfter += uint64(float64(sz)*f.batchScale + 0.5)
			}
		}
		if f.json {
			out = append(out, j)
			continue
		}
		if err := writeSeparated(env.Stdout, len(out) > 0, func(w io.Writer) error {
			out = append(out, nil)
			return writeBatchText(w, filepath.Base(path), &j, len(d.Events()), elapsed)
		}); err != nil {
			return err
		}
	}
	if !f.json {
		return nil
	}
	if len(out) == 1 {
		return writeJSON(env.Stdout, out[0])
	}
	return writeJSON(env.Stdout, out)
}

func writeBatchText(w io.Writer, name string, j *batchJSON, events int, elapsed time.Duration) error {
	capText := "unlimited"
	if j.CapacityBytes != nil {
		capText = units.Human(*j.CapacityBytes)
		if j.CapacitySource == "recorded_oom" {
			capText += " (what the recorded OOM implies: reserved + CUDA free)"
		}
	}
	oomText := func(b analysis.BatchOutcome) string {
		switch {
		case b.AvoidsOOM:
			return "every request fits"
		case b.RecordedOOM:
			return fmt.Sprintf("the recorded OOM still happens (%s)", failCount(b.OOMs))
		default:
			return failCount(b.OOMs)
		}
	}
	fmt.Fprintf(w, "%s device %d: batch ×%g replayed (recorded settings, from an empty allocator)\n", name, j.Device, j.Scale)
	fmt.Fprintf(w, "  capacity            %s\n", capText)
	fmt.Fprintf(w, "  scaled              %d of %d allocations (activations, temporaries and autograd buffers of the passes, inputs): %s → %s requested in all\n",
		j.ScaledAllocations, j.Allocations, units.Human(j.ScaledBytes), units.Human(j.ScaledBytesAfter))
	fmt.Fprintf(w, "  ×1 (the recording)  peak allocated %s, peak reserved %s; %s\n", units.Human(j.Control.PeakAllocatedBytes), units.Human(j.Control.PeakReservedBytes), oomText(j.Control))
	fmt.Fprintf(w, "  ×%-17g peak allocated %s, peak reserved %s; %s\n", j.Scale, units.Human(j.Scaled.PeakAllocatedBytes), units.Human(j.Scaled.PeakReservedBytes), oomText(j.Scaled))
	switch {
	case j.RecordedOOM && j.Control.AvoidsOOM:
		fmt.Fprintf(w, "  the model, started empty, does not reproduce the recorded OOM at ×1: the what-if proves nothing about it\n")
	case j.RecordedOOM && j.Scaled.AvoidsOOM:
		fmt.Fprintf(w, "  at ×%g the run gets past the recorded OOM (the trace ends there: later steps are not replayed)\n", j.Scale)
	case j.RecordedOOM:
		fmt.Fprintf(w, "  at ×%g the recorded OOM still happens\n", j.Scale)
	}
	_, err := fmt.Fprintf(w, "  the ×%g replay: %d trace events in %.3fs (%.1f M events/s)\n", j.Scale, events, elapsed.Seconds(), float64(events)/elapsed.Seconds()/1e6)
	return err
}

func failCount(n int) string {
	if n == 1 {
		return "1 request fails"
	}
	return fmt.Sprintf("%d requests fail", n)
}
