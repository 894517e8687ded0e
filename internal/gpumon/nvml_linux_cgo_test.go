//go:build linux && cgo && nvml

package gpumon

import (
	"reflect"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

func busID(s string) (b [32]int8) {
	for i := range s {
		b[i] = int8(s[i])
	}
	return b
}

// TestNVMLAdapter runs the NVML backend on go-nvml's mock: GPU 0 whole
// (an H100 under load, the figures of a real capture), GPU 1 in MIG mode
// with one instance whose process's memory the driver withholds.
func TestNVMLAdapter(t *testing.T) {
	const mib = 1 << 20
	gpu0 := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-a", nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) {
			return nvml.PciInfo{BusId: busID("00000000:00:09.0")}, nvml.SUCCESS
		},
		GetMigModeFunc: func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 81559 * mib, Used: 19818 * mib, Free: 61263 * mib}, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 100, Memory: 11}, nvml.SUCCESS },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 11345, UsedGpuMemory: 15690 * mib}}, nvml.SUCCESS
		},
	}
	migDev := &mock.Device{
		GetUUIDFunc:          func() (string, nvml.Return) { return "MIG-c", nvml.SUCCESS },
		GetNameFunc:          func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 3g.40gb", nvml.SUCCESS },
		GetGpuInstanceIdFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 40448 * mib, Used: 26 * mib, Free: 40423 * mib}, nvml.SUCCESS
		},
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED },
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			return []nvml.ProcessInfo{{Pid: 21198, UsedGpuMemory: ^uint64(0)}}, nvml.SUCCESS
		},
	}
	gpu1 := &mock.Device{
		GetUUIDFunc:    func() (string, nvml.Return) { return "GPU-b", nvml.SUCCESS },
		GetNameFunc:    func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetPciInfoFunc: func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED },
		GetMigModeFunc: func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 81559 * mib, Used: 11125 * mib, Free: 69956 * mib}, nvml.SUCCESS
		},
		GetUtilizationRatesFunc:  func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED },
		GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return 7, nvml.SUCCESS },
		GetMigDeviceHandleByIndexFunc: func(n int) (nvml.Device, nvml.Return) {
			if n == 0 {
				return migDev, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			t.Error("processes asked of a GPU in MIG mode: they would be listed twice")
			return nil, nvml.SUCCESS
		},
	}
	shutdown := 0
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { shutdown++; return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			return []nvml.Device{gpu0, gpu1}[i], nvml.SUCCESS
		},
	}
	b, err := newNVML(lib, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 14, 0, 0, 0, time.UTC)
	s, err := b.poll(now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{
		{Index: 0, UUID: "GPU-a", Name: "NVIDIA H100 80GB HBM3", PCIBusID: "00000000:00:09.0", MIG: -1, Used: 19818 * mib, Free: 61263 * mib, Total: 81559 * mib, Util: 100, MemKnown: true},
		{Index: 1, UUID: "GPU-b", Name: "NVIDIA H100 80GB HBM3", MIG: -1, Used: 11125 * mib, Free: 69956 * mib, Total: 81559 * mib, Util: -1, MemKnown: true},
		{Index: 1, UUID: "MIG-c", Name: "NVIDIA H100 80GB HBM3 MIG 3g.40gb", MIG: 2, Used: 26 * mib, Free: 40423 * mib, Total: 40448 * mib, Util: -1, MemKnown: true},
	}
	if !reflect.DeepEqual(s.Devices, want) {
		t.Errorf("devices\n%+v\nwant\n%+v", s.Devices, want)
	}
	if len(s.Procs) != 2 || s.Procs[0].PID != 11345 || s.Procs[0].Used != 15690*mib || s.Procs[0].UUID != "GPU-a" ||
		s.Procs[1].PID != 21198 || s.Procs[1].Used != -1 || s.Procs[1].UUID != "MIG-c" || s.Procs[1].Device != 1 {
		t.Errorf("processes %+v", s.Procs)
	}
	// The MIG process lands on its instance, not on the parent GPU.
	if k := procDeviceKey(s.Devices, s.Procs[1]); k != "MIG-c" {
		t.Errorf("MIG process attributed to %q", k)
	}
	if err := b.Close(); err != nil || shutdown != 1 {
		t.Errorf("close: %v, %d shutdowns", err, shutdown)
	}

	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	if _, err := newNVML(lib, time.Second); err == nil || err.Error() != "NVML: ERROR_LIBRARY_NOT_FOUND" {
		t.Errorf("no library: %v", err)
	}
}
