// Command answers times `gpumem peak` and `gpumem oom` against `gpumem
// info` on the same file in one run (the three alternate, so machine load
// hits them alike) and prints a Markdown table of the best run of each
// with the ratios to info.
//
//	go build -o /tmp/gpumem ./cmd/gpumem
//	go run ./bench/answers -gpumem /tmp/gpumem -runs 3 bench/data/baseline-1000mb.pickle
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

func main() {
	bin := flag.String("gpumem", "gpumem", "the gpumem binary to time")
	runs := flag.Int("runs", 3, "runs of each command")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: answers [-gpumem BIN] [-runs N] FILE")
		os.Exit(2)
	}
	file := flag.Arg(0)
	cmds := []string{"info", "peak", "oom"}
	type best struct{ wall, cpu time.Duration }
	res := map[string]*best{}
	for r := 0; r < *runs; r++ {
		for _, c := range cmds {
			cmd := exec.Command(*bin, c, file)
			cmd.Stdout, cmd.Stderr = nil, os.Stderr
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "gpumem %s: %v\n", c, err)
				os.Exit(1)
			}
			wall := time.Since(t0)
			cpu := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			b := res[c]
			if b == nil {
				b = &best{wall, cpu}
				res[c] = b
			}
			b.wall, b.cpu = min(b.wall, wall), min(b.cpu, cpu)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%s, best of %d alternating runs, %d cores, load average %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		*runs, runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Println("| command | wall (s) | CPU user+sys (s) | wall / info | CPU / info |")
	fmt.Println("|---|---:|---:|---:|---:|")
	for _, c := range cmds {
		b, i := res[c], res["info"]
		fmt.Printf("| gpumem %s | %.2f | %.2f | %.2f | %.2f |\n", c, b.wall.Seconds(), b.cpu.Seconds(),
			b.wall.Seconds()/i.wall.Seconds(), b.cpu.Seconds()/i.cpu.Seconds())
	}
}
