package cli

import (
	"bufio"

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
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 && !*useDemo {
		return usageError(fs, env.Stderr, "no snapshot given")
	}
	snaps, err := LoadArgs(env, files, *useDemo)
	if err != nil {
		return err
	}
	infos := make([]*report.Info, len(snaps))
	for i, s := range snaps {
		if *device >= 0 {
			if _, err := analysis.OneDevice(s, *device); err != nil {
				return err
			}
		}
		infos[i] = report.BuildInfo(s, replay.Peaks)
		infos[i].KeepDevice(*device)
	}
	w := bufio.NewWriter(env.Stdout)
	if *asJSON {
		out := make([]any, len(infos))
		for i, in := range infos {
			out[i] = in
		}
		if err := report.WriteJSONAnswers(w, out); err != nil {
			return err
		}
		return w.Flush()
	}
	for i, in := range infos {
		if i > 0 {
			w.WriteString("\n")
		}
		if err := report.WriteInfo(w, in); err != nil {
			return err
		}
	}
	return w.Flush()
}
