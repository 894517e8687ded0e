// Package check evaluates memory budgets on a snapshot's devices — peak,
// reserved, per category, fragmentation, headroom, growth per step and
// increase over a baseline run — and renders the verdicts for CI systems.
package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

// Size is a byte count that a budgets file may write as a number (bytes)
// or as a string with a unit ("12GiB", units.Parse).
type Size uint64

// UnmarshalJSON reads a number of bytes or a size string.
func (s *Size) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		v, err := units.Parse(str)
		if err != nil {
			return err
		}
		*s = Size(v)
		return nil
	}
	var v uint64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("want a size (bytes, or a string such as \"12GiB\"), got %s", b)
	}
	*s = Size(v)
	return nil
}

// MarshalJSON writes the byte count.
func (s Size) MarshalJSON() ([]byte, error) { return strconv.AppendUint(nil, uint64(s), 10), nil }

// Increase is how much a figure may grow over the baseline run: a size,
// or a percentage of the baseline's figure.
type Increase struct {
	Bytes   uint64
	Percent float64
	// IsPercent selects Percent over Bytes.
	IsPercent bool
}

// ParseIncrease reads "5%", "0.5%" or a size ("1GiB").
func ParseIncrease(s string) (Increase, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return Increase{}, fmt.Errorf("bad increase %q (want a size such as 1GiB or a percentage such as 5%%)", s)
		}
		return Increase{Percent: v, IsPercent: true}, nil
	}
	v, err := units.Parse(t)
	if err != nil {
		return Increase{}, fmt.Errorf("bad increase %q (want a size such as 1GiB or a percentage such as 5%%)", s)
	}
	return Increase{Bytes: v}, nil
}

// Limit is the increase allowed over a baseline figure of base bytes.
func (in Increase) Limit(base uint64) float64 {
	if in.IsPercent {
		return float64(base) * in.Percent / 100
	}
	return float64(in.Bytes)
}

// String is the increase as typed.
func (in Increase) String() string {
	if in.IsPercent {
		return strconv.FormatFloat(in.Percent, 'f', -1, 64) + "%"
	}
	return units.Human(in.Bytes)
}

// UnmarshalJSON reads "5%", a size string or a number of bytes.
func (in *Increase) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var str string
		if err := json.Unmarshal(b, &str); err != nil {
			return err
		}
		v, err := ParseIncrease(str)
		if err != nil {
			return err
		}
		*in = v
		return nil
	}
	var v uint64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("want a size or a percentage string such as \"5%%\", got %s", b)
	}
	*in = Increase{Bytes: v}
	return nil
}

// MarshalJSON writes a percentage as "5%", a size as its bytes.
func (in Increase) MarshalJSON() ([]byte, error) {
	if in.IsPercent {
		return json.Marshal(strconv.FormatFloat(in.Percent, 'f', -1, 64) + "%")
	}
	return strconv.AppendUint(nil, in.Bytes, 10), nil
}

// Budgets are the limits one device is held to; a nil or empty field is
// no budget. The JSON names are the budgets file's.
type Budgets struct {
	MaxPeak     *Size `json:"max_peak,omitempty"`
	MaxReserved *Size `json:"max_reserved,omitempty"`
	// MaxCategory maps a category name (analysis.Categories) to its limit
	// at the peak.
	MaxCategory      map[string]Size `json:"max_category,omitempty"`
	MaxFragmentation *float64        `json:"max_fragmentation,omitempty"`
	// MinHeadroom is the least capacity − peak reserved allowed; the
	// capacity is Capacity, or GPU's (analysis.LookupGPU).
	MinHeadroom *Size  `json:"min_headroom,omitempty"`
	GPU         string `json:"gpu,omitempty"`
	Capacity    *Size  `json:"capacity,omitempty"`
	// MaxGrowthPerStep limits steps' growth of live memory per step.
	MaxGrowthPerStep *Size `json:"max_growth_per_step,omitempty"`
	// Baseline is a snapshot of an earlier run; MaxIncrease limits the
	// growth of the peak and of each category at the peak over it.
	Baseline    string    `json:"baseline,omitempty"`
	MaxIncrease *Increase `json:"max_increase,omitempty"`
}

// Empty reports whether b holds no budget at all.
func (b *Budgets) Empty() bool {
	return b.MaxPeak == nil && b.MaxReserved == nil && len(b.MaxCategory) == 0 && b.MaxFragmentation == nil &&
		b.MinHeadroom == nil && b.MaxGrowthPerStep == nil && b.MaxIncrease == nil
}

