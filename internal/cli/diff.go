package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/export"
	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

func init() {
	Register(&Command{
		Name:    "diff",
		Summary: "compare two runs: live bytes by category and site, peaks, allocation counts, settings",
		Run:     runDiff,
	})
}

const diffAbout = `
Compares two snapshots (B against A): the bytes live at each run's peak
(--at: peak, reserved-peak, end, eN or a time such as 12.5ms) by memory
category and by allocation site (the innermost --depth user frames),
sorted by the size of the change; each run's Active Memory Timeline peak
("peak active", as info names it) and Active Cached Segment Timeline peak ("peak
reserved") and their change; allocations and bytes allocated over each
trace; the allocator settings that differ. Works across snapshot
generations; --device-a/--device-b pick devices that differ (default each
file's device with the longest trace, on a tie the one with more memory).

--segments prints _memory_viz.py compare's output instead (fixed: it
crashes on every snapshot written since PyTorch 2.0): the addresses of the
segments only in A and only in B, and with -o their blocks as a flamegraph
SVG (or folded stacks with --collapsed).`

// diffSide is one run in the JSON output.
type diffSide struct {
	File                string            `json:"file"`
	Device              int               `json:"device"`
	At                  string            `json:"at"`
	Event               *int              `json:"event"`
	LiveBytes           uint64            `json:"live_bytes"`
	PeakAllocatedBytes  uint64            `json:"peak_allocated_bytes"`
	PeakReservedBytes   uint64            `json:"peak_reserved_bytes"`
	Allocations         int               `json:"allocations"`
	AllocatedTotalBytes uint64            `json:"allocated_total_bytes"`
	Categories          map[string]uint64 `json:"categories"`
}

type diffSite struct {
	Frames     []string `json:"frames"`
	ABytes     uint64   `json:"a_bytes"`
	BBytes     uint64   `json:"b_bytes"`
	DeltaBytes int64    `json:"delta_bytes"`
	AAllocs    int      `json:"a_allocations"`
	BAllocs    int      `json:"b_allocations"`
}

type diffSetting struct {
	Key string `json:"key"`
	A   string `json:"a"`
	B   string `json:"b"`
}

type diffResult struct {
	A               diffSide         `json:"a"`
	B               diffSide         `json:"b"`
	CategoriesDelta map[string]int64 `json:"categories_delta"`
	Sites           []diffSite       `json:"sites"`
	Settings        []diffSetting    `json:"settings"`
}

func runDiff(env *Env, args []string) error {
	fs := newFlagSet(env, "diff", "[--at MOMENT] [--segments] [--json] [--device-a N] [--device-b N] [--demo] A B", diffAbout)
	at := fs.String("at", "peak", "compare at `MOMENT`: peak, reserved-peak, end, eN or a time such as 12.5ms")
	asJSON := fs.Bool("json", false, "print JSON")
	segments := fs.Bool("segments", false, "_memory_viz.py compare: segments only in A / only in B")
	out := fs.String("o", "", "--segments: write the flamegraph SVG to `FILE`")
	collapsed := fs.Bool("collapsed", false, "--segments: write folded stacks instead of SVG")
	da, db := -1, -1
	fs.Var(deviceValue{&da}, "device-a", "device `N` of A")
	fs.Var(deviceValue{&db}, "device-b", "device `N` of B")
	device := deviceFlag(fs, "device of A and B")
	depth := fs.Int("depth", 2, "frames per allocation site (innermost user frames)")
	top := fs.Int("top", 15, "sites to print (text)")
	useDemo := fs.Bool("demo", false, "use the embedded demo for a missing A or B")
	var categories string
	categoriesFlag(fs, &categories)
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	files, err = withDemo(env, fs, files, *useDemo, 2, "want two snapshots A and B")
	if err != nil {
		return err
	}
	if !*segments && (*out != "" || *collapsed) {
		return usageError(fs, env.Stderr, "-o and --collapsed go with --segments (a flamegraph of two runs: gpumem flame diff A B)")
	}
	if err := stdinOnce(env, fs, files); err != nil {
		return err
	}
	if *depth < 1 || *top < 0 {
		return usageError(fs, env.Stderr, "--depth must be at least 1 and --top at least 0")
	}
	if err := analysis.CheckMomentSpec(*at); err != nil { // malformed, before any file is read
		return usageError(fs, env.Stderr, err.Error())
	}
	if da < 0 {
		da = *device
	}
	if db < 0 {
		db = *device
	}
	if *segments {
		return runCompareSegments(env, files, da, db, *out, *collapsed, *asJSON)
	}
	rules, err := loadCategories(categories)
	if err != nil {
		return err
	}
	a, err := liveProfile(env, files[0], da, *at, rules)
	if err != nil {
		return err
	}
	b, err := liveProfile(env, files[1], db, *at, rules)
	if err != nil {
		return err
	}
	r := buildDiff(a, b, *depth)
	return writeStdout(env, func(w io.Writer) error {
		if *asJSON {
			enc := json.NewEncoder(w)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		}
		return writeDiffText(w, r, *top)
	})
}

