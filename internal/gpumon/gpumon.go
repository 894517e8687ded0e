// Package gpumon samples NVIDIA GPU memory from outside the training process
// (NVML or nvidia-smi) and turns the samples into per-interval peaks, a JSONL
// log and Prometheus metrics.
package gpumon

import (
	"errors"
	"time"
)

// Device is one GPU (or one MIG instance of a GPU) at one instant. Memory is
// in bytes as the driver reports it (framebuffer used/free/total).
type Device struct {
	Index int    `json:"gpu"`            // the driver's device index (nvidia-smi's "index")
	UUID  string `json:"uuid,omitempty"` // GPU-… or MIG-…
	Name  string `json:"name,omitempty"`
	// PCIBusID is the device's bus id ("00000000:18:00.0").
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// MIG is the GPU instance id of a MIG device, -1 for a whole GPU.
	MIG   int    `json:"mig"`
	Used  uint64 `json:"used"`
	Free  uint64 `json:"free"`
	Total uint64 `json:"total"`
	// Util is the GPU utilisation in percent over the driver's last
	// sample period, -1 where the driver gives none (MIG, [N/A]).
	Util int `json:"util"`
	// MemKnown is false when the driver reported no memory figures (a GPU
	// in MIG mode without MIG access gives [N/A]); Used/Free/Total are 0.
	MemKnown bool `json:"-"`
}

// Process is one process holding memory on a device.
type Process struct {
	Device  int    `json:"gpu"`            // Device.Index
	UUID    string `json:"uuid,omitempty"` // the device's UUID, to tell MIG instances apart
	PID     int    `json:"pid"`
	Command string `json:"cmd"`
	// Used is the process's device memory in bytes, -1 where the driver
	// does not say (MIG without privileges, Windows WDDM: [N/A]).
	Used int64 `json:"used"`
}

// Sample is what one poll of every device returns.
type Sample struct {
	Time    time.Time
	Devices []Device
	Procs   []Process
}

// Backend reads samples from a driver. Sample blocks until the next sample
// is due (one interval after the previous one) and returns it.
type Backend interface {
	// Name says which backend answers: "nvml", "nvidia-smi", "demo".
	Name() string
	Sample() (Sample, error)
	Close() error
}

// ErrNoDriver is what Open returns when neither NVML nor nvidia-smi can
// be used; its text is the one line gpumem prints.
var ErrNoDriver = errors.New("no NVIDIA driver found (NVML and nvidia-smi unavailable)")

// Open returns the first backend that works: NVML (builds with -tags nvml),
// then an nvidia-smi stream sampling every interval. Both failing gives
// ErrNoDriver, with the reasons kept for --verbose callers in Reasons.
func Open(interval time.Duration) (Backend, error) {
	var reasons []error
	b, err := openNVML(interval)
	if err == nil {
		return b, nil
	}
	reasons = append(reasons, err)
	s, err := OpenSMI("nvidia-smi", interval)
	if err == nil {
		return s, nil
	}
	reasons = append(reasons, err)
	return nil, &NoDriverError{Reasons: reasons}
}

// NoDriverError is ErrNoDriver with what each backend said.
type NoDriverError struct{ Reasons []error }

func (e *NoDriverError) Error() string { return ErrNoDriver.Error() }

// Is makes errors.Is(err, ErrNoDriver) true.
func (e *NoDriverError) Is(target error) bool { return target == ErrNoDriver }
