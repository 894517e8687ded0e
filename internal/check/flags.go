package check

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// CategoryLimits is --max-category NAME=SIZE, repeatable (a flag.Value).
type CategoryLimits map[string]Size

func (c CategoryLimits) String() string { return "" }

func (c CategoryLimits) Set(s string) error {
	name, size, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("want NAME=SIZE, e.g. activation=8GiB")
	}
	v, err := units.Parse(size)
	if err != nil {
		return err
	}
	c[strings.TrimSpace(name)] = Size(v)
	return nil
}

// FlagValues are gpumem check's budget flags as typed ("" : not given).
type FlagValues struct {
	MaxPeak, MaxReserved, MinHeadroom, Capacity, MaxGrowthPerStep string
	MaxCategory                                                   CategoryLimits
	MaxFragmentation, GPU, Baseline, MaxIncrease                  string
}

// Budgets reads the flags' values into budgets. It checks each value, and
// with alone (no budgets file to complete them) the flags together too;
// with a file, only what the flags say alone is checked here. Every
// error is a mistake on the command line.
func (v *FlagValues) Budgets(alone bool) (Budgets, error) {
	var b Budgets
	sizes := []string{v.MaxPeak, v.MaxReserved, v.MinHeadroom, v.Capacity, v.MaxGrowthPerStep}
	for i, dst := range []**Size{&b.MaxPeak, &b.MaxReserved, &b.MinHeadroom, &b.Capacity, &b.MaxGrowthPerStep} {
		if sizes[i] == "" {
			continue
		}
		n, err := units.Parse(sizes[i])
		if err != nil {
			return b, err
		}
		sz := Size(n)
		*dst = &sz
	}
	if len(v.MaxCategory) > 0 {
		b.MaxCategory = v.MaxCategory
	}
	if v.MaxFragmentation != "" {
		f, err := strconv.ParseFloat(v.MaxFragmentation, 64)
		if err != nil {
			return b, fmt.Errorf("--max-fragmentation %q: want a fraction from 0 to 1", v.MaxFragmentation)
		}
		b.MaxFragmentation = &f
	}
	b.GPU, b.Baseline = v.GPU, v.Baseline
	if v.MaxIncrease != "" {
		in, err := ParseIncrease(v.MaxIncrease)
		if err != nil {
			return b, err
		}
		b.MaxIncrease = &in
	}
	if alone {
		return b, ValidateFlags(&b)
	}
	// The file may complete the flags (a baseline for --max-increase).
	part := b
	part.MinHeadroom, part.Baseline, part.MaxIncrease = nil, "", nil
	return b, ValidateFlags(&part)
}

// ValidateFlags checks budgets given as gpumem check's flags: Validate,
// with the flags' names in the messages.
func ValidateFlags(b *Budgets) error {
	switch {
	case b.MinHeadroom != nil && b.GPU == "" && b.Capacity == nil:
		return errors.New("--min-headroom needs --gpu NAME or --capacity SIZE")
	case b.GPU != "" && b.Capacity != nil:
		return errors.New("give --gpu or --capacity, not both")
	case b.Baseline != "" && b.MaxIncrease == nil:
		return errors.New("--baseline needs --max-increase SIZE|PCT")
	case b.Baseline == "" && b.MaxIncrease != nil:
		return errors.New("--max-increase needs --baseline OLD")
	}
	if err := b.Validate(); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "max_fragmentation", "--max-fragmentation"))
	}
	return nil
}

// MaxFileBytes bounds what ReadFile reads: a budgets file is a few
// kilobytes, and a snapshot given by mistake must not be read whole.
const MaxFileBytes = 16 << 20

// ReadFile reads the budgets file path from r ("-": standard input); a
// baseline it names relative is relative to the file's directory (to the
// working directory for standard input). Errors start with path.
func ReadFile(r io.Reader, path string) (*File, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than %s, not a budgets file", path, units.Human(MaxFileBytes))
	}
	f, err := ParseFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if path != "-" {
		f.BaselinesFrom(filepath.Dir(path))
	}
	return f, nil
}

// BaselinesFrom makes the baselines the file names relative to dir (the
// file's directory) relative to the working directory.
func (f *File) BaselinesFrom(dir string) {
	rel := func(b *Budgets) {
		if b.Baseline != "" && !filepath.IsAbs(b.Baseline) {
			b.Baseline = filepath.Join(dir, b.Baseline)
		}
	}
	rel(&f.Budgets)
	for _, m := range []map[string]Budgets{f.Devices, f.Ranks} {
		for k, b := range m {
			rel(&b)
			m[k] = b
		}
	}
}
