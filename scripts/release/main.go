// Command release builds gpumem's release files into a folder: called by
// scripts/release.sh, which works out the commit and its date from git.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gpumem/gpumem/internal/release"
)

func main() {
	ver := flag.String("version", "", "release version, canonical PEP 440 (1.2.3, 1.2.3rc1)")
	commit := flag.String("commit", "", "commit hash the release is built from")
	epoch := flag.Int64("date", 0, "the commit's time, Unix seconds (the build date and every file's mtime)")
	dist := flag.String("dist", "dist", "output folder")
	root := flag.String("root", ".", "the module's root")
	only := flag.String("targets", "", "comma-separated GOOS/GOARCH subset of the release targets (default all)")
	flag.Parse()
	if err := run(*ver, *commit, *epoch, *dist, *root, *only); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(ver, commit string, epoch int64, dist, root, only string) error {
	if commit == "" || epoch <= 0 || flag.NArg() > 0 {
		return fmt.Errorf("usage: release -version V -commit HASH -date UNIXSECONDS [-dist DIR] [-targets os/arch,...]")
	}
	targets := release.Targets
	if only != "" {
		targets = nil
		for _, s := range strings.Split(only, ",") {
			goos, goarch, _ := strings.Cut(s, "/")
			t, ok := release.LookupTarget(goos, goarch)
			if !ok {
				return fmt.Errorf("%q is not a release target", s)
			}
			targets = append(targets, t)
		}
	}
	return release.Release(context.Background(), release.Options{
		Root:    root,
		Dist:    dist,
		Stamp:   release.Stamp{Version: ver, Commit: commit, Date: time.Unix(epoch, 0).UTC()},
		Targets: targets,
		Log:     os.Stdout,
	})
}
