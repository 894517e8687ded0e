//go:build linux && cgo && nvml

// The NVML backend is built only with -tags nvml: go-nvml's cgo compile of
// NVIDIA's nvml.h prints dozens of -Wdeprecated-declarations warnings and
// takes most of a first build, so the default build (and every release
// binary, which is static) reads the GPUs through nvidia-smi instead. See
// docs/watch.md, "Building with NVML".

package gpumon

import (
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// nvmlBackend reads devices through NVML, which go-nvml loads with dlopen
// at Init: the binary builds and starts without a driver and Init fails
// cleanly (ERROR_LIBRARY_NOT_FOUND) where there is none.
type nvmlBackend struct {
	lib      nvml.Interface
	devs     []nvmlDev
	interval time.Duration
	next     time.Time
}

type nvmlDev struct {
	h    nvml.Device
	info Device // identity: index, UUID, name, bus id, MIG instance
	// migParent marks a GPU in MIG mode: its processes are listed under
	// its MIG devices, not twice.
	migParent bool
}

func openNVML(interval time.Duration) (Backend, error) {
	return newNVML(nvml.New(), interval)
}

// newNVML initialises lib (the real library, or go-nvml's mock in tests)
// and lists its devices and MIG instances.
func newNVML(lib nvml.Interface, interval time.Duration) (*nvmlBackend, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: %v", ret)
	}
	fail := func(format string, args ...any) (*nvmlBackend, error) {
		lib.Shutdown()
		return nil, fmt.Errorf("NVML: "+format, args...)
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fail("device count: %v", ret)
	}
	if n == 0 {
		return fail("no GPUs")
	}
	b := &nvmlBackend{lib: lib, interval: interval, next: time.Now()}
	for i := 0; i < n; i++ {
		h, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return fail("device %d: %v", i, ret)
		}
		d := Device{Index: i, MIG: -1}
		d.UUID, _ = h.GetUUID()
		d.Name, _ = h.GetName()
		if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
			d.PCIBusID = cString(pci.BusId[:])
		}
		// A GPU in MIG mode: its memory and processes are per instance,
		// so each MIG device is listed too (as dcgm-exporter does).
		cur, _, ret := h.GetMigMode()
		mig := ret == nvml.SUCCESS && cur == nvml.DEVICE_MIG_ENABLE
		b.devs = append(b.devs, nvmlDev{h: h, info: d, migParent: mig})
		if !mig {
			continue
		}
		nmig, _ := h.GetMaxMigDeviceCount()
		for j := 0; j < nmig; j++ {
			mh, ret := h.GetMigDeviceHandleByIndex(j)
			if ret != nvml.SUCCESS {
				continue // an empty slot
			}
			md := Device{Index: i, PCIBusID: d.PCIBusID, MIG: -1}
			md.UUID, _ = mh.GetUUID()
			md.Name, _ = mh.GetName()
			if gi, ret := mh.GetGpuInstanceId(); ret == nvml.SUCCESS {
				md.MIG = gi
			}
			b.devs = append(b.devs, nvmlDev{h: mh, info: md})
		}
	}
	return b, nil
}

func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

func (b *nvmlBackend) Name() string { return "nvml" }

// Sample waits for the next tick, then polls every device.
func (b *nvmlBackend) Sample() (Sample, error) {
	if wait := time.Until(b.next); wait > 0 {
		time.Sleep(wait)
	}
	b.next = b.next.Add(b.interval)
	if late := time.Since(b.next); late > 0 {
		b.next = b.next.Add(late.Truncate(b.interval) + b.interval) // skip ticks missed while the host was busy
	}
	return b.poll(time.Now())
}

func (b *nvmlBackend) poll(now time.Time) (Sample, error) {
	s := Sample{Time: now}
	for _, nd := range b.devs {
		d := nd.info
		d.Util = -1
		if m, ret := nd.h.GetMemoryInfo(); ret == nvml.SUCCESS {
			d.Total, d.Free, d.Used, d.MemKnown = m.Total, m.Free, m.Used, true
		} else if ret == nvml.ERROR_GPU_IS_LOST {
			return Sample{}, fmt.Errorf("NVML: GPU %d: %v", d.Index, ret)
		}
		if u, ret := nd.h.GetUtilizationRates(); ret == nvml.SUCCESS {
			d.Util = int(u.Gpu)
		}
		s.Devices = append(s.Devices, d)
		if nd.migParent {
			continue
		}
		procs, ret := nd.h.GetComputeRunningProcesses()
		if ret != nvml.SUCCESS {
			continue
		}
		for _, p := range procs {
			used := int64(p.UsedGpuMemory)
			// NVML_VALUE_NOT_AVAILABLE (all ones) where the driver
			// withholds the figure (MIG without privileges, WDDM).
			if p.UsedGpuMemory == ^uint64(0) {
				used = -1
			}
			s.Procs = append(s.Procs, Process{Device: d.Index, UUID: d.UUID, PID: int(p.Pid), Used: used,
				Command: processCommand(int(p.Pid), fmt.Sprintf("pid %d", p.Pid))})
		}
	}
	return s, nil
}

func (b *nvmlBackend) Close() error {
	if ret := b.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML: %v", ret)
	}
	return nil
}
