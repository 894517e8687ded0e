package analysis

import (
	"github.com/gpumem/gpumem/snapshot"
)

// At locates a moment in the JSON answers.
type At struct {
	// Spec is the moment as asked (peak, reserved-peak, end, eN, a time).
	Spec string `json:"spec"`
	// Event is the raw trace event index (-1: before the trace).
	Event int `json:"event"`
	// TimeUS is the event's time_us, null when the trace has none.
	TimeUS *int64 `json:"time_us"`
	// Timestep is memory_viz's x coordinate on the Active Memory Timeline.
	Timestep int `json:"timestep"`
}

// Site is one allocation site: the live allocations that share their
// innermost user frames and category.
type Site struct {
	// Frames are "file:line:name", innermost first (empty: no stack).
	Frames   []string `json:"frames"`
	Count    int      `json:"count"`
	Bytes    uint64   `json:"bytes"`
	Category string   `json:"category"`
	// CategoryReason is the rule that set Category and its evidence
	// (docs/categories.md); a site's allocations share it.
	CategoryReason string `json:"category_reason"`
	// Share is Bytes / the live bytes.
	Share float64 `json:"share"`
	// Items are the allocations' indices in the Active Memory Timeline
	// (its element ids), with LiveOptions.Items only.
	Items []int32 `json:"items,omitempty"`
}

// SizeClass counts live allocations in one size range [Min, Max).
type SizeClass struct {
	Name  string `json:"name"`
	Min   uint64 `json:"min_bytes"`
	Max   uint64 `json:"max_bytes"` // 0: no upper bound
	Count int    `json:"count"`
	Bytes uint64 `json:"bytes"`
}

// sizeClasses are the ranges peak groups by: the allocator's small pool,
// then decades.
var sizeClasses = []SizeClass{
	{Name: "< 1 MiB (small pool)", Max: 1 << 20},
	{Name: "1 MiB - 10 MiB", Min: 1 << 20, Max: 10 << 20},
	{Name: "10 MiB - 100 MiB", Min: 10 << 20, Max: 100 << 20},
	{Name: "100 MiB - 1 GiB", Min: 100 << 20, Max: 1 << 30},
	{Name: ">= 1 GiB", Min: 1 << 30},
}

// Live is the answer to "what is live at this moment" for one device.
type Live struct {
	File   string `json:"file"`
	Device int    `json:"device"`
	At     At     `json:"at"`
	// PeakAllocatedBytes is the Active Memory Timeline's peak (info's
	// active_timeline_peak_bytes); PeakReservedBytes the Active Cached
	// Segment Timeline's (info's segment_timeline_peak_bytes).
	PeakAllocatedBytes uint64 `json:"peak_allocated_bytes"`
	PeakReservedBytes  uint64 `json:"peak_reserved_bytes"`
	// LiveBytes and LiveCount: requested bytes and number of the
	// allocations live at the moment (the timeline's height there).
	LiveBytes uint64 `json:"live_bytes"`
	LiveCount int    `json:"live_count"`
	// Categories has every category name with its live bytes.
	Categories map[string]uint64 `json:"categories"`
	// CategoryReason is where the categories come from when not from
	// gpumem's classification ("from torch.profiler"; omitted otherwise).
	CategoryReason string `json:"category_reason,omitempty"`
	// NoSegments says why the reserved peak and fragmentation are not
	// known (a torch.profiler output records no segments; omitted for a
	// snapshot).
	NoSegments    string        `json:"no_segments,omitempty"`
	Sites         []Site        `json:"sites"`
	SitesOmitted  int           `json:"sites_omitted"`
	SizeClasses   []SizeClass   `json:"size_classes"`
	Fragmentation Fragmentation `json:"fragmentation"`

	// BatchWhatIf, when a capacity is given (peak --capacity), is the
	// trace replayed with its batch-dependent allocations scaled.
	BatchWhatIf []BatchOutcome `json:"batch_whatif,omitempty"`
	// BatchCapacity is the capacity the batch what-if ran at.
	BatchCapacity uint64 `json:"batch_capacity_bytes,omitempty"`

	// Profile is the live allocations folded by site (not in JSON).
	Profile *Profile `json:"-"`
	// batchBytes are the live bytes that scale with the batch.
	batchBytes uint64
}

// The answers' defaults, the CLI's and the viewer's alike: user frames
// that identify a site, and sites listed (peak, oom); diff's site depth.
const (
	DefaultDepth     = 3
	DefaultTop       = 20
	DefaultDiffDepth = 2
)

// LiveOptions tune LiveAnswer.
type LiveOptions struct {
	// Depth is how many user frames identify a site (default DefaultDepth).
	Depth int
	// Top caps the sites listed (0: all).
	Top int
	// Items lists each site's allocations (Site.Items), for the viewer.
	Items bool
}

// PeakOptions are gpumem peak's question: the moment (a MomentSpec), the
// sites, and a capacity (0: none) to replay the batch what-if against.
type PeakOptions struct {
	At string
	LiveOptions
	Capacity uint64
}

