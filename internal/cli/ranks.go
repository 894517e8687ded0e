package cli

import (
	"fmt"
	"io"
	"sync/atomic"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
)

func init() {
	Register(&Command{
		Name:    "ranks",
		Summary: "one row per rank's snapshot: peaks, time of peak, fragmentation, top site; spread and outlier",
		Run:     runRanks,
	})
}

// ranksInFlight and ranksMaxInFlight count snapshots being decoded or
// analysed at once (read by the test of bounded memory).
var ranksInFlight, ranksMaxInFlight atomic.Int32

func runRanks(env *Env, args []string) error {
	fs := newFlagSet(env, "ranks", "[--json] [-j N] [--device N] FILE...", help.About("ranks"))
	asJSON := fs.Bool("json", false, "print JSON")
	jobs := fs.Int("j", 2, "files decoded at once")
	device := deviceFlag(fs, "device of every file (default each file's DefaultDevice)")
	useDemo := fs.Bool("demo", false, "include the embedded demo snapshot as one rank")
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *useDemo {
		files = append([]string{demoArg}, files...)
	}
	if len(files) == 0 {
		return usageError(fs, env.Stderr, "no snapshot given")
	}
	if err := stdinOnce(env, fs, files); err != nil {
		return err
	}
	if *jobs < 1 {
		return usageError(fs, env.Stderr, "-j wants at least 1")
	}
	rows, errs := analysis.RankRows(files, *jobs, func(i int, f string) (analysis.RankRow, error) {
		n := ranksInFlight.Add(1)
		for m := ranksMaxInFlight.Load(); n > m && !ranksMaxInFlight.CompareAndSwap(m, n); m = ranksMaxInFlight.Load() {
		}
		defer ranksInFlight.Add(-1)
		if ranksWorkerHook != nil {
			ranksWorkerHook(f)
		}
		return rankOfAny(env, f, i, *device)
	})
	if ranksRowsMade != nil {
		ranksRowsMade()
	}
	r, failed, tableErr := analysis.RankTable(rows, errs)
	for _, err := range failed {
		fmt.Fprintf(env.Stderr, "gpumem ranks: %v\n", err)
	}
	if r == nil {
		return tableErr
	}
	for _, w := range report.SameRankWarnings(r.Ranks) {
		fmt.Fprintf(env.Stderr, "gpumem ranks: %s\n", w)
	}
	err = writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			return report.WriteJSON(w, r)
		}
		return report.Ranks(w, r)
	})
	if err == nil {
		err = tableErr
	}
	return err
}

// ranksRowsMade, when set (by a test), is called once every row is made,
// before the table: what is still allocated then is what the rows hold.
var ranksRowsMade func()

// ranksWorkerHook, when set (by tests), runs in each file's worker before
// the file is read: a test makes it panic for one file.
var ranksWorkerHook func(path string)

// rankOf decodes one file and makes its row; the snapshot is garbage once
// it returns.
func rankOf(env *Env, path string, pos, device int) (analysis.RankRow, error) {
	s, err := loadDemoOr(env, path)
	if err != nil {
		return analysis.RankRow{}, err
	}
	dev, err := analysis.OneDevice(s, device)
	if err != nil {
		return analysis.RankRow{}, err
	}
	return analysis.RankOf(s, pos, dev)
}
