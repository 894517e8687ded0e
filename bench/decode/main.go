// Command decode times snapshot.Open on files and prints what it decoded;
// run it under /usr/bin/time -v to see peak RSS.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/gpumem/gpumem/snapshot"
)

func main() {
	cpu := flag.String("cpuprofile", "", "write a CPU profile")
	mem := flag.String("memprofile", "", "write a heap profile after decoding")
	flag.Parse()
	if *cpu != "" {
		f, err := os.Create(*cpu)
		if err != nil {
			panic(err)
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	for _, p := range flag.Args() {
		t0 := time.Now()
		s, err := snapshot.Open(p, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		el := time.Since(t0)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		n := 0
		for _, t := range s.Traces {
			n += len(t.Events)
		}
		fmt.Printf("%s: %.3fs %.1f MB/s, %d events, %d frames, %d stacks (%d frame refs), %d segments; heap in use %d MB\n",
			p, el.Seconds(), float64(s.Source.Size)/1e6/el.Seconds(), n, len(s.Frames), s.Stacks.Len(), len(s.Stacks.FrameIDs), len(s.Segments), ms.HeapInuse>>20)
		if *mem != "" {
			runtime.GC()
			f, _ := os.Create(*mem)
			pprof.WriteHeapProfile(f)
			f.Close()
		}
		runtime.KeepAlive(s)
	}
}
