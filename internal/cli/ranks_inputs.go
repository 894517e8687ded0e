package cli

import (
	"io"
	"os"

	"github.com/gpumem/gpumem/internal/analysis"
)

// rankOfAny makes the row of one input: a snapshot, a "gpumem info --json"
// summary (so that a cluster's scheduler can reduce each rank's snapshot
// where it lies and one machine merges kilobytes) or a monitor file
// (gpumem record --monitor).
func rankOfAny(env *Env, path string, pos, device int) (analysis.RankRow, error) {
	switch inputKind(path) {
	case analysis.KindSummary:
		f, err := os.Open(path)
		if err != nil {
			return analysis.RankRow{}, prefixError(path, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, analysis.MaxSummary+1))
		if err != nil {
			return analysis.RankRow{}, prefixError(path, err)
		}
		return analysis.RankOfSummary(b, path, pos, device)
	case analysis.KindMonitor:
		s, err := readMonitor(path)
		if err != nil {
			return analysis.RankRow{}, err
		}
		return analysis.RankOfMonitor(s, path, device)
	}
	return rankOf(env, path, pos, device)
}
