package export

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

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

// CompareFlameTitles are the title and subtitle of diff --segments's
// flamegraph of the segments only in a / only in b.
func CompareFlameTitles(a, b *snapshot.Snapshot, c *SegmentCompare) FlameOptions {
	return FlameOptions{
		Title:    fmt.Sprintf("segments only in %s / only in %s", report.BaseName(a.Source.Name), report.BaseName(b.Source.Name)),
		Subtitle: fmt.Sprintf("%d only before, %d only after; %s", len(c.OnlyBefore), len(c.OnlyAfter), units.Human(uint64(c.Flame.Root.Value))),
	}
}

// WriteText writes the comparison as _memory_viz.py compare prints it:
// the addresses as Python lists, or as JSON.
func (c *SegmentCompare) WriteText(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(map[string][]uint64{"only_before": c.OnlyBefore, "only_after": c.OnlyAfter})
	}
	_, err := fmt.Fprintf(w, "only_before = %s\nonly_after = %s\n", pyList(c.OnlyBefore), pyList(c.OnlyAfter))
	return err
}

// pyList prints addresses as Python prints a list of ints.
func pyList(v []uint64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// MinFlameWidth is the narrowest SVG flame accepts: room for the margins,
// the title and the controls.
const MinFlameWidth = 200

// DumpFlame is flame memory or segments (kind) of device dev (-1: all)
// of s, with its titles.
func DumpFlame(s *snapshot.Snapshot, kind string, dev int, stacks StackOptions) (*Flame, FlameOptions) {
	var f *Flame
	if kind == "memory" {
		f = MemoryFlame(s, dev, stacks)
	} else {
		f = SegmentsFlame(s, dev, stacks)
	}
	return f, DumpFlameTitles(s, kind, dev, f)
}
