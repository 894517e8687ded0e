package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/steps"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// Status is a budget's verdict.
type Status string

const (
	Pass Status = "pass"
	Fail Status = "fail"
	// Error: the budget could not be measured on this file (e.g. a growth
	// budget on a trace with fewer than three steps). It fails the check:
	// a budget that silently measures nothing guards nothing.
	Error Status = "error"
)

// Unit says what a check's Value and Limit count.
type Unit string

const (
	Bytes    Unit = "bytes"
	Fraction Unit = "fraction"
)

// Site is an allocation site behind a figure: its innermost user frames
// ("file:line:function", innermost first) and its bytes (the growth, for
// the growth and baseline budgets).
type Site struct {
	Frames []string `json:"frames"`
	Bytes  int64    `json:"bytes"`
}

// Check is one budget evaluated on one device of one snapshot.
type Check struct {
	File   string `json:"file"`
	Device int    `json:"device"`
	Rank   int    `json:"rank"`
	// Budget is the budget's name: max_peak, max_reserved, max_category,
	// max_fragmentation, min_headroom, max_growth_per_step or
	// max_increase.
	Budget string `json:"budget"`
	// Subject is what was measured: "peak active", "peak reserved",
	// "activation at the peak", ...
	Subject string `json:"subject"`
	// Category is the category of max_category, and of max_increase per
	// category (empty for the peak).
	Category string `json:"category,omitempty"`
	Status   Status `json:"status"`
	Unit     Unit   `json:"unit"`
	// Value is the figure measured; Limit the budget's bound on it (an
	// upper bound, but a lower one for min_headroom). For max_increase
	// Value is the increase, Baseline the baseline's figure.
	Value    float64  `json:"value"`
	Limit    float64  `json:"limit"`
	Baseline *float64 `json:"baseline_value,omitempty"`
	// Sites are the sites behind the figure, largest first.
	Sites []Site `json:"sites"`
	// Note qualifies the figure (e.g. why a growth counts 0).
	Note string `json:"note,omitempty"`
	// Message is the verdict in one line.
	Message string `json:"message"`
}

// Options tune Evaluate.
type Options struct {
	// Depth is how many user frames identify a site (default analysis.DefaultDepth).
	Depth int
	// Sites is how many sites a check names (default 3).
	Sites int
}

func (o *Options) defaults() {
	if o.Depth <= 0 {
		o.Depth = analysis.DefaultDepth
	}
	if o.Sites <= 0 {
		o.Sites = 3
	}
}

// Target is one device to check.
type Target struct {
	// File names the snapshot in the verdicts.
	File   string
	Rank   int
	Device *analysis.Device
	// Baseline is the baseline run's device when the budgets have one;
	// BaselineFile names it.
	Baseline     *analysis.Device
	BaselineFile string
}

// Evaluate holds the device to each budget of b, in a fixed order: peak,
// reserved, categories (by name), fragmentation, headroom, growth per
// step, increase over the baseline (peak, then categories).
func Evaluate(t Target, b Budgets, o Options) ([]Check, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if b.MaxIncrease != nil && t.Baseline == nil {
		return nil, fmt.Errorf("max_increase needs the baseline run")
	}
	o.defaults()
	d := t.Device
	where := fmt.Sprintf("%s cuda:%d", report.BaseName(t.File), d.Index)
	newCheck := func(budget, subject string, unit Unit, value, limit float64) Check {
		return Check{File: t.File, Device: d.Index, Rank: t.Rank, Budget: budget, Subject: subject, Unit: unit,
			Value: value, Limit: limit, Sites: []Site{}}
	}
	var out []Check
	var atPeak *analysis.Live
	peak := func() *analysis.Live {
		if atPeak == nil {
			m, _ := d.Resolve("peak") // "peak" always resolves
			atPeak = d.LiveAnswer(m, analysis.LiveOptions{Depth: o.Depth})
		}
		return atPeak
	}
	liveSites := func(a *analysis.Live, category string) []Site {
		s := []Site{}
		for _, st := range a.Sites {
			if len(s) == o.Sites {
				break
			}
			if category == "" || st.Category == category {
				s = append(s, Site{st.Frames, int64(st.Bytes)})
			}
		}
		return s
	}
	if b.MaxPeak != nil {
		c := newCheck("max_peak", "peak active", Bytes, float64(d.Active.PeakBytes), float64(*b.MaxPeak))
		c.Sites = liveSites(peak(), "")
		out = append(out, c)
	}
	if b.MaxReserved != nil {
		c := newCheck("max_reserved", "peak reserved", Bytes, float64(d.Segments.PeakBytes), float64(*b.MaxReserved))
		c.Sites = reservedSites(d, o, liveSites)
		out = append(out, c)
	}
	cats := make([]string, 0, len(b.MaxCategory))
	for k := range b.MaxCategory {
		cats = append(cats, k)
	}
	slices.Sort(cats)
	for _, k := range cats {
		a := peak()
		c := newCheck("max_category", k+" at the peak", Bytes, float64(a.Categories[k]), float64(b.MaxCategory[k]))
		c.Category = k
		c.Sites = liveSites(a, k)
		out = append(out, c)
	}
	if b.MaxFragmentation != nil {
		a := peak()
		c := newCheck("max_fragmentation", "fragmentation at the peak", Fraction, a.Fragmentation.Headline, *b.MaxFragmentation)
		c.Sites = liveSites(a, "")
		out = append(out, c)
	}
	if b.MinHeadroom != nil {
		capacity := b.capacity()
		c := newCheck("min_headroom", fmt.Sprintf("headroom (capacity %s - peak reserved)", units.Human(capacity)), Bytes,
			float64(capacity)-float64(d.Segments.PeakBytes), float64(*b.MinHeadroom))
		c.Sites = reservedSites(d, o, liveSites)
		out = append(out, c)
	}
	if b.MaxGrowthPerStep != nil {
		out = append(out, growthCheck(d, o, newCheck("max_growth_per_step", "growth of live memory per step", Bytes, 0, float64(*b.MaxGrowthPerStep))))
	}
	if b.MaxIncrease != nil {
		out = append(out, increaseChecks(t, b, o, newCheck)...)
	}
	for i := range out {
		verdict(&out[i], where, report.BaseName(t.BaselineFile))
	}
	return out, nil
}

