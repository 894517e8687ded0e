package analysis

import (
	"fmt"
	"sort"
	"strings"
)

// GPU is one entry of the table --gpu reads.
type GPU struct {
	Name string
	// Bytes is the total memory the driver reports (nvidia-smi
	// memory.total, cudaMemGetInfo's total), not the marketing size.
	Bytes uint64
}

const mib = 1 << 20

// GPUs are common training GPUs with the total memory their drivers
// report.
var GPUs = []GPU{
	{"A100-40GB", 40960 * mib},
	{"A100-80GB", 81920 * mib},
	{"A10G", 23028 * mib},
	{"A6000", 49140 * mib},
	{"H100-80GB", 81559 * mib},
	{"H200", 143771 * mib},
	{"L4", 23034 * mib},
	{"L40S", 46068 * mib},
	{"RTX3090", 24576 * mib},
	{"RTX4090", 24564 * mib},
	{"T4", 15360 * mib},
	{"V100-16GB", 16160 * mib},
}

// LookupGPU finds a GPU by name, ignoring case, spaces, dashes and a
// leading "NVIDIA"; "H100" finds H100-80GB. A name that begins several
// is an *AmbiguousGPUError naming them ("A100": A100-40GB, A100-80GB);
// an unknown name is an error listing the known ones.
func LookupGPU(name string) (GPU, error) {
	norm := func(s string) string {
		s = strings.ToLower(s)
		s = strings.TrimPrefix(s, "nvidia")
		return strings.NewReplacer(" ", "", "-", "", "_", "").Replace(s)
	}
	want := norm(name)
	var prefix []GPU
	for _, g := range GPUs {
		n := norm(g.Name)
		if n == want {
			return g, nil
		}
		if strings.HasPrefix(n, want) && want != "" {
			prefix = append(prefix, g)
		}
	}
	if len(prefix) == 1 {
		return prefix[0], nil
	}
	if len(prefix) > 1 {
		a := &AmbiguousGPUError{Name: name}
		for _, g := range prefix {
			a.Candidates = append(a.Candidates, g.Name)
		}
		return GPU{}, a
	}
	names := make([]string, len(GPUs))
	for i, g := range GPUs {
		names[i] = g.Name
	}
	sort.Strings(names)
	return GPU{}, fmt.Errorf("unknown GPU %q; known: %s (or give --capacity SIZE)", name, strings.Join(names, ", "))
}

// AmbiguousGPUError is a --gpu name that begins more than one GPU's.
type AmbiguousGPUError struct {
	Name       string
	Candidates []string
}

func (e *AmbiguousGPUError) Error() string {
	return fmt.Sprintf("%s is ambiguous: %s", e.Name, strings.Join(e.Candidates, ", "))
}
