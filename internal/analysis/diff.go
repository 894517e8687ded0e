package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gpumem/gpumem/internal/replay"
	"github.com/gpumem/gpumem/snapshot"
)

// DiffSide is one run of a Diff: what was live at its moment, its peaks
// and its allocations over the trace.
type DiffSide struct {
	File   string `json:"file"`
	Device int    `json:"device"`
	At     string `json:"at"`
	// Event is the raw trace event of the moment (null: before the trace).
	Event               *int              `json:"event"`
	LiveBytes           uint64            `json:"live_bytes"`
	PeakAllocatedBytes  uint64            `json:"peak_allocated_bytes"`
	PeakReservedBytes   uint64            `json:"peak_reserved_bytes"`
	Allocations         int               `json:"allocations"`
	AllocatedTotalBytes uint64            `json:"allocated_total_bytes"`
	Categories          map[string]uint64 `json:"categories"`
}

// DiffSite is one allocation site (its innermost user frames, spelled out:
// frame ids differ by file) in either run.
type DiffSite struct {
	Frames     []string `json:"frames"`
	ABytes     uint64   `json:"a_bytes"`
	BBytes     uint64   `json:"b_bytes"`
	DeltaBytes int64    `json:"delta_bytes"`
	AAllocs    int      `json:"a_allocations"`
	BAllocs    int      `json:"b_allocations"`
}

// DiffSetting is an allocator_settings key whose value differs.
type DiffSetting struct {
	Key string `json:"key"`
	A   string `json:"a"`
	B   string `json:"b"`
}

// Diff compares two runs (B against A): `gpumem diff`'s answer.
type Diff struct {
	A               DiffSide         `json:"a"`
	B               DiffSide         `json:"b"`
	CategoriesDelta map[string]int64 `json:"categories_delta"`
	// Sites are sorted by the size of the change, largest first.
	Sites    []DiffSite    `json:"sites"`
	Settings []DiffSetting `json:"settings"`
}

// DiffRun is one run to compare: a device and the moment whose live
// allocations are compared.
type DiffRun struct {
	Device *Device
	Moment Moment
	// Profile is Device.LiveProfile(Moment); nil computes it.
	Profile *Profile
}

// RunAt is the device's run at the moment spec (peak, reserved-peak, end,
// eN or a time) with what is live then: what diff and flame peak/diff
// compare. An error names the file.
func (d *Device) RunAt(spec string) (DiffRun, error) {
	m, err := d.Resolve(spec)
	if err != nil {
		return DiffRun{}, fmt.Errorf("%s: %v", d.S.Source.Name, err)
	}
	return DiffRun{Device: d, Moment: m, Profile: d.LiveProfile(m)}, nil
}

// RunOf is RunAt on device dev of s (-1: its DefaultDevice, OneDevice)
// with the user's category rules (nil: none).
func RunOf(s *snapshot.Snapshot, dev int, spec string, rules *UserRules) (DiffRun, error) {
	dev, err := OneDevice(s, dev)
	if err != nil {
		return DiffRun{}, err
	}
	d := NewDevice(s, dev)
	d.SetUserRules(rules)
	return d.RunAt(spec)
}

// Label names the run's moment: its spec, and its event when it has one
// ("peak (event 1234)").
func (r DiffRun) Label() string {
	if r.Moment.Event >= 0 {
		return fmt.Sprintf("%s (event %d)", r.Moment.Spec, r.Moment.Event)
	}
	return r.Moment.Spec
}

// NewDiff compares run b with run a, sites identified by their depth
// innermost user frames.
func NewDiff(a, b DiffRun, depth int) *Diff {
	for _, x := range []*DiffRun{&a, &b} {
		if x.Profile == nil {
			x.Profile = x.Device.LiveProfile(x.Moment)
		}
	}
	r := &Diff{A: diffSide(&a), B: diffSide(&b), CategoriesDelta: map[string]int64{}, Sites: []DiffSite{}} // [] not null in JSON
	for _, n := range DiffCategories(r) {
		r.CategoriesDelta[n] = int64(r.B.Categories[n]) - int64(r.A.Categories[n])
	}
	// Sites: live bytes at the moment and allocations over the trace.
	sites := map[string]*DiffSite{}
	site := func(p *Profile, smp *Sample) *DiffSite {
		k := p.Key(smp)
		d := sites[k]
		if d == nil {
			d = &DiffSite{Frames: p.FrameStrings(smp)}
			sites[k] = d
		}
		return d
	}
	for _, x := range []*DiffRun{&a, &b} {
		isB := x == &b
		p, ap := x.Profile.Fold(depth, 0), allocProfile(x.Device).Fold(depth, 0)
		for i := range p.Samples {
			d := site(p, &p.Samples[i])
			if isB {
				d.BBytes += p.Samples[i].Bytes
			} else {
				d.ABytes += p.Samples[i].Bytes
			}
		}
		for i := range ap.Samples {
			d := site(ap, &ap.Samples[i])
			if isB {
				d.BAllocs += ap.Samples[i].Count
			} else {
				d.AAllocs += ap.Samples[i].Count
			}
		}
	}
	for _, d := range sites {
		d.DeltaBytes = int64(d.BBytes) - int64(d.ABytes)
		r.Sites = append(r.Sites, *d)
	}
	sortDiffSites(r.Sites)
	r.Settings = settingsDiff(a.Device.S, b.Device.S)
	return r
}