// reservedSites are the sites live at the reserved peak, what holds the
// segments then.
func reservedSites(d *analysis.Device, o Options, sites func(*analysis.Live, string) []Site) []Site {
	m, _ := d.Resolve("reserved-peak")
	return sites(d.LiveAnswer(m, analysis.LiveOptions{Depth: o.Depth}), "")
}

func growthCheck(d *analysis.Device, o Options, c Check) Check {
	r, err := steps.Find(d)
	if err != nil {
		c.Status, c.Message = Error, err.Error()
		return c
	}
	if len(r.Steps) < 3 {
		c.Status = Error
		c.Message = fmt.Sprintf("%d step(s) found; the growth per step needs at least 3 (the first is warm-up)", len(r.Steps))
		return c
	}
	// The figure is steps' leak: growth at every step. Memory that grows
	// once (a last step that allocates more, as in a final evaluation)
	// is not a leak, and counts 0.
	if r.Leak {
		c.Value = float64(r.GrowthPerStep)
	} else {
		c.Note = fmt.Sprintf("no leak: live memory does not grow at every step (%s per step on average)", units.HumanSigned(r.GrowthPerStep))
	}
	for _, g := range r.Sites {
		if len(c.Sites) == o.Sites {
			break
		}
		if g.Bytes > 0 {
			c.Sites = append(c.Sites, Site{g.Frames, g.Bytes})
		}
	}
	return c
}

// increaseChecks compare the run with the baseline at each one's peak:
// the peak, then each category either run holds.
func increaseChecks(t Target, b Budgets, o Options, newCheck func(string, string, Unit, float64, float64) Check) []Check {
	pa, _ := t.Baseline.Resolve("peak")
	pb, _ := t.Device.Resolve("peak")
	ra := analysis.DiffRun{Device: t.Baseline, Moment: pa, Profile: t.Baseline.LiveProfile(pa)}
	rb := analysis.DiffRun{Device: t.Device, Moment: pb, Profile: t.Device.LiveProfile(pb)}
	df := analysis.NewDiff(ra, rb, o.Depth)
	grown := func(sites []analysis.DiffSite) []Site {
		out := []Site{}
		for _, s := range sites { // sorted by |change|: the first that grew
			if len(out) == o.Sites {
				break
			}
			if s.DeltaBytes > 0 {
				out = append(out, Site{s.Frames, s.DeltaBytes})
			}
		}
		return out
	}
	in := *b.MaxIncrease
	one := func(subject, category string, a, bv uint64, sites []Site) Check {
		c := newCheck("max_increase", subject, Bytes, float64(bv)-float64(a), in.Limit(a))
		base := float64(a)
		c.Baseline, c.Category, c.Sites = &base, category, sites
		return c
	}
	out := []Check{one("peak active over the baseline", "", df.A.PeakAllocatedBytes, df.B.PeakAllocatedBytes, grown(df.Sites))}
	for _, cat := range analysis.Categories() {
		n := cat.String()
		if df.A.Categories[n] != 0 || df.B.Categories[n] != 0 {
			out = append(out, one(n+" at the peak over the baseline", n, df.A.Categories[n], df.B.Categories[n],
				grown(analysis.CategorySiteChanges(ra, rb, o.Depth, cat))))
		}
	}
	return out
}

