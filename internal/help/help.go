// Package help holds the prose of gpumem's command help: what each command
// does, as -h and 'gpumem help COMMAND' print it above the flags.
package help

import (
	"embed"
	"fmt"
	"io"
	"slices"
	"strings"
)

//go:embed about/*.txt
var about embed.FS

// About is what command name does, in its help's words ("" for a command
// without a text).
func About(name string) string {
	b, err := about.ReadFile("about/" + name + ".txt")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Guide is what "gpumem" alone prints: where to start, the command names
// (the registered ones, sorted), and where the rest is; short enough for
// one screen (cli's TestGuideShort).
func Guide(w io.Writer, names []string) {
	fmt.Fprintln(w, "gpumem: offline analysis of PyTorch CUDA memory snapshots")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: gpumem COMMAND [flags] [FILE...]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Start here:")
	for _, ex := range []struct{ cmd, line string }{
		{"record", "gpumem record -- python train.py   record a snapshot of a run"},
		{"serve", "gpumem run.pickle                  open a snapshot in the web viewer"},
		{"info", "gpumem info --demo                 what the embedded demo snapshot holds"},
		{"peak", "gpumem peak run.pickle             what is live at the peak, and who allocated it"},
		{"oom", "gpumem oom oom.pickle              why an out-of-memory error happened"},
		{"estimate", "gpumem estimate --help             will a model fit, before the run"},
	} {
		if slices.Contains(names, ex.cmd) {
			fmt.Fprintln(w, "  "+ex.line)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	line := " "
	for _, n := range names {
		if len(line)+1+len(n) > 72 {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + n
	}
	fmt.Fprintln(w, line)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "'gpumem help' says what each command does, 'gpumem help COMMAND' its flags;")
	fmt.Fprintln(w, "the manual is docs/README.md (https://github.com/gpumem/gpumem/tree/main/docs).")
}

// Usage is "gpumem help": a line per command with its summary.
func Usage(w io.Writer, names []string, summary func(string) string) {
	fmt.Fprintln(w, "gpumem: offline analysis of PyTorch CUDA memory snapshots")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: gpumem COMMAND [flags] [FILE...]   (gpumem FILE = gpumem serve FILE)")
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, summary(n))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'gpumem help COMMAND' for a command's flags.")
}
