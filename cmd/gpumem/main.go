// Command gpumem reads PyTorch CUDA memory snapshots and answers questions
// about them: see README.md or run "gpumem help".
package main

import (
	"os"

	"github.com/gpumem/gpumem/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