// verdict sets the status (unless an error set it) and the message line.
func verdict(c *Check, where, baseline string) {
	if c.Status == Error {
		c.Message = fmt.Sprintf("%s: %s: cannot be checked: %s", where, c.Subject, c.Message)
		return
	}
	lower := c.Budget == "min_headroom"
	held := c.Value <= c.Limit
	if lower {
		held = c.Value >= c.Limit
	}
	c.Status = Pass
	if !held {
		c.Status = Fail
	}
	rel := map[[2]bool]string{{false, true}: "within", {false, false}: "over", {true, true}: "at least", {true, false}: "under"}[[2]bool{lower, held}]
	vs, ls := c.fmt(c.Value, c.signed()), c.fmt(c.Limit, false)
	if strings.TrimPrefix(vs, "+") == ls && c.Value != c.Limit { // rounding hides the difference: exact figures
		vs, ls = c.exact(c.Value, c.signed()), c.exact(c.Limit, false)
	}
	msg := fmt.Sprintf("%s: %s %s, %s the %s budget %s", where, c.Subject, vs, rel, c.Budget, ls)
	if c.Note != "" {
		msg += " (" + c.Note + ")"
	}
	if c.Baseline != nil {
		msg += fmt.Sprintf(" (baseline %s %s)", baseline, units.Human(uint64(*c.Baseline)))
	}
	if !held && len(c.Sites) > 0 {
		what := "top site"
		if c.Budget == "max_increase" || c.Budget == "max_growth_per_step" {
			what = "grew most"
		}
		s := c.Sites[0]
		size := units.Human(uint64(max(s.Bytes, 0)))
		if what == "grew most" {
			size = units.HumanSigned(s.Bytes)
		}
		msg += fmt.Sprintf("; %s: %s %s", what, size, analysis.SiteString(s.Frames))
	}
	c.Message = msg
}

// fmt formats a figure of the check's unit; a change (signed) with its
// sign.
func (c *Check) fmt(v float64, signed bool) string {
	switch {
	case c.Unit == Fraction:
		return fmt.Sprintf("%.3f", v)
	case signed || v < 0:
		return units.HumanSigned(int64(v))
	}
	return units.Human(uint64(v))
}

// signed: the value is a change (growth, increase).
func (c *Check) signed() bool { return c.Budget == "max_increase" || c.Budget == "max_growth_per_step" }

// exact formats v in full: bytes as a count, fractions with every digit.
func (c *Check) exact(v float64, signed bool) string {
	if c.Unit == Fraction {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	s := strconv.FormatFloat(v, 'f', 0, 64) + " B"
	if signed && v > 0 {
		s = "+" + s
	}
	return s
}

// EvaluateFiles checks each snapshot in turn, names[pos] read with
// open(pos): every device of it with data, or only device (>= 0), against
// the budgets file's budgets for the device and rank (bf) overridden by
// the flags' (fb). Baselines are read with openBaseline, once each.
func EvaluateFiles(names []string, open func(pos int) (*snapshot.Snapshot, error), openBaseline func(path string) (*snapshot.Snapshot, error),
	device int, bf *File, fb *Budgets, o Options) ([]Check, error) {
	baselines := map[string]*snapshot.Snapshot{}
	load := func(path string) (*snapshot.Snapshot, error) {
		if baselines[path] == nil {
			bs, err := openBaseline(path)
			if err != nil {
				return nil, fmt.Errorf("baseline: %w", err)
			}
			baselines[path] = bs
		}
		return baselines[path], nil
	}
	var out []Check
	for pos, name := range names {
		s, err := open(pos)
		if err != nil {
			return nil, err
		}
		devs, err := analysis.AnswerDevices(s, s.Source.Name, device)
		if err != nil {
			return nil, err
		}
		if len(devs) == 0 {
			return nil, fmt.Errorf("%s: the snapshot holds no segments and no trace events: nothing to check", name)
		}
		cs, err := EvaluateSnapshot(name, analysis.RankFromNames(pos, name), s, devs, bf, fb, o, load)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	return out, nil
}

// EvaluateSnapshot checks devices devs of s (file name, rank rank): each
// against the file's budgets for it (bf), overridden by the flags' (fb);
// a baseline is read with load (which may keep it for the next device or
// file) and compared at the same device, else at its DefaultDevice.
func EvaluateSnapshot(name string, rank int, s *snapshot.Snapshot, devs []int, bf *File, fb *Budgets, o Options,
	load func(path string) (*snapshot.Snapshot, error)) ([]Check, error) {
	var out []Check
	for _, dev := range devs {
		b := bf.For(dev, rank)
		b.Merge(fb)
		t := Target{File: name, Rank: rank, Device: analysis.NewDevice(s, dev)}
		if b.Baseline != "" {
			bs, err := load(b.Baseline)
			if err != nil {
				return nil, err
			}
			bdev := dev
			if !slices.Contains(bs.Devices(), dev) {
				bdev = bs.DefaultDevice()
			}
			t.Baseline, t.BaselineFile = analysis.NewDevice(bs, bdev), b.Baseline
		}
		cs, err := Evaluate(t, b, o)
		if err != nil {
			return nil, fmt.Errorf("%s device %d: %v", name, dev, err)
		}
		out = append(out, cs...)
	}
	return out, nil
}
