package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"

	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/loopback"
	"github.com/gpumem/gpumem/internal/web"
	"github.com/gpumem/gpumem/snapshot"
)

func init() {
	Register(&Command{
		Name:    "serve",
		Summary: "open snapshots in the local web viewer (gpumem FILE does the same)",
		Run:     runServe,
	})
}

// serveArgs is serve's command line.
type serveArgs struct {
	addr      string
	noBrowser bool
	demo      bool
	maxUpload int64
	allowHost []string
	files     []string
	rulesPath string // --categories
}

func parseServeArgs(env *Env, args []string) (*serveArgs, error) {
	a := &serveArgs{}
	fs := newFlagSet(env, "serve", "[flags] [--demo] FILE...", help.About("serve"))
	fs.StringVar(&a.addr, "http", "127.0.0.1:0", "`host:port` to listen on (port 0 picks a free port)")
	fs.BoolVar(&a.noBrowser, "no-browser", false, "do not open a browser")
	fs.BoolVar(&a.demo, "demo", false, "also open the embedded demo snapshot")
	maxUpload := fs.String("max-upload", "4GiB", "largest snapshot the page may upload (`size`, e.g. 512MiB)")
	categoriesFlag(fs, &a.rulesPath)
	allowHost := fs.String("allow-host", "", "with -http beyond loopback (0.0.0.0:P, a LAN address): the host `names` clients use, comma-separated (required there)")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	a.files = files
	if a.maxUpload, err = web.ParseMaxUpload(*maxUpload); err != nil {
		return nil, usageError(fs, env.Stderr, "-max-upload: "+err.Error())
	}
	for _, h := range strings.Split(*allowHost, ",") {
		if h = strings.TrimSpace(h); h != "" {
			a.allowHost = append(a.allowHost, h)
		}
	}
	if loopback.Beyond(a.addr) && len(a.allowHost) == 0 {
		return nil, usageError(fs, env.Stderr, fmt.Sprintf("-http %s listens beyond loopback: name the host names clients will use with --allow-host (e.g. --allow-host %s)", a.addr, loopback.ExampleHost()))
	}
	return a, nil
}

func runServe(env *Env, args []string) error {
	a, err := parseServeArgs(env, args)
	if err != nil {
		return err
	}
	files, limit := a.files, a.maxUpload
	if len(files) == 0 && !a.demo {
		return errNoSnapshot
	}
	// Missing files fail here, before a server starts or a browser opens;
	// decoding happens in the background while the page loads.
	for _, path := range files {
		if path != "-" {
			if _, err := checkPath(path); err != nil {
				return err
			}
		}
	}
	rules, err := loadCategories(a.rulesPath)
	if err != nil {
		return err
	}
	srv := web.New(web.Options{
		Categories: rules,
		MaxUpload:  limit,
		AllowHosts: a.allowHost,
		Decode: func(name string, data []byte) (*snapshot.Snapshot, error) {
			return snapshot.DecodeBytes(data, name, &snapshot.Options{MaxBytes: env.maxDecompressed, LimitFlag: "gpumem serve --max-decompressed SIZE", EagerGC: true})
		},
	})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return srv.Launch(ctx, web.Launch{
		Files: files, Demo: a.demo, Addr: a.addr, AllowHosts: a.allowHost, NoBrowser: a.noBrowser,
		Stdout: env.Stdout, Stderr: env.Stderr,
		Open: func(path string, opt *snapshot.Options) (*snapshot.Snapshot, error) {
			s, err := decodePath(env, path, opt)
			if err == nil {
				// The viewer's structures (timelines, curves, the state
				// history, the answers) are as big as the model again:
				// at the default GOGC their garbage let a 1 GB tile's
				// server reach twice its live heap.
				snapshot.HoldEagerGC(s.Source.Size)
				if s.Source.Size > viewerGCMin {
					debug.SetGCPercent(viewerGCPercent)
				}
			}
			return s, err
		},
	})
}

// viewerGCPercent is the collector's GOGC while a viewer shows an input
// over viewerGCMin bytes (the size from which its decode collects
// eagerly). The viewer's heap is nearly all pointer-free columns that a
// collection does not scan (the model, the timeline, the window index,
// the answers), so a cycle costs little whatever the heap's size, while
// each percent of headroom is 18 MB of a 1 GB tile's 1.8 GB server at its
// peak: at the decode's 10 the garbage of the window answers, state steps
// and background builds waiting for a collection was 140-170 MiB of that
// peak (bench/RESULTS-web.md, #32 part 32p).
const viewerGCPercent = 5

// viewerGCMin is the input size from which the viewer sets viewerGCPercent.
// A small heap at GOGC 5 would collect every few hundred kilobytes.
const viewerGCMin = 64 << 20
