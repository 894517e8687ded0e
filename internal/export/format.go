package export

import (
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// Format is one of gpumem export's formats: Perfetto's Chrome trace JSON,
// the normalised model as JSON, or a pprof profile.
type Format struct {
	Name               string
	Device             int    // -1: every device (pprof: the default device)
	MinSlice           string // perfetto: a size; "": 1 MiB
	KeepInternalFrames bool   // pprof
	minSlice           uint64
}

// Check checks the format's name and options, before any file is read;
// the messages name the flags.
func (f *Format) Check() error {
	switch f.Name {
	case "perfetto":
		if f.MinSlice == "" {
			f.MinSlice = "1MiB"
		}
		n, err := units.Parse(f.MinSlice)
		if err != nil {
			return fmt.Errorf("--min-slice: %v", err)
		}
		f.minSlice = max(n, 1)
	case "json", "pprof":
	default:
		return fmt.Errorf("unknown format %q: want perfetto, json or pprof", f.Name)
	}
	return nil
}

// Writer is what writes s in the checked format; a device s lacks is an
// error, not an empty export.
func (f *Format) Writer(s *snapshot.Snapshot) (func(io.Writer) error, error) {
	dev, err := analysis.OneDevice(s, f.Device)
	if err != nil {
		return nil, err
	}
	switch f.Name {
	case "perfetto":
		return func(w io.Writer) error {
			return WritePerfetto(w, s, PerfettoOptions{Device: f.Device, MinSliceBytes: f.minSlice})
		}, nil
	case "json":
		return func(w io.Writer) error { return WriteJSON(w, s, f.Device) }, nil
	}
	d := analysis.NewDevice(s, dev)
	return func(w io.Writer) error {
		return WritePprof(w, d, PprofOptions{KeepInternalFrames: f.KeepInternalFrames})
	}, nil
}
