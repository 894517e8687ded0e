package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/internal/units"
)

// parseInterspersed parses args with fs, allowing flags after positional
// arguments ("gpumem info x.pickle --json"), as users type them. "--" ends
// the flags. It returns the positional arguments, or ErrUsage after fs has
// printed what was wrong.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, flag.ErrHelp // asked for: exit 0
			}
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

// parseSnapshots parses args with fs (see parseInterspersed) for a
// command that takes snapshots: at least one file, or none with --demo
// (useDemo, read after parsing).
func parseSnapshots(env *Env, fs *flag.FlagSet, args []string, useDemo *bool) ([]string, error) {
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 && !*useDemo {
		return nil, usageError(fs, env.Stderr, "no snapshot given")
	}
	return files, nil
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

// newFlagSet makes the FlagSet of a subcommand and tells run about it:
// what the flag package says is wrong goes to env.wrong, which run prints
// as one line with where the help is; the help ("usage: gpumem NAME
// ARGS", about, the flags) is printed only when asked for (-h, --help,
// gpumem help NAME). Every subcommand makes its flags here, so that all
// get the same usage errors (TestUsageErrorsShort) and completion.
func newFlagSet(env *Env, name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(&env.wrong)
	if !noSnapshotFlags[name] {
		fs.Var(decompressedValue{&env.maxDecompressed}, "max-decompressed",
			"largest `size` a gzip or zstd snapshot may expand to (default 64MiB plus 200 times its compressed size)")
	}
	fs.Usage = func() {} // run prints the help or the one line
	env.flags, env.args = fs, args
	env.noVersions = false // the command sets it again if it may
	env.help = func(w io.Writer) {
		fmt.Fprintf(w, "usage: gpumem %s %s\n\n%s\n", name, args, strings.TrimSpace(about))
		if hasFlags(fs) {
			fmt.Fprintf(w, "\nflags:\n")
			fs.SetOutput(w)
			fs.PrintDefaults()
			fs.SetOutput(&env.wrong)
		}
	}
	return fs
}

// noSnapshotFlags are the commands that read no snapshot: they take no
// --max-decompressed.
var noSnapshotFlags = map[string]bool{"version": true, "synth": true, "watch": true, "record": true, "completion": true}

// decompressedValue is --max-decompressed: a size (units.Parse).
type decompressedValue struct{ n *int64 }

func (v decompressedValue) String() string {
	if v.n == nil || *v.n == 0 {
		return ""
	}
	return units.Human(uint64(*v.n))
}

func (v decompressedValue) Set(s string) error {
	n, err := units.Parse(s)
	if err != nil {
		return err
	}
	if n == 0 || n > 1<<62 {
		return fmt.Errorf("size %q out of range", s)
	}
	*v.n = int64(n)
	return nil
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// usageError reports msg, a command-line mistake, and returns ErrUsage:
// run prints "gpumem NAME: msg" and where the help is (exit 2). w is
// where to say it for a flag set not made by newFlagSet.
func usageError(fs *flag.FlagSet, w io.Writer, msg string) error {
	if _, ours := fs.Output().(*strings.Builder); ours {
		fmt.Fprintln(fs.Output(), msg)
	} else {
		fmt.Fprintf(w, "gpumem %s: %s\n", fs.Name(), msg)
	}
	return ErrUsage
}

// deviceFlag registers --device N on fs, the one way every command takes a
// device; the value is -1 when the flag is not given, and means the same
// in every command: commands that report or export every device cover each
// device with data, and commands that show one device take the snapshot's
// DefaultDevice (the device with the longest trace, memory_viz's choice).
// what says what the device selects, e.g. "list only device".
func deviceFlag(fs *flag.FlagSet, what string) *int {
	n := -1
	fs.Var(deviceValue{&n}, "device", what+" `N` (a device number 0, 1, ...)")
	return &n
}

// deviceValue is a device number that rejects what is not one.
type deviceValue struct{ n *int }

func (v deviceValue) String() string {
	if v.n == nil || *v.n < 0 {
		return ""
	}
	return strconv.Itoa(*v.n)
}

func (v deviceValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return errors.New("want a device number (0, 1, ...)")
	}
	*v.n = n
	return nil
}

// stdinOnce is a usage error when files name standard input ("-") more
// than once: it can be read only once.
func stdinOnce(env *Env, fs *flag.FlagSet, files []string) error {
	n := 0
	for _, f := range files {
		n += boolInt(f == "-")
	}
	if n > 1 {
		return usageError(fs, env.Stderr, "standard input (-) can be given only once")
	}
	return nil
}

// withDemo completes files to want snapshots with the embedded demo when
// --demo is given (diff --demo B compares B with the demo); --demo with no
// snapshot missing is a usage error, not silently ignored. what is the
// usage message for a wrong count.
func withDemo(env *Env, fs *flag.FlagSet, files []string, useDemo bool, want int, what string) ([]string, error) {
	if useDemo {
		if len(files) >= want {
			return nil, usageError(fs, env.Stderr, fmt.Sprintf("--demo stands for a missing snapshot, but %d given: %s", len(files), what))
		}
		for len(files) < want {
			files = append(files, demoArg)
		}
	}
	if len(files) != want {
		return nil, usageError(fs, env.Stderr, what)
	}
	return files, nil
}
