package cli

import (
	"io"
	"os"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/monitor"
	"github.com/gpumem/gpumem/internal/report"
)

// inputKind tells from the first bytes of path what it holds
// (analysis.InputKind); standard input and unreadable paths are left to
// the snapshot loader, which says what is wrong with them.
func inputKind(path string) int {
	if path == "-" || path == demoArg {
		return analysis.KindSnapshot
	}
	f, err := os.Open(path)
	if err != nil {
		return analysis.KindSnapshot
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, _ := io.ReadFull(f, buf)
	return analysis.InputKind(buf[:n])
}

// readMonitor reads one monitor file.
func readMonitor(path string) (*monitor.Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, prefixError(path, err)
	}
	defer f.Close()
	return monitor.Read(f, path)
}

// runMonitorSteps is "gpumem steps FILE.jsonl": one row per report, the
// interval peaks and the reports whose peak jumps.
func runMonitorSteps(env *Env, path string, asJSON bool) error {
	s, err := readMonitor(path)
	if err != nil {
		return err
	}
	return writeStdout(env, func(w io.Writer) error {
		if asJSON {
			return report.WriteJSON(w, s)
		}
		return report.MonitorSteps(w, s)
	})
}
