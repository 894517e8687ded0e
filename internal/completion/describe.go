package completion

import (
	"flag"
	"regexp"
	"strings"
)

// verbsRE is a usage line's first word that lists a command's kinds:
// "memory|segments|peak|diff".
var verbsRE = regexp.MustCompile(`^[a-z]+(\|[a-z]+)+$`)

// Describe is what completion knows of a command from its usage line
// (args, the words after its name: a first word such as
// "perfetto|json|pprof" lists its verbs) and its flag set (nil: none);
// spell spells a flag's name as users type it.
func Describe(name, summary, args string, fs *flag.FlagSet, spell func(string) string) Command {
	c := Command{Name: name, Summary: summary}
	if first, _, _ := strings.Cut(args, " "); verbsRE.MatchString(first) {
		c.Verbs = strings.Split(first, "|")
	}
	if fs == nil {
		return c
	}
	fs.VisitAll(func(f *flag.Flag) {
		valueName, usage := flag.UnquoteUsage(f)
		usage, _, _ = strings.Cut(usage, "\n")
		bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
		cf := Flag{Spelt: spell(f.Name), Bare: f.Name, Usage: usage, Value: !(isBool && bf.IsBoolFlag())}
		// A value named FILE, OUT or DIR in the help (or -o) completes as
		// a path.
		cf.File = cf.Value && (f.Name == "o" || strings.Contains(valueName, "FILE") || strings.Contains(valueName, "OUT") || strings.Contains(valueName, "DIR"))
		c.Flags = append(c.Flags, cf)
	})
	return c
}

// WithHelp adds the help command, whose verbs are the other commands.
func WithHelp(cmds []Command) []Command {
	help := Command{Name: "help", Summary: "what each command does; help COMMAND: its flags"}
	for _, c := range cmds {
		help.Verbs = append(help.Verbs, c.Name)
	}
	return append(cmds, help)
}
