package cli

import (
	"bufio"
	"io"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "info",
		Summary: "what a snapshot holds: format, devices, pools, trace, settings, warnings",
		Run:     runInfo,
	})
}

func runInfo(env *Env, args []string) error {
	fs := newFlagSet(env, "info", "[--json] [--device N] [--demo] FILE...", help.About("info"))
	asJSON := fs.Bool("json", false, "print JSON")
	device := deviceFlag(fs, "describe only device")
	useDemo := fs.Bool("demo", false, "include the embedded demo snapshot")
	files, err := parseSnapshots(env, fs, args, useDemo)
	if err != nil {
		return err
	}
	env.noVersions = true // its answers do not read address versions
	snaps, err := LoadArgs(env, files, *useDemo)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(env.Stdout)
	out := report.Answers{W: w, JSON: *asJSON}
	for _, s := range snaps {
		if *device >= 0 {
			if _, err := analysis.OneDevice(s, *device); err != nil {
				return err
			}
		}
		in := report.BuildInfo(s, replay.Peaks)
		in.KeepDevice(*device)
		if err := out.Add(in, func(w io.Writer) error { return report.WriteInfo(w, in) }); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return w.Flush()
}
