// Command gen writes the demo snapshot, demo.pickle, into the current folder
// (run by `go generate ./internal/demo`).
package main

import (
	"fmt"
	"os"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/synth"
)

func main() {
	s, res, err := synth.Generate(demo.Workload, demo.Options)
	if err == nil && res.OOM != nil {
		err = res.OOM
	}
	var n int64
	if err == nil {
		n, err = synth.WriteFile("demo.pickle", s, false)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo gen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote demo.pickle: %d bytes, %d trace entries\n", n, res.Events)
}
