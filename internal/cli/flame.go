package cli

import (
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/snapshot"
)

func init() {
	Register(&Command{
		Name:    "flame",
		Summary: "flamegraph SVG (or folded stacks) of memory by stack: memory, segments, peak, diff",
		Run:     runFlame,
	})
}

func runFlame(env *Env, args []string) error {
	fs := newFlagSet(env, "flame", "memory|segments|peak|diff [-o OUT.svg] [--collapsed] [--device N] [--at MOMENT] [--demo] FILE [FILE]", help.About("flame"))
	out := fs.String("o", "", "write to `FILE` (default standard output)")
	collapsed := fs.Bool("collapsed", false, "write folded stacks instead of SVG")
	asJSON := fs.Bool("json", false, `write the tree as JSON {"name", "value", "children"} instead of SVG`)
	device := deviceFlag(fs, "memory, segments: only device (default all); peak, diff: device")
	var q export.FlameRequest
	fs.StringVar(&q.At, "at", "peak", "peak, diff: the `MOMENT` (peak, reserved-peak, end, eN, or a time such as 12.5ms)")
	fs.IntVar(&q.Width, "width", 1200, "SVG width in `pixels`")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot for the missing one (diff: A and/or B)")
	fs.BoolVar(&q.Stacks.KeepInternalFrames, "keep-internal-frames", false, "keep the allocator's internal C++ frames (caching allocator, stack capture, tensor factories, dispatcher)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(fs, env.Stderr, "want a kind: memory, segments, peak or diff")
	}
	q.Kind, q.Device = pos[0], *device
	want := q.Snapshots()
	files, err := withDemo(env, fs, pos[1:], *useDemo, want, fmt.Sprintf("flame %s wants %d snapshot(s)", q.Kind, want))
	if err != nil {
		return err
	}
	if err := stdinOnce(env, fs, files); err != nil {
		return err
	}
	if err := q.Check(); err != nil { // malformed, before any file is read
		return usageError(fs, env.Stderr, err.Error())
	}
	f, fo, err := q.Make(func(i int) (*snapshot.Snapshot, error) { return loadDemoOr(env, files[i]) })
	if err != nil {
		return err
	}
	return writeOutput(env, *out, func(w io.Writer) error {
		switch {
		case *collapsed:
			return export.WriteFolded(w, f)
		case *asJSON:
			return export.WriteFlameJSON(w, f)
		}
		return export.WriteFlameSVG(w, f, fo)
	})
}

// demoArg stands for the embedded demo in a file list.
const demoArg = "\x00demo"

// demoName is how answers name path: "demo" for demoArg.
func demoName(path string) string {
	if path == demoArg {
		return "demo"
	}
	return path
}

// loadDemoOr loads path, or the demo for demoArg.
func loadDemoOr(env *Env, path string) (*snapshot.Snapshot, error) {
	if path == demoArg {
		return loadOne(env, nil, true)
	}
	return LoadFile(env, path)
}

// liveProfile loads path and profiles what is live at the moment spec on
// device dev (-1: the snapshot's DefaultDevice).
func liveProfile(env *Env, path string, dev int, spec string, rules ...*analysis.UserRules) (analysis.DiffRun, error) {
	s, err := loadDemoOr(env, path)
	if err != nil {
		return analysis.DiffRun{}, err
	}
	var r *analysis.UserRules // diff --categories
	if n := len(rules); n > 0 {
		r = rules[n-1]
	}
	return analysis.RunOf(s, dev, spec, r)
}
