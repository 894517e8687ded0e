package cli

import (
	"fmt"
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

// maxHTMLWidth is the most pixel columns the viewer's timeline window
// computes (internal/web clamps wider requests to it).
const maxHTMLWidth = 16384

func runHTML(env *Env, args []string) error {
	fs := newFlagSet(env, "html", "[flags] FILE -o OUT.html", help.About("html"))
	out := fs.String("o", "", "output `file` (required)")
	view := fs.String("view", "", "view to embed and open: active|timeline, private, segments, state, settings (default: all)")
	device := deviceFlag(fs, "show device")
	detail := fs.Int("detail", web.DefaultDetail, "most polygons drawn per timeline (largest first; the rest is the grey total band)")
	width := fs.Int("width", 4000, "pixel columns precomputed per timeline")
	useDemo := fs.Bool("demo", false, "use the embedded demo snapshot")
	files, err := parseOneSnapshot(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	if *out == "" {
		return usageError(fs, env.Stderr, "-o OUT.html is required")
	}
	// The page treats 0 as "the default", and the viewer draws at most
	// 16384 columns: anything outside would be silently replaced.
	if *width < 1 || *width > maxHTMLWidth {
		return usageError(fs, env.Stderr, fmt.Sprintf("--width must be between 1 and %d pixel columns, got %d", maxHTMLWidth, *width))
	}
	if *detail < 1 {
		return usageError(fs, env.Stderr, fmt.Sprintf("--detail must be at least 1 polygon, got %d", *detail))
	}
	switch *view {
	case "", "active", "timeline", "private", "segments", "state", "settings":
	default:
		return usageError(fs, env.Stderr, fmt.Sprintf("unknown --view %q (want active, private, segments, state or settings)", *view))
	}
	s, err := loadOne(env, files, *useDemo)
	if err != nil {
		return err
	}
	if _, err := analysis.OneDevice(s, *device); err != nil { // named by the input, not the output file
		return err
	}
	name := "demo"
	if len(files) == 1 {
		name = filepath.Base(files[0])
	}
	return writeOutput(env, *out, func(w io.Writer) error {
		return web.WriteHTML(w, name, s, web.HTMLOptions{View: *view, Device: *device, Detail: *detail, Width: *width})
	})
}
