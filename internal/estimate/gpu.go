package estimate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// GPU is a device's usable memory as nvidia-smi reports its total.
type GPU struct {
	Name  string
	Bytes int64
}

// gpus are total memories in MiB as nvidia-smi prints them ("81559MiB" on
// an H100 SXM 80GB): a card sold as 80 GB holds a little less than 80 GiB.
var gpus = map[string]int64{
	"h100":      81559,
	"h100-80gb": 81559,
	"h100-94gb": 95830,
	"h200":      143771,
	"a100":      81920,
	"a100-80gb": 81920,
	"a100-40gb": 40960,
	"l40s":      46068,
	"l4":        23034,
	"a10g":      23028,
	"a6000":     49140,
	"rtx4090":   24564,
	"rtx3090":   24576,
	"v100":      16384,
	"v100-16gb": 16384,
	"v100-32gb": 32768,
	"t4":        15360,
}

// GPUNames lists the device names ParseGPU knows.
func GPUNames() []string {
	names := make([]string, 0, len(gpus))
	for n := range gpus {
		names = append(names, strings.ToUpper(n))
	}
	sort.Strings(names)
	return names
}

// ParseGPU reads a device name (H100, A100-40GB) or a size (80GiB, 24GB =
// 24 GiB, 16000MiB, or plain bytes).
func ParseGPU(s string) (GPU, error) {
	key := strings.ToLower(strings.TrimSpace(s))
	if mib, ok := gpus[key]; ok {
		return GPU{Name: strings.ToUpper(key), Bytes: mib << 20}, nil
	}
	b, err := ParseSize(key)
	if err != nil || b == 0 {
		return GPU{}, fmt.Errorf("--gpu %q: not a known GPU (%s) or a size such as 80GiB", s, strings.Join(GPUNames(), ", "))
	}
	return GPU{Name: s, Bytes: b}, nil
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
