package estimate

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/units"
)

// GPU is a device and its total memory (as the driver reports it).
type GPU struct {
	Name  string
	Bytes int64
}

// ParseSize reads a byte count such as 512MiB or 1.5GB with the one size
// parser every flag uses (KB, MB, GB mean powers of 1024).
func ParseSize(s string) (int64, error) {
	n, err := units.Parse(s)
	if err != nil {
		return 0, err
	}
	if n > 1<<62 {
		return 0, fmt.Errorf("bad size %q (too large)", s)
	}
	return int64(n), nil
}

// Fits reports whether the estimate's total fits in capacity bytes.
func (r *Result) Fits(capacity int64) bool { return r.TotalBytes <= capacity }

// MaxBatch is the largest per-GPU batch whose total fits in capacity
// bytes, 0 when even a batch of 1 does not. The total grows with the batch,
// so a doubling then bisecting search finds it.
func MaxBatch(o Options, capacity int64) (int, error) {
	fits := func(b int) (bool, error) {
		o.Batch = b
		r, err := Estimate(o)
		if err != nil {
			return false, err
		}
		return r.Fits(capacity), nil
	}
	ok, err := fits(1)
	if err != nil || !ok {
		return 0, err
	}
	lo, hi := 1, 2
	const limit = 1 << 24
	for {
		ok, err := fits(hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo = hi
		if hi >= limit {
			return lo, nil
		}
		hi *= 2
	}
	for hi-lo > 1 { // lo fits, hi does not
		mid := lo + (hi-lo)/2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// VerdictOn says whether the estimated job (o, estimated as res) fits on
// gpu (a GPU's name or a total memory, as ParseGPU reads it), and the
// largest batch that does.
func VerdictOn(o Options, res *Result, gpu string) (*Verdict, error) {
	g, err := ParseGPU(gpu)
	if err != nil {
		return nil, err
	}
	mb, err := MaxBatch(o, g.Bytes)
	if err != nil {
		return nil, err
	}
	return &Verdict{GPU: g, Fits: res.Fits(g.Bytes), MaxBatch: mb}, nil
}
