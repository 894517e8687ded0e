package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
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

// verbsRE is a usage line's first word that lists a command's kinds:
// "memory|segments|peak|diff".
var verbsRE = regexp.MustCompile(`^[a-z]+(\|[a-z]+)+$`)

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
		c := commands[n]
		cc := completion.Command{Name: n, Summary: c.Summary}
		fs, args := probe(c)
		if first, _, _ := strings.Cut(args, " "); verbsRE.MatchString(first) {
			cc.Verbs = strings.Split(first, "|")
		}
		if fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				valueName, usage := flag.UnquoteUsage(f)
				usage, _, _ = strings.Cut(usage, "\n")
				bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
				cf := completion.Flag{Spelt: dashed(f.Name), Bare: f.Name, Usage: usage, Value: !(isBool && bf.IsBoolFlag())}
				cf.File = cf.Value && (f.Name == "o" || strings.Contains(valueName, "FILE") || strings.Contains(valueName, "OUT") || strings.Contains(valueName, "DIR"))
				cc.Flags = append(cc.Flags, cf)
			})
		}
		out = append(out, cc)
	}
	help := completion.Command{Name: "help", Summary: "what each command does; help COMMAND: its flags"}
	for _, c := range out {
		help.Verbs = append(help.Verbs, c.Name)
	}
	return append(out, help)
}
