package analysis

import (
	"fmt"
	"time"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/snapshot"
)

// BatchAnswer is sim --batch-scale's answer for one device: the trace
// replayed with the allocations that scale with the batch multiplied by
// Scale, beside the same replay at scale 1.
type BatchAnswer struct {
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
	Control BatchOutcome `json:"control"`
	Scaled  BatchOutcome `json:"scaled"`
	// ScaledAllocations of Allocations scale with the batch; their
	// requested bytes before and after.
	ScaledAllocations int    `json:"scaled_allocations"`
	Allocations       int    `json:"allocations"`
	ScaledBytes       uint64 `json:"scaled_bytes_before"`
	ScaledBytesAfter  uint64 `json:"scaled_bytes_after"`
	// Events is the trace's length and Elapsed the scaled replay's time
	// (the text's last line).
	Events  int           `json:"-"`
	Elapsed time.Duration `json:"-"`
}

// BatchOptions are sim --batch-scale's settings.
type BatchOptions struct {
	Scale float64 // the batch multiplier
	// Capacity is the device's memory (0: unlimited, or the recorded OOM's
	// when the trace has one); CapacityOOM insists on the recorded OOM's.
	Capacity    uint64
	CapacityOOM bool
}

// BatchAnswerOf replays device dev of s (read from path) at o.Scale and at
// scale 1.
func BatchAnswerOf(s *snapshot.Snapshot, path string, dev int, o BatchOptions) (*BatchAnswer, error) {
	d := NewDevice(s, dev)
	j := &BatchAnswer{File: path, Device: dev, Scale: o.Scale, Events: len(d.Events())}
	c, oomErr := alloc.ImpliedCapacity(s, dev)
	j.RecordedOOM = oomErr == nil
	switch {
	case o.CapacityOOM && oomErr != nil:
		return nil, fmt.Errorf("%s: --capacity oom: %w", path, oomErr)
	case o.CapacityOOM || oomErr == nil && o.Capacity == 0:
		if oomErr == nil {
			cc := c.Capacity
			j.CapacityBytes, j.CapacitySource = &cc, "recorded_oom"
		}
	case o.Capacity > 0:
		cc := o.Capacity
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
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	start := time.Now() // the scaled replay alone (the categories are made now)
	scaled, err := d.BatchWhatIf([]float64{o.Scale}, devCap)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	j.Elapsed = time.Since(start)
	j.Control, j.Scaled = control[0], scaled[0]
	for i := range d.Active.Len() {
		j.Allocations++
		if BatchDependent(d.CategoryRule(i)) {
			j.ScaledAllocations++
			sz := d.Active.Size(i)
			j.ScaledBytes += sz
			j.ScaledBytesAfter += uint64(float64(sz)*o.Scale + 0.5)
		}
	}
	return j, nil
}
