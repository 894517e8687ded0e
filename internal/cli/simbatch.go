package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/report"
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

func simBatch(env *Env, f *simFlags, files []string, capacity uint64) error {
	s, path, err := loadSimSnapshot(env, f, files)
	if err != nil {
		return err
	}
	devs := alloc.Replayable(s)
	if len(devs) == 0 {
		return fmt.Errorf("%s: no device trace with alloc events to replay (record with torch.cuda.memory._record_memory_history())", path)
	}
	if f.device >= 0 {
		if !slices.Contains(devs, f.device) {
			return fmt.Errorf("%s: device %d has no alloc events to replay (devices with alloc events: %s)", path, f.device, units.List(devs))
		}
		devs = []int{f.device}
	}
	var out []any
	for _, dev := range devs {
		j, err := analysis.BatchAnswerOf(s, path, dev, analysis.BatchOptions{Scale: f.batchScale, Capacity: capacity, CapacityOOM: f.capacityOOM})
		if err != nil {
			return err
		}
		if f.json {
			out = append(out, j)
			continue
		}
		if err := writeSeparated(env.Stdout, len(out) > 0, func(w io.Writer) error {
			out = append(out, nil)
			return report.SimBatch(w, filepath.Base(path), j)
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
