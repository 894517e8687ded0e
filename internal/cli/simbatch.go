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
	out := report.Answers{W: env.Stdout, JSON: f.json}
	for _, dev := range devs {
		j, err := analysis.BatchAnswerOf(s, path, dev, analysis.BatchOptions{Scale: f.BatchScale, Capacity: capacity, CapacityOOM: f.CapacityOOM})
		if err != nil {
			return err
		}
		if err := out.Add(j, func(w io.Writer) error { return report.SimBatch(w, filepath.Base(path), j) }); err != nil {
			return err
		}
	}
	return out.Flush()
}
