package gpumon

import (
	"math"
	"strconv"
	"time"
)

// Demo is a simulated two-GPU data-parallel training job, for
// "gpumem watch --demo" and for tests of everything above the backend: each
// rank holds 18 GiB of weights and optimizer state, its activations grow
// through a 2-second step's forward pass and are freed in backward, and
// every fifth step rank 1 takes a 6 GiB spike (a long batch). Values are a
// function of the time since the start, so a run is reproducible.
type Demo struct {
	Interval time.Duration
	start    time.Time
	next     time.Time
}

// NewDemo starts the simulation now.
func NewDemo(interval time.Duration) *Demo {
	now := time.Now()
	return &Demo{Interval: interval, start: now, next: now}
}

const (
	demoTotal = 80 << 30
	demoBase  = 18 << 30
	demoStep  = 2 * time.Second
)

// DemoUsed is the simulated used memory of rank gpu at elapsed time t.
func DemoUsed(gpu int, t time.Duration) uint64 {
	step := int(t / demoStep)
	phase := float64(t%demoStep) / float64(demoStep)
	act := 24.0 * math.Sin(math.Pi*phase) // GiB of activations, up in forward, down in backward
	if gpu == 1 && step%5 == 4 {
		act += 6 * math.Sin(math.Pi*phase)
	}
	// The CUDA context and the caching allocator's rounding add a little.
	return demoBase + uint64(act*(1<<30)) + uint64(gpu)*(512<<20)
}

// Name implements Backend.
func (d *Demo) Name() string { return "demo" }

// Sample implements Backend, waiting for the next tick.
func (d *Demo) Sample() (Sample, error) {
	if wait := time.Until(d.next); wait > 0 {
		time.Sleep(wait)
	}
	now := time.Now()
	d.next = d.next.Add(d.Interval)
	t := now.Sub(d.start)
	s := Sample{Time: now}
	for gpu := 0; gpu < 2; gpu++ {
		used := DemoUsed(gpu, t)
		uuid := "GPU-00000000-0000-0000-0000-00000000000" + strconv.Itoa(gpu)
		util := 90 + int(5*math.Sin(float64(t)/float64(time.Second)+float64(gpu)))
		s.Devices = append(s.Devices, Device{Index: gpu, UUID: uuid, Name: "Demo GPU 80GB", PCIBusID: "00000000:0" + strconv.Itoa(gpu+1) + ":00.0",
			MIG: -1, Used: used, Free: demoTotal - used, Total: demoTotal, Util: util, MemKnown: true})
		// The process holds all but the CUDA context (about 500 MiB).
		s.Procs = append(s.Procs, Process{Device: gpu, UUID: uuid, PID: 4100 + gpu, Command: "python train.py --rank " + strconv.Itoa(gpu), Used: int64(used) - 500<<20})
	}
	return s, nil
}

// Close implements Backend.
func (d *Demo) Close() error { return nil }
