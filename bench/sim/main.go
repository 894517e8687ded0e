// Command sim times the allocator simulator on snapshot files: decoding
// (snapshot.Open) apart from the replay, the validation replay of every
// device (events per second, best of -runs), and a sweep.
package main

import (
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/gpumem/gpumem/internal/alloc"
	"github.com/gpumem/gpumem/snapshot"
)

func main() {
	runs := flag.Int("runs", 3, "replays per device; the best is reported")
	sweep := flag.Bool("sweep", true, "also time a sweep")
	cpu := flag.String("cpuprofile", "", "write a CPU profile of the replays")
	flag.Parse()
	for _, p := range flag.Args() {
		if err := bench(p, *runs, *sweep, *cpu); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// cpuTime is the process's user+system CPU time: on a shared machine it
// measures the work better than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func bench(path string, runs int, sweep bool, cpu string) error {
	t0, c0 := time.Now(), cpuTime()
	s, err := snapshot.Open(path, nil)
	if err != nil {
		return err
	}
	fmt.Printf("%s: decode %.2f s wall, %.2f s CPU\n", path, time.Since(t0).Seconds(), (cpuTime() - c0).Seconds())
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, d := range alloc.Replayable(s) {
		best, bestCPU := time.Duration(1<<62), time.Duration(1<<62)
		var r *alloc.ReplayResult
		for i := 0; i < runs; i++ {
			runtime.GC()
			t, c := time.Now(), cpuTime()
			r, err = alloc.Simulate(s, d, alloc.ReplayOptions{})
			if err != nil {
				return err
			}
			best, bestCPU = min(best, time.Since(t)), min(bestCPU, cpuTime()-c)
		}
		fmt.Printf("  device %d: %d events, replay %.3f s wall = %.2f M events/s, %.3f s CPU = %.2f M events/s; addresses %d/%d, segment events %d/%d, final state matches %v\n",
			d, r.Events, best.Seconds(), float64(r.Events)/best.Seconds()/1e6, bestCPU.Seconds(), float64(r.Events)/bestCPU.Seconds()/1e6,
			r.AllocAddrsMatched, r.AllocAddrsTotal, r.SegEventsMatched, r.SegEventsTotal, r.FinalStateMatches)
		fmt.Printf("  device %d: releases %d/%d, mismatches %d, peak reserved %d, peak allocated %d, cudaMalloc %d, cudaFree %d; result %s\n",
			d, r.ReleasesMatched, r.ReleasesTotal, r.MismatchCount, r.PeakReserved, r.PeakAllocated, r.CudaMallocs, r.CudaFrees, fingerprint(r))
		if sweep {
			t, c := time.Now(), cpuTime()
			rows, err := alloc.Sweep(s, d, alloc.SweepOptions{})
			if err != nil {
				return err
			}
			el, cpu := time.Since(t), cpuTime()-c
			fmt.Printf("  device %d: sweep of %d settings %.3f s wall, %.3f s CPU on %d cores (%.2f M events/s of wall time); results %s\n",
				d, len(rows), el.Seconds(), cpu.Seconds(), runtime.GOMAXPROCS(0), float64(len(rows)*r.Events)/el.Seconds()/1e6, fingerprint(rows))
		}
	}
	return nil
}

// fingerprint is a hash of the whole replay result (every counter, the
// kept mismatch messages, the memory_stats): a speed change to the
// replay must leave it unchanged.
func fingerprint(r any) string {
	b, err := json.Marshal(r)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))[:16]
}
