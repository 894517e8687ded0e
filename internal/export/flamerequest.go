package export

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/snapshot"
)

// FlameRequest is gpumem flame's question: the kind of flamegraph
// (memory and segments: the dump's blocks by stack; peak: what is live at
// a moment; diff: what grew between two runs' moments), the device (-1:
// every device for memory and segments, the default device for peak and
// diff), the moment, the SVG's width and which frames to keep.
type FlameRequest struct {
	Kind   string
	Device int
	At     string
	Width  int
	Stacks StackOptions
}

// Snapshots is how many snapshots the kind takes: two for diff, else one.
func (q FlameRequest) Snapshots() int {
	if q.Kind == "diff" {
		return 2
	}
	return 1
}

// Check checks the request before any file is read; the messages name
// the flags.
func (q FlameRequest) Check() error {
	if q.Width < MinFlameWidth {
		return fmt.Errorf("--width must be at least %d pixels", MinFlameWidth)
	}
	if err := analysis.CheckMomentSpec(q.At); err != nil {
		return err
	}
	switch q.Kind {
	case "memory", "segments", "peak", "diff":
		return nil
	}
	return fmt.Errorf("unknown kind %q: want memory, segments, peak or diff", q.Kind)
}

// Make makes the checked request's flamegraph and its titles from the
// snapshots open(0) and, for diff, open(1), opened in turn. A device a
// snapshot lacks is an error, not an empty flamegraph.
func (q FlameRequest) Make(open func(i int) (*snapshot.Snapshot, error)) (*Flame, FlameOptions, error) {
	var (
		f    *Flame
		fo   FlameOptions
		runs [2]analysis.DiffRun
	)
	s, err := open(0)
	if err != nil {
		return nil, fo, err
	}
	switch q.Kind {
	case "memory", "segments":
		if err := alloc.NeedSegments(s, "flame "+q.Kind); err != nil {
			return nil, fo, err
		}
		if _, err := analysis.OneDevice(s, q.Device); err != nil {
			return nil, fo, err
		}
		f, fo = DumpFlame(s, q.Kind, q.Device, q.Stacks)
	case "peak":
		if runs[0], err = analysis.RunOf(s, q.Device, q.At, nil); err != nil {
			return nil, fo, err
		}
		f, fo = ProfileFlame(runs[0].Profile, q.Stacks), PeakFlameTitles(runs[0])
	case "diff":
		if runs[0], err = analysis.RunOf(s, q.Device, q.At, nil); err != nil {
			return nil, fo, err
		}
		if s, err = open(1); err != nil {
			return nil, fo, err
		}
		if runs[1], err = analysis.RunOf(s, q.Device, q.At, nil); err != nil {
			return nil, fo, err
		}
		f, fo = DiffFlame(runs[0].Profile, runs[1].Profile, q.Stacks), DiffFlameTitles(runs[0], runs[1], q.At)
	default:
		return nil, fo, q.Check()
	}
	fo.Width = q.Width
	return f, fo, nil
}
