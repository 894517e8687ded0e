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
)

// Env is what a subcommand may touch: its standard streams. Tests pass
// buffers; main passes the process's streams.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// maxDecompressed is --max-decompressed (0: the decoder's default
	// bound), set by the flag sets of the commands that read snapshots.
	maxDecompressed int64
}

// Command is one subcommand.
type Command struct {
	Name    string
	Summary string // one line for "gpumem help"
	// Run executes the command with the arguments after its name. A returned
	// error is printed as one line "gpumem NAME: ERR" and exits 1; return
	// ErrUsage after printing usage yourself to exit 2.
	Run func(env *Env, args []string) error
}

// ErrUsage reports a command-line mistake (exit status 2); the command has
// already printed what was wrong.
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
	env := &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			c, ok := commands[args[1]]
			if !ok {
				fmt.Fprintf(stderr, "gpumem: unknown command %q; run 'gpumem help'\n", args[1])
				return 2
			}
			return run(env, c, []string{"-h"})
		}
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
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
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0 // help was asked for
	case errors.Is(err, ErrUsage):
		return 2
	default:
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		fmt.Fprintf(env.Stderr, "gpumem %s: %s\n", c.Name, msg)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "gpumem: offline analysis of PyTorch CUDA memory snapshots")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: gpumem COMMAND [flags] [FILE...]   (gpumem FILE = gpumem serve FILE)")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'gpumem help COMMAND' for a command's flags.")
}
