package cli

import (
	"io"
	"path/filepath"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/report"
)

func simBatch(env *Env, f *simFlags, files []string, capacity uint64) error {
	s, path, err := loadSimSnapshot(env, f, files)
	if err != nil {
		return err
	}
	devs, err := alloc.ReplayDevices(s, path, f.device)
	if err != nil {
		return err
	}
	var out []any
	for _, dev := range devs {
		j, err := analysis.BatchAnswerOf(s, path, dev, analysis.BatchOptions{Scale: f.BatchScale, Capacity: capacity, CapacityOOM: f.CapacityOOM})
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
	return report.WriteJSONAnswers(env.Stdout, out)
}
