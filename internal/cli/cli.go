// Package cli dispatches gpumem's subcommands; each subcommand lives in its
// own file and registers itself with Register.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/gpumem/gpumem/internal/help"
)

// Env is what a subcommand may touch: its standard streams. Tests pass
// buffers; main passes the process's streams.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// MaxBytes caps the decoded size of each snapshot loaded (0: no cap),
	// for callers that bound a command's memory (gpumem mcp).
	MaxBytes int64

	// Set by newFlagSet for run: the command's flag set, its full help,
	// and what the flag package or usageError said was wrong, which run
	// prints as one line (the help is printed only when asked for).
	flags *flag.FlagSet
	args  string // the usage line after "gpumem NAME"
	help  func(io.Writer)
	wrong strings.Builder

	// maxDecompressed is --max-decompressed (0: the decoder's default
	// bound), set by the flag sets of the commands that read snapshots.
	maxDecompressed int64
	// noVersions is set by the commands whose answers do not read
	// memory_viz's address versions (snapshot.Options.NoVersions).
	noVersions bool
}

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string // one line for "gpumem help"
	// Run executes the command with the arguments after its name. A returned
	// error is printed as one line "gpumem NAME: ERR" and exits 1. Make the
	// flag set with newFlagSet and parse it (parseInterspersed) before doing
	// anything else: then a flag mistake, or usageError's message, is
	// printed as "gpumem NAME: WHAT" and "run 'gpumem NAME --help'" (exit
	// 2), -h prints the help (exit 0), and completion and the tests find
	// the flags by running the command with -h.
	Run func(env *Env, args []string) error
}

// ExitStatus is returned by a command that ends with this exit status and
// has already said what it had to (gpumem record returns its command's).
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ErrUsage reports a command-line mistake (exit status 2); what was wrong
// went to usageError (or the flag package), and run prints it.
var ErrUsage = errors.New("usage")

var commands = map[string]*Command{}

// Register adds a subcommand; called from init functions.
func Register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: duplicate command " + c.Name)
	}
	commands[c.Name] = c
}

// Main runs gpumem with the given arguments and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainEnv(&Env{Stdin: stdin, Stdout: stdout, Stderr: stderr}, args)
}

// MainEnv is Main with the environment given.
func MainEnv(env *Env, args []string) int {
	stdout, stderr := env.Stdout, env.Stderr
	if len(args) == 0 {
		help.Guide(stdout, commandNames())
		return 2
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				fmt.Fprintf(stderr, "gpumem: unknown command %q; run 'gpumem help'\n", args[1])
				return 2
			}
			return run(env, c, []string{"-h"})
		}
		help.Usage(stdout, commandNames(), func(n string) string { return commands[n].Summary })
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...) // --version --json is version --json
	}
	name := args[0]
	c, ok := commands[name]
	if !ok {
		// "gpumem FILE" is short for "gpumem serve FILE".
		if s, has := commands["serve"]; has && !strings.HasPrefix(name, "-") {
			if _, err := os.Stat(name); err == nil {
				return run(env, s, args)
			}
			// A missing file, not an unknown command, when it looks like
			// a path.
			if strings.ContainsAny(name, `./\`) {
				fmt.Fprintf(stderr, "gpumem: %s: no such file\n", name)
				return 1
			}
		}
		fmt.Fprintf(stderr, "gpumem: unknown command %q; run 'gpumem help'\n", name)
		return 2
	}
	return run(env, c, args[1:])
}

func run(env *Env, c *Command, args []string) (code int) {
	// A bug must still end in one line and exit 1, never a goroutine dump
	// in the middle of a user's terminal.
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(env.Stderr, "gpumem %s: internal error: %v (please report this with the input file)\n", c.Name, r)
			code = 1
		}
	}()
	err := c.Run(env, args)
	var status ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	case errors.Is(err, flag.ErrHelp):
		if env.help != nil {
			env.help(env.Stdout) // asked for, so on standard output
		}
		return 0
	case errors.Is(err, ErrUsage):
		// One line saying what is wrong and one saying where the help
		// is: the full help would scroll the line that matters away.
		if msg := wrongLine(env.wrong.String()); msg != "" {
			fmt.Fprintf(env.Stderr, "gpumem %s: %s\n", c.Name, msg)
		}
		fmt.Fprintf(env.Stderr, "run 'gpumem %s --help' for usage\n", c.Name)
		return 2
	default:
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintf(env.Stderr, "gpumem %s: %s\n", c.Name, msg)
		return 1
	}
}

// wrongLine makes what the flag package and usageError wrote one line,
// with flags spelt as users type them (--name; -o for one letter).
func wrongLine(s string) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if name, ok := strings.CutPrefix(l, "flag provided but not defined: -"); ok {
			l = "unknown flag " + dashed(name)
		} else if name, ok := strings.CutPrefix(l, "flag needs an argument: -"); ok {
			l = dashed(name) + " needs a value"
		} else if strings.HasPrefix(l, "invalid ") {
			// invalid value "x" for flag -name: ..., invalid boolean
			// value "x" for -name: ...
			for _, sep := range []string{" for flag -", " for -"} {
				if before, after, ok := strings.Cut(l, sep); ok {
					name, rest, _ := strings.Cut(after, ":")
					if rest != " parse error" {
						// A flag of our own that may stand alone
						// (--monitor[=K]) is no boolean to the user.
						before = strings.Replace(before, "invalid boolean value", "invalid value", 1)
					}
					l = before + " for " + dashed(name) + ":" + rest
					break
				}
			}
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}

// dashed spells a flag name as users type it: -o, --device.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// commandNames lists the registered commands, sorted.
func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
