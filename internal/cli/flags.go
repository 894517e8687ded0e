package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// parseInterspersed parses args with fs, allowing flags after positional
// arguments ("gpumem info x.pickle --json"), as users type them. "--" ends
// the flags. It returns the positional arguments, or ErrUsage after fs has
// printed what was wrong.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, ErrUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseOneSnapshot parses args with fs (see parseInterspersed) for a
// command that takes exactly one snapshot: one file, or none with --demo
// (useDemo, read after parsing).
func parseOneSnapshot(env *Env, fs *flag.FlagSet, args []string, useDemo *bool) ([]string, error) {
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(files)+boolInt(*useDemo) != 1 {
		return nil, usageError(fs, env.Stderr, "want exactly one snapshot")
	}
	return files, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// newFlagSet makes a FlagSet for a subcommand whose usage text goes to
// stderr: "usage: gpumem NAME ARGS", a description, then the flags.
func newFlagSet(env *Env, name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: gpumem %s %s\n\n%s\n", name, args, strings.TrimSpace(about))
		if hasFlags(fs) {
			fmt.Fprintf(w, "\nflags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// usageError prints msg and the usage of fs, and returns ErrUsage.
func usageError(fs *flag.FlagSet, w io.Writer, msg string) error {
	fmt.Fprintf(w, "gpumem %s: %s\n", fs.Name(), msg)
	fs.Usage()
	return ErrUsage
}