// PeakAnswer answers `gpumem peak` for the device: what is live at the
// moment o.At and, with a capacity, the batch what-if against it.
func (d *Device) PeakAnswer(o PeakOptions) (*Live, error) {
	m, err := d.Resolve(o.At)
	if err != nil {
		return nil, err
	}
	a := d.LiveAnswer(m, o.LiveOptions)
	if o.Capacity > 0 {
		if a.BatchWhatIf, err = d.BatchWhatIf(BatchScales, o.Capacity); err != nil {
			return nil, err
		}
		a.BatchCapacity = o.Capacity
	}
	return a, nil
}

// LiveAnswer answers `gpumem peak` for moment m of the device.
func (d *Device) LiveAnswer(m Moment, o LiveOptions) *Live {
	if o.Depth <= 0 {
		o.Depth = DefaultDepth
	}
	a := &Live{
		Device:             d.Index,
		At:                 atOf(m),
		PeakAllocatedBytes: d.Active.PeakBytes,
		PeakReservedBytes:  d.Segments.PeakBytes,
		Categories:         map[string]uint64{},
		CategoryReason:     d.CategorySource(),
		NoSegments:         d.S.Unavailable("segments"),
		SizeClasses:        append([]SizeClass(nil), sizeClasses...),
	}
	full := d.LiveProfile(m)
	a.LiveBytes, a.LiveCount = full.Bytes, full.Count
	var cats Totals
	for _, smp := range full.Samples {
		cats[smp.Labels.Category] += smp.Bytes
	}
	for _, c := range d.Categories() {
		a.Categories[c.String()] = cats[c]
	}
	d.Active.Live(m.Action, func(i int) {
		sz := d.Active.Size(i)
		if BatchDependent(d.CategoryRule(i)) {
			a.batchBytes += sz
		}
		for k := range a.SizeClasses {
			c := &a.SizeClasses[k]
			if sz >= c.Min && (c.Max == 0 || sz < c.Max) {
				c.Count++
				c.Bytes += sz
				break
			}
		}
	})
	a.Profile = full.Fold(o.Depth, KeepCategory)
	a.Profile.Sort()
	a.Sites = sitesOf(a.Profile, o.Top, d.RuleReason)
	a.SitesOmitted = len(a.Profile.Samples) - len(a.Sites)
	if o.Items {
		d.siteItems(m, a.Profile, a.Sites, o.Depth)
	}
	a.Fragmentation = d.FragmentationAt(m)
	return a
}

// siteItems fills in the allocations of each listed site: those live at
// m whose folded frames and category are the site's.
func (d *Device) siteItems(m Moment, p *Profile, sites []Site, depth int) {
	type key struct {
		frames string
		cat    Category
		rule   Rule
	}
	index := map[key]int{}
	for i := range sites {
		smp := &p.Samples[i]
		index[key{p.Key(smp), smp.Labels.Category, smp.Labels.Rule}] = i
	}
	// Many allocations share a stack: its folded frames are worked out
	// once (per allocation, they took 2 s of the 1 GB tile's 3.4 s answer).
	folded := map[snapshot.StackID]string{}
	d.Active.Live(m.Action, func(i int) {
		st := d.itemStack(i)
		frames, ok := folded[st]
		if !ok {
			smp := Sample{Frames: TopFrames(d.S, d.S.StackFrames(st), depth)}
			frames = p.Key(&smp)
			folded[st] = frames
		}
		if k, ok := index[key{frames, d.Category(i), d.EffectiveRule(i)}]; ok {
			sites[k].Items = append(sites[k].Items, int32(i))
		}
	})
}

// sitesOf lists the first top samples of a sorted profile as sites.
func sitesOf(p *Profile, top int, reason func(Rule) string) []Site {
	n := len(p.Samples)
	if top > 0 && top < n {
		n = top
	}
	out := make([]Site, 0, n)
	for i := 0; i < n; i++ {
		smp := &p.Samples[i]
		st := Site{Frames: p.FrameStrings(smp), Count: smp.Count, Bytes: smp.Bytes, Category: smp.Labels.Category.String(),
			CategoryReason: reason(smp.Labels.Rule)}
		if p.Bytes > 0 {
			st.Share = float64(smp.Bytes) / float64(p.Bytes)
		}
		out = append(out, st)
	}
	return out
}

func atOf(m Moment) At {
	a := At{Spec: m.Spec, Event: m.Event, Timestep: m.Timestep}
	if m.HasTime {
		t := m.TimeUS
		a.TimeUS = &t
	}
	return a
}

// TraceStartUS is the first time_us of the device's trace (ok false when
// it has none), for printing moments relative to the start.
func (d *Device) TraceStartUS() (int64, bool) {
	t0, _, ok := timeSpan(d.Events())
	return t0, ok
}

// eventsOf is a small helper for the OOM code: the events of an action.
func eventsOf(ev []snapshot.Event, a snapshot.Action) []int {
	var out []int
	for i := range ev {
		if ev[i].Action == a {
			out = append(out, i)
		}
	}
	return out
}
