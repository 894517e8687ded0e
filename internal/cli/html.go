package cli

import (
	"io"
	"path/filepath"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/web"
)

func init() {
	Register(&Command{
		Name:    "html",
		Summary: "write one self-contained HTML viewer page (works offline from file://)",
		Run:     runHTML,
	})
}

func runHTML(env *Env, args []string) error {
	fs := newFlagSet(env, "html", "[flags] FILE -o OUT.html", help.About("html"))
	out := fs.String("o", "", "output `file` (required)")
	var o web.HTMLOptions
	fs.StringVar(&o.View, "view", "", "view to embed and open: active|timeline, private, segments, state, settings (default: all)")
	device := deviceFlag(fs, "show device")
	fs.IntVar(&o.Detail, "detail", web.DefaultDetail, "most polygons drawn per timeline (largest first; the rest is the grey total band)")
	fs.IntVar(&o.Width, "width", 4000, "pixel columns precomputed per timeline")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	files, err := parseOneSnapshot(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	if *out == "" {
		return usageError(fs, env.Stderr, "-o OUT.html is required")
	}
	if err := o.Validate(); err != nil {
		return usageError(fs, env.Stderr, err.Error())
	}
	s, err := loadOne(env, files, *useDemo)
	if err != nil {
		return err
	}
	if _, err := analysis.OneDevice(s, *device); err != nil { // named by the input, not the output file
		return err
	}
	o.Device = *device
	name := "demo"
	if len(files) == 1 {
		name = filepath.Base(files[0])
	}
	return writeOutput(env, *out, func(w io.Writer) error {
		return web.WriteHTML(w, name, s, o)
	})
}
