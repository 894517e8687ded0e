package cli

import (
	"fmt"
	"io"

	"github.com/gpumem/gpumem/internal/alloc"
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
	at := fs.String("at", "peak", "peak, diff: the `MOMENT` (peak, reserved-peak, end, eN, or a time such as 12.5ms)")
	width := fs.Int("width", 1200, "SVG width in `pixels`")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot for the missing one (diff: A and/or B)")
	keepInternal := fs.Bool("keep-internal-frames", false, "keep the allocator's internal C++ frames (caching allocator, stack capture, tensor factories, dispatcher)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(fs, env.Stderr, "want a kind: memory, segments, peak or diff")
	}
	kind, files := pos[0], pos[1:]
	want := 1
	if kind == "diff" {
		want = 2
	}
	files, err = withDemo(env, fs, files, *useDemo, want, fmt.Sprintf("flame %s wants %d snapshot(s)", kind, want))
	if err != nil {
		return err
	}
	if err := stdinOnce(env, fs, files); err != nil {
		return err
	}
	if *width < export.MinFlameWidth {
		return usageError(fs, env.Stderr, fmt.Sprintf("--width must be at least %d pixels", export.MinFlameWidth))
	}
	if err := analysis.CheckMomentSpec(*at); err != nil { // malformed, before any file is read
		return usageError(fs, env.Stderr, err.Error())
	}
	dev := *device
	stacks := export.StackOptions{KeepInternalFrames: *keepInternal}
	var f *export.Flame
	var fo export.FlameOptions
	switch kind {
	case "memory", "segments":
		s, err := loadDemoOr(env, files[0])
		if err != nil {
			return err
		}
		if err := alloc.NeedSegments(s, "flame "+kind); err != nil {
			return err
		}
		if _, err := analysis.OneDevice(s, dev); err != nil { // a device the file lacks is an error, not an empty flamegraph
			return err
		}
		f, fo = export.DumpFlame(s, kind, dev, stacks)
	case "peak":
		lv, err := liveProfile(env, files[0], dev, *at)
		if err != nil {
			return err
		}
		f = export.ProfileFlame(lv.Profile, stacks)
		fo = export.PeakFlameTitles(lv)
	case "diff":
		a, err := liveProfile(env, files[0], dev, *at)
		if err != nil {
			return err
		}
		b, err := liveProfile(env, files[1], dev, *at)
		if err != nil {
			return err
		}
		f = export.DiffFlame(a.Profile, b.Profile, stacks)
		fo = export.DiffFlameTitles(a, b, *at)
	default:
		return usageError(fs, env.Stderr, fmt.Sprintf("unknown kind %q: want memory, segments, peak or diff", kind))
	}
	return writeOutput(env, *out, func(w io.Writer) error {
		switch {
		case *collapsed:
			return export.WriteFolded(w, f)
		case *asJSON:
			return export.WriteFlameJSON(w, f)
		}
		fo.Width = *width
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
	if dev, err = analysis.OneDevice(s, dev); err != nil {
		return analysis.DiffRun{}, err
	}
	dv := analysis.NewDevice(s, dev)
	for _, r := range rules {
		dv.SetUserRules(r) // diff --categories
	}
	return dv.RunAt(spec)
}