func buildDiff(a, b *live, depth int) *diffResult {
	r := &diffResult{A: side(a), B: side(b), CategoriesDelta: map[string]int64{}, Sites: []diffSite{}} // [] not null in --json
	for _, n := range diffCategories(r) {
		r.CategoriesDelta[n] = int64(r.B.Categories[n]) - int64(r.A.Categories[n])
	}
	// Sites: live bytes at the moment and allocations over the trace, by
	// the innermost user frames (spelled out: frame ids differ by file).
	sites := map[string]*diffSite{}
	site := func(p *analysis.Profile, smp *analysis.Sample) *diffSite {
		k := p.Key(smp)
		d := sites[k]
		if d == nil {
			d = &diffSite{Frames: p.FrameStrings(smp)}
			sites[k] = d
		}
		return d
	}
	for _, x := range []*live{a, b} {
		p, ap := x.prof.Fold(depth, 0), allocProfile(x).Fold(depth, 0)
		for i := range p.Samples {
			d := site(p, &p.Samples[i])
			*pick(x == b, &d.BBytes, &d.ABytes) += p.Samples[i].Bytes
		}
		for i := range ap.Samples {
			d := site(ap, &ap.Samples[i])
			*pick(x == b, &d.BAllocs, &d.AAllocs) += ap.Samples[i].Count
		}
	}
	for _, d := range sites {
		d.DeltaBytes = int64(d.BBytes) - int64(d.ABytes)
		r.Sites = append(r.Sites, *d)
	}
	slices.SortFunc(r.Sites, func(x, y diffSite) int {
		if c := cmp.Compare(abs(y.DeltaBytes), abs(x.DeltaBytes)); c != 0 {
			return c
		}
		if c := cmp.Compare(y.BBytes+y.ABytes, x.BBytes+x.ABytes); c != 0 {
			return c
		}
		return cmp.Compare(strings.Join(x.Frames, ";"), strings.Join(y.Frames, ";"))
	})
	r.Settings = settingsDiff(a.s, b.s)
	return r
}

// diffCategories lists the categories of both sides in output order.
func diffCategories(r *diffResult) []string {
	both := map[string]uint64{}
	for n, v := range r.A.Categories {
		both[n] += v
	}
	for n, v := range r.B.Categories {
		both[n] += v
	}
	return analysis.CategoryOrder(both)
}

// pick is a when cond holds, else b.
func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// allocProfile is every alloc of the device's trace by stack.
func allocProfile(x *live) *analysis.Profile {
	p := analysis.NewProfile(x.s, x.device)
	for _, e := range x.dv.Events() {
		if e.Action == snapshot.ActionAlloc {
			p.Add(e.Stack, 1, e.Size, analysis.Labels{})
		}
	}
	return p
}

func side(x *live) diffSide {
	active, reserved := replay.Peaks(x.s, x.device)
	sd := diffSide{
		File: x.s.Source.Name, Device: x.device, At: x.m.Spec,
		LiveBytes: x.prof.Bytes, PeakAllocatedBytes: active, PeakReservedBytes: reserved,
		Categories: map[string]uint64{},
	}
	if x.m.Event >= 0 {
		sd.Event = &x.m.Event
	}
	for _, c := range x.dv.Categories() {
		sd.Categories[c.String()] = 0
	}
	for _, smp := range x.prof.Samples {
		sd.Categories[smp.Labels.Category.String()] += smp.Bytes
	}
	for _, e := range x.dv.Events() {
		if e.Action == snapshot.ActionAlloc {
			sd.Allocations++
			sd.AllocatedTotalBytes += e.Size
		}
	}
	return sd
}

