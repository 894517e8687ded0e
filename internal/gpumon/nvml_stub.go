//go:build !(linux && cgo)

package gpumon

import (
	"errors"
	"time"
)

// openNVML: go-nvml needs cgo (and NVML is Linux's here), so static builds
// use the nvidia-smi backend.
func openNVML(time.Duration) (Backend, error) {
	return nil, errors.New("NVML: not in this build (static, no cgo); using nvidia-smi")
}
