//go:build !(linux && cgo && nvml)

package gpumon

import (
	"errors"
	"time"
)

// openNVML: NVML is read through go-nvml, which needs cgo and Linux and is
// built only with -tags nvml (see nvml_linux_cgo.go); this build uses the
// nvidia-smi backend.
func openNVML(time.Duration) (Backend, error) {
	return nil, errors.New("NVML: not in this build (built without -tags nvml); using nvidia-smi")
}
