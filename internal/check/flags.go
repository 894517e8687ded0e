package check

import (
	"errors"
	"path/filepath"
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