// Merge overrides b's fields with those o sets; categories merge by name.
func (b *Budgets) Merge(o *Budgets) {
	set := func(dst **Size, src *Size) {
		if src != nil {
			*dst = src
		}
	}
	set(&b.MaxPeak, o.MaxPeak)
	set(&b.MaxReserved, o.MaxReserved)
	set(&b.MinHeadroom, o.MinHeadroom)
	set(&b.Capacity, o.Capacity)
	set(&b.MaxGrowthPerStep, o.MaxGrowthPerStep)
	if len(o.MaxCategory) > 0 {
		m := make(map[string]Size, len(b.MaxCategory)+len(o.MaxCategory))
		for k, v := range b.MaxCategory {
			m[k] = v
		}
		for k, v := range o.MaxCategory {
			m[k] = v
		}
		b.MaxCategory = m
	}
	if o.MaxFragmentation != nil {
		b.MaxFragmentation = o.MaxFragmentation
	}
	if o.GPU != "" {
		b.GPU, b.Capacity = o.GPU, o.Capacity
	}
	if o.Capacity != nil {
		b.GPU = ""
	}
	if o.Baseline != "" {
		b.Baseline = o.Baseline
	}
	if o.MaxIncrease != nil {
		b.MaxIncrease = o.MaxIncrease
	}
}

// Validate checks what no snapshot is needed for: known categories, a
// fragmentation limit in [0, 1], a capacity for the headroom, a baseline
// with its increase.
func (b *Budgets) Validate() error {
	names := categoryNames()
	keys := make([]string, 0, len(b.MaxCategory))
	for k := range b.MaxCategory {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(names, k) {
			return fmt.Errorf("unknown category %q (categories: %s)", k, strings.Join(names, ", "))
		}
	}
	if f := b.MaxFragmentation; f != nil && (*f < 0 || *f > 1 || math.IsNaN(*f)) {
		return fmt.Errorf("max_fragmentation %v: want a fraction from 0 to 1", *f)
	}
	if b.GPU != "" && b.Capacity != nil {
		return errors.New("give the gpu or the capacity, not both")
	}
	if b.GPU != "" {
		if _, err := analysis.LookupGPU(b.GPU); err != nil {
			return err
		}
	}
	if b.MinHeadroom != nil && b.GPU == "" && b.Capacity == nil {
		return errors.New("min_headroom needs the device's capacity: a gpu name or a capacity")
	}
	if (b.Baseline == "") != (b.MaxIncrease == nil) {
		return errors.New("a baseline and max_increase go together")
	}
	return nil
}

// capacity is the device capacity the headroom budget measures against
// (0 when none is given).
func (b *Budgets) capacity() uint64 {
	if b.Capacity != nil {
		return uint64(*b.Capacity)
	}
	if b.GPU != "" {
		if g, err := analysis.LookupGPU(b.GPU); err == nil {
			return g.Bytes
		}
	}
	return 0
}

func categoryNames() []string {
	var out []string
	for _, c := range analysis.Categories() {
		out = append(out, c.String())
	}
	return out
}

// File is a budgets file (--budgets FILE.json): budgets for every device
// of every snapshot, overridden per device number ("devices") and then per
// rank ("ranks", the rank from "rank N" in a file's name, else the file's
// position among the arguments).
type File struct {
	Budgets
	Devices map[string]Budgets `json:"devices,omitempty"`
	Ranks   map[string]Budgets `json:"ranks,omitempty"`
}

// ParseFile reads a budgets file; unknown keys are errors (a typo must not
// silently drop a budget).
func ParseFile(data []byte) (*File, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	f := &File{}
	if err := dec.Decode(f); err != nil {
		return nil, jsonError(data, err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	for _, kind := range []struct {
		name string
		m    map[string]Budgets
	}{{"devices", f.Devices}, {"ranks", f.Ranks}} {
		for k := range kind.m {
			if n, err := strconv.Atoi(k); err != nil || n < 0 {
				return nil, fmt.Errorf("%s: key %q is not a number (0, 1, ...)", kind.name, k)
			}
		}
	}
	// Every combination a device can get must be valid.
	for _, dk := range append([]string{""}, keys(f.Devices)...) {
		for _, rk := range append([]string{""}, keys(f.Ranks)...) {
			b := f.Budgets
			if dk != "" {
				o := f.Devices[dk]
				b.Merge(&o)
			}
			if rk != "" {
				o := f.Ranks[rk]
				b.Merge(&o)
			}
			if err := b.Validate(); err != nil {
				return nil, fmt.Errorf("%s%s", where(dk, rk), err)
			}
		}
	}
	return f, nil
}

func where(dk, rk string) string {
	var s []string
	if dk != "" {
		s = append(s, "devices."+dk)
	}
	if rk != "" {
		s = append(s, "ranks."+rk)
	}
	if len(s) == 0 {
		return ""
	}
	return strings.Join(s, " with ") + ": "
}

func keys(m map[string]Budgets) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// For is the budgets of device dev of the file of rank rank.
func (f *File) For(dev, rank int) Budgets {
	b := f.Budgets
	if o, ok := f.Devices[strconv.Itoa(dev)]; ok {
		b.Merge(&o)
	}
	if o, ok := f.Ranks[strconv.Itoa(rank)]; ok {
		b.Merge(&o)
	}
	return b
}

// jsonError places a syntax or type error: "line L: ...". Errors of a
// value (a bad size) quote the value instead.
func jsonError(data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		off = te.Offset
	}
	if off < 0 {
		return err
	}
	off = min(off, int64(len(data)))
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Errorf("line %d: %v", line, err)
}
