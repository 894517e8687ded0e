package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gpumem/gpumem/internal/completion"
	"github.com/gpumem/gpumem/internal/help"
)

func init() {
	Register(&Command{
		Name:    "completion",
		Summary: "print a shell completion script: bash, zsh or fish",
		Run:     runCompletion,
	})
}

func runCompletion(env *Env, args []string) error {
	fs := newFlagSet(env, "completion", "bash|zsh|fish", help.About("completion"))
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(fs, env.Stderr, "want one shell: bash, zsh or fish")
	}
	if !completion.Write(env.Stdout, pos[0], completionCommands()) {
		return usageError(fs, env.Stderr, fmt.Sprintf("unknown shell %q: want bash, zsh or fish", pos[0]))
	}
	return nil
}

// probe runs c with -h on discarded streams and returns the flag set and
// usage line that newFlagSet recorded (nil if the command made none).
// Every command parses its flags before doing anything, so -h does
// nothing but return flag.ErrHelp.
func probe(c *Command) (fs *flag.FlagSet, args string) {
	env := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	func() {
		defer func() { _ = recover() }()
		_ = c.Run(env, []string{"-h"})
	}()
	return env.flags, env.args
}

// completionCommands describes every registered command, and help, from
// the registry and each command's flag set.
func completionCommands() []completion.Command {
	var out []completion.Command
	for _, n := range commandNames() {
		fs, args := probe(commands[n])
		out = append(out, completion.Describe(n, commands[n].Summary, args, fs, dashed))
	}
	return completion.WithHelp(out)
}
