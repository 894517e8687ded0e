package export

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// DumpFlameTitles are the title and subtitle of flame memory or segments
// (kind) of device dev (-1: all) of s.
func DumpFlameTitles(s *snapshot.Snapshot, kind string, dev int, f *Flame) FlameOptions {
	on := "all devices together"
	if dev >= 0 {
		on = fmt.Sprintf("cuda:%d", dev)
	}
	return FlameOptions{
		Title:    fmt.Sprintf("%s: %s by stack at the dump", report.BaseName(s.Source.Name), kind),
		Subtitle: fmt.Sprintf("%s reserved on %s", units.Human(uint64(f.Root.Value)), on),
	}
}

// PeakFlameTitles are the title and subtitle of flame peak.
func PeakFlameTitles(r analysis.DiffRun) FlameOptions {
	d := r.Device
	return FlameOptions{
		Title: fmt.Sprintf("%s: live at %s", report.BaseName(d.S.Source.Name), r.Label()),
		Subtitle: fmt.Sprintf("%s in %d allocations on %s (requested bytes, by category and stack)",
			units.Human(r.Profile.Bytes), r.Profile.Count, d.S.DeviceName(d.Index)),
	}
}

// DiffFlameTitles are the title and subtitle of flame diff of runs a and b
// at the moment spec at.
func DiffFlameTitles(a, b analysis.DiffRun, at string) FlameOptions {
	return FlameOptions{
		Title: fmt.Sprintf("%s → %s: live at %s", report.BaseName(a.Device.S.Source.Name), report.BaseName(b.Device.S.Source.Name), at),
		Subtitle: fmt.Sprintf("widths: B (%s); red grew, blue shrank (A: %s; change %s)", units.Human(b.Profile.Bytes),
			units.Human(a.Profile.Bytes), units.HumanSigned(int64(b.Profile.Bytes)-int64(a.Profile.Bytes))),
	}
}