// DiffCategories lists the categories of both sides in output order
// (the built-in eight, then the names of --categories rules).
func DiffCategories(r *Diff) []string {
	both := map[string]uint64{}
	for n, v := range r.A.Categories {
		both[n] += v
	}
	for n, v := range r.B.Categories {
		both[n] += v
	}
	return CategoryOrder(both)
}

func absInt(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// allocProfile is every alloc of the device's trace by stack.
func allocProfile(d *Device) *Profile {
	p := NewProfile(d.S, d.Index)
	for _, e := range d.Events() {
		if e.Action == snapshot.ActionAlloc {
			p.Add(e.Stack, 1, e.Size, Labels{})
		}
	}
	return p
}

func diffSide(x *DiffRun) DiffSide {
	active, reserved := replay.Peaks(x.Device.S, x.Device.Index)
	sd := DiffSide{
		File: x.Device.S.Source.Name, Device: x.Device.Index, At: x.Moment.Spec,
		LiveBytes: x.Profile.Bytes, PeakAllocatedBytes: active, PeakReservedBytes: reserved,
		Categories: map[string]uint64{},
	}
	if x.Moment.Event >= 0 {
		ev := x.Moment.Event
		sd.Event = &ev
	}
	for _, c := range x.Device.Categories() {
		sd.Categories[c.String()] = 0
	}
	for _, smp := range x.Profile.Samples {
		sd.Categories[smp.Labels.Category.String()] += smp.Bytes
	}
	for _, e := range x.Device.Events() {
		if e.Action == snapshot.ActionAlloc {
			sd.Allocations++
			sd.AllocatedTotalBytes += e.Size
		}
	}
	return sd
}

// settingsDiff lists the allocator_settings keys whose values differ.
func settingsDiff(a, b *snapshot.Snapshot) []DiffSetting {
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
	out := []DiffSetting{}
	if (a.AllocatorSettings == nil) != (b.AllocatorSettings == nil) {
		out = append(out, DiffSetting{"allocator_settings", recorded(a), recorded(b)})
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
			out = append(out, DiffSetting{k, orAbsent(va[k]), orAbsent(vb[k])})
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

// CategorySiteChanges is how the live bytes of category cat's allocation
// sites changed from run a to run b (at their moments), sorted as
// Diff.Sites; sites that did not change are left out. The runs' Profiles
// must be set.
func CategorySiteChanges(a, b DiffRun, depth int, cat Category) []DiffSite {
	sites := map[string]*DiffSite{}
	for _, x := range []*DiffRun{&a, &b} {
		p := x.Profile.Fold(depth, KeepCategory)
		for i := range p.Samples {
			smp := &p.Samples[i]
			if smp.Labels.Category != cat {
				continue
			}
			k := p.Key(smp)
			d := sites[k]
			if d == nil {
				d = &DiffSite{Frames: p.FrameStrings(smp)}
				sites[k] = d
			}
			if x == &b {
				d.BBytes += smp.Bytes
			} else {
				d.ABytes += smp.Bytes
			}
		}
	}
	out := []DiffSite{}
	for _, d := range sites {
		if d.DeltaBytes = int64(d.BBytes) - int64(d.ABytes); d.DeltaBytes != 0 {
			out = append(out, *d)
		}
	}
	sortDiffSites(out)
	return out
}

// sortDiffSites orders sites by the size of their change, then by their
// bytes in both runs, then by their frames.
func sortDiffSites(s []DiffSite) {
	slices.SortFunc(s, func(x, y DiffSite) int {
		if c := cmp.Compare(absInt(y.DeltaBytes), absInt(x.DeltaBytes)); c != 0 {
			return c
		}
		if c := cmp.Compare(y.BBytes+y.ABytes, x.BBytes+x.ABytes); c != 0 {
			return c
		}
		return cmp.Compare(strings.Join(x.Frames, ";"), strings.Join(y.Frames, ";"))
	})
}