// settingsDiff lists the allocator_settings keys whose values differ.
func settingsDiff(a, b *snapshot.Snapshot) []diffSetting {
	vals := func(s *snapshot.Snapshot) map[string]string {
		m := map[string]string{}
		if s.AllocatorSettings == nil {
			return m
		}
		for _, kv := range s.AllocatorSettings.Raw {
			m[kv.Key] = kv.JSON
		}
		return m
	}
	va, vb := vals(a), vals(b)
	out := []diffSetting{}
	if (a.AllocatorSettings == nil) != (b.AllocatorSettings == nil) {
		out = append(out, diffSetting{"allocator_settings", recorded(a), recorded(b)})
	}
	var keys []string
	for k := range va {
		keys = append(keys, k)
	}
	for k := range vb {
		if _, ok := va[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if va[k] != vb[k] && a.AllocatorSettings != nil && b.AllocatorSettings != nil {
			out = append(out, diffSetting{k, orAbsent(va[k]), orAbsent(vb[k])})
		}
	}
	return out
}

func recorded(s *snapshot.Snapshot) string {
	if s.AllocatorSettings == nil {
		return "not recorded (PyTorch before 2.4)"
	}
	return "recorded"
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// writeDiffText prints the diff as text. The tables pad every cell, empty
// last ones too, so lines are trimmed on the way out.
func writeDiffText(w io.Writer, r *diffResult, top int) error {
	var buf bytes.Buffer
	diffText(&buf, r, top)
	for line := range bytes.Lines(buf.Bytes()) {
		if _, err := w.Write(append(bytes.TrimRight(line, " \n"), '\n')); err != nil {
			return err
		}
	}
	return nil
}

// diffText writes the text of writeDiffText (writes to a buffer cannot fail).
func diffText(w *bytes.Buffer, r *diffResult, top int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "A  %s (cuda:%d)\nB  %s (cuda:%d)\n\n", r.A.File, r.A.Device, r.B.File, r.B.Device)
	row := func(name string, a, b uint64) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, units.Human(a), units.Human(b), units.HumanSigned(int64(b)-int64(a)))
	}
	fmt.Fprintf(tw, "\tA\tB\tB - A\t\n")
	row("peak active", r.A.PeakAllocatedBytes, r.B.PeakAllocatedBytes)
	row("peak reserved", r.A.PeakReservedBytes, r.B.PeakReservedBytes)
	row("allocated over the trace", r.A.AllocatedTotalBytes, r.B.AllocatedTotalBytes)
	fmt.Fprintf(tw, "allocations\t%d\t%d\t%+d\t\n", r.A.Allocations, r.B.Allocations, r.B.Allocations-r.A.Allocations)
	at := func(sd diffSide) string {
		if sd.Event != nil {
			return fmt.Sprintf("%s (event %d)", sd.At, *sd.Event)
		}
		return sd.At
	}
	fmt.Fprintf(tw, "\t\t\t\t\n")
	fmt.Fprintf(tw, "live at\t%s\t%s\t\t\n", at(r.A), at(r.B))
	row("live", r.A.LiveBytes, r.B.LiveBytes)
	for _, n := range diffCategories(r) {
		if r.A.Categories[n] != 0 || r.B.Categories[n] != 0 {
			row("  "+n, r.A.Categories[n], r.B.Categories[n])
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "\nsites by change of live bytes (innermost user frames; %d of %d):\n", min(top, len(r.Sites)), len(r.Sites))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  B - A\tA\tB\tallocs A/B\tsite\n")
	for _, s := range r.Sites[:min(top, len(r.Sites))] {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d/%d\t%s\n", units.HumanSigned(s.DeltaBytes), units.Human(s.ABytes), units.Human(s.BBytes), s.AAllocs, s.BAllocs, analysis.SiteString(s.Frames))
	}
	tw.Flush()
	if len(r.Settings) == 0 {
		fmt.Fprintf(w, "\nallocator settings: the same\n")
		return
	}
	fmt.Fprintf(w, "\nallocator settings that differ:\n")
	for _, s := range r.Settings {
		fmt.Fprintf(w, "  %s: %s -> %s\n", s.Key, s.A, s.B)
	}
}

// runCompareSegments is _memory_viz.py compare.
func runCompareSegments(env *Env, files []string, da, db int, out string, collapsed, asJSON bool) error {
	a, err := loadDemoOr(env, files[0])
	if err != nil {
		return err
	}
	b, err := loadDemoOr(env, files[1])
	if err != nil {
		return err
	}
	c := export.CompareSegments(a, da, b, db)
	if out == "" { // with -o only the file is written, as flame -o
		return writeStdout(env, func(w io.Writer) error {
			if asJSON {
				return json.NewEncoder(w).Encode(map[string][]uint64{"only_before": c.OnlyBefore, "only_after": c.OnlyAfter})
			}
			_, err := fmt.Fprintf(w, "only_before = %s\nonly_after = %s\n", pyList(c.OnlyBefore), pyList(c.OnlyAfter))
			return err
		})
	}
	return writeOutput(env, out, func(w io.Writer) error {
		if collapsed {
			return export.WriteFolded(w, c.Flame)
		}
		return export.WriteFlameSVG(w, c.Flame, export.FlameOptions{
			Title:    fmt.Sprintf("segments only in %s / only in %s", baseName(a.Source.Name), baseName(b.Source.Name)),
			Subtitle: fmt.Sprintf("%d only before, %d only after; %s", len(c.OnlyBefore), len(c.OnlyAfter), units.Human(uint64(c.Flame.Root.Value))),
		})
	})
}

// pyList prints addresses as Python prints a list of ints.
func pyList(v []uint64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
