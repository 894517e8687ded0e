package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

func init() {
	Register(&Command{
		Name:    "completion",
		Summary: "print a shell completion script: bash, zsh or fish",
		Run:     runCompletion,
	})
}

const completionAbout = `
Prints a script that completes gpumem's commands, their flags, their
kinds (flame memory|segments|peak|diff, export perfetto|json|pprof) and
file arguments. It is made from the commands and flags of this binary,
so it is never out of date with it. Load it:

  bash   source <(gpumem completion bash)        (in ~/.bashrc)
  zsh    source <(gpumem completion zsh)         (in ~/.zshrc, after compinit)
  fish   gpumem completion fish > ~/.config/fish/completions/gpumem.fish`

func runCompletion(env *Env, args []string) error {
	fs := newFlagSet(env, "completion", "bash|zsh|fish", completionAbout)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(fs, env.Stderr, "want one shell: bash, zsh or fish")
	}
	cmds := completionCommands()
	switch pos[0] {
	case "bash":
		writeBash(env.Stdout, cmds)
	case "zsh":
		writeZsh(env.Stdout, cmds)
	case "fish":
		writeFish(env.Stdout, cmds)
	default:
		return usageError(fs, env.Stderr, fmt.Sprintf("unknown shell %q: want bash, zsh or fish", pos[0]))
	}
	return nil
}

// compCommand is what completion knows of one command.
type compCommand struct {
	name, summary string
	verbs         []string // the first argument's choices, if it has any
	flags         []compFlag
}

type compFlag struct {
	spelt string // as typed: --device, -o
	bare  string // the name without dashes
	usage string // first line of its help
	value bool   // takes a value (not a bool flag)
	file  bool   // the value is a file name
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
func completionCommands() []compCommand {
	var out []compCommand
	for _, n := range commandNames() {
		c := commands[n]
		cc := compCommand{name: n, summary: c.Summary}
		fs, args := probe(c)
		if first, _, _ := strings.Cut(args, " "); verbsRE.MatchString(first) {
			cc.verbs = strings.Split(first, "|")
		}
		if fs != nil {
			fs.VisitAll(func(f *flag.Flag) {
				valueName, usage := flag.UnquoteUsage(f)
				usage, _, _ = strings.Cut(usage, "\n")
				bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
				cf := compFlag{spelt: dashed(f.Name), bare: f.Name, usage: usage, value: !(isBool && bf.IsBoolFlag())}
				cf.file = cf.value && (f.Name == "o" || strings.Contains(valueName, "FILE") || strings.Contains(valueName, "OUT") || strings.Contains(valueName, "DIR"))
				cc.flags = append(cc.flags, cf)
			})
		}
		out = append(out, cc)
	}
	help := compCommand{name: "help", summary: "what each command does; help COMMAND: its flags"}
	for _, c := range out {
		help.verbs = append(help.verbs, c.name)
	}
	return append(out, help)
}

func commandList(cmds []compCommand) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	return strings.Join(names, " ")
}

func writeBash(w io.Writer, cmds []compCommand) {
	fmt.Fprintf(w, `# bash completion for gpumem (made by 'gpumem completion bash').
# Load it with: source <(gpumem completion bash)
_gpumem() {
    local cur prev cmd i verb=
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -*) ;;
        *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [[ -z $cmd ]]; then
        if [[ $cur == -* ]]; then
            COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
        else
            # "gpumem FILE" opens FILE in the viewer.
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -W "%s" -- "$cur") $(compgen -f -- "$cur"))
        fi
        return 0
    fi
    local flags= valueflags= fileflags= verbs=
    case $cmd in
`, commandList(cmds))
	for _, c := range cmds {
		var flags, values, files []string
		for _, f := range c.flags {
			flags = append(flags, f.spelt)
			spellings := []string{f.spelt} // Go's flags take -name too
			if len(f.bare) > 1 {
				spellings = append(spellings, "-"+f.bare)
			}
			if f.value {
				values = append(values, spellings...)
			}
			if f.file {
				files = append(files, spellings...)
			}
		}
		if c.name != "help" {
			flags = append(flags, "--help")
		}
		fmt.Fprintf(w, "    %s) flags=%q; valueflags=%q; fileflags=%q; verbs=%q ;;\n", c.name,
			strings.Join(flags, " "), strings.Join(values, " "), strings.Join(files, " "), strings.Join(c.verbs, " "))
	}
	fmt.Fprint(w, `    esac
    if [[ " $fileflags " == *" ${prev%%=*} "* ]]; then
        compopt -o filenames 2>/dev/null
        COMPREPLY=($(compgen -f -- "$cur"))
        return 0
    fi
    if [[ " $valueflags " == *" $prev "* ]]; then
        COMPREPLY=()
        return 0
    fi
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return 0
    fi
    if [[ -n $verbs ]]; then
        for ((i = i + 1; i < COMP_CWORD; i++)); do
            [[ " $verbs " == *" ${COMP_WORDS[i]} "* ]] && verb=${COMP_WORDS[i]}
        done
        if [[ -z $verb ]]; then
            COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
            return 0
        fi
    fi
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
}
complete -F _gpumem gpumem
`)
}

// zshQuote makes s safe inside a single-quoted _arguments spec's
// description.
func zshQuote(s string) string {
	r := strings.NewReplacer("'", "", "[", "(", "]", ")", ":", " ", "\\", "")
	return r.Replace(s)
}

func writeZsh(w io.Writer, cmds []compCommand) {
	fmt.Fprint(w, `#compdef gpumem
# zsh completion for gpumem (made by 'gpumem completion zsh').
# Load it with: source <(gpumem completion zsh)   (after compinit)
_gpumem() {
    local -a cmds
    cmds=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        '%s:%s'\n", c.name, zshQuote(c.summary))
	}
	fmt.Fprint(w, `    )
    if (( CURRENT == 2 )); then
        _describe -t commands 'gpumem command' cmds
        _files
        return
    fi
    local cmd=$words[2]
    shift words
    (( CURRENT-- ))
    case $cmd in
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "    %s)\n        _arguments -s \\\n", c.name)
		for _, f := range c.flags {
			spec := fmt.Sprintf("'%s[%s]", f.spelt, zshQuote(f.usage))
			switch {
			case f.file:
				spec += ":file:_files"
			case f.value:
				spec += ":value: "
			}
			fmt.Fprintf(w, "            %s' \\\n", spec)
		}
		if c.name != "help" {
			fmt.Fprintf(w, "            '--help[print the help]' \\\n")
		}
		if len(c.verbs) > 0 {
			fmt.Fprintf(w, "            '1:kind:(%s)' \\\n", strings.Join(c.verbs, " "))
		}
		fmt.Fprintf(w, "            '*:file:_files'\n        ;;\n")
	}
	fmt.Fprint(w, `    esac
}
if [[ $funcstack[1] == _gpumem ]]; then
    _gpumem "$@"
else
    compdef _gpumem gpumem
fi
`)
}

// fishQuote makes s one single-quoted fish word.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func writeFish(w io.Writer, cmds []compCommand) {
	fmt.Fprintln(w, "# fish completion for gpumem (made by 'gpumem completion fish').")
	fmt.Fprintln(w, "# Install it with: gpumem completion fish > ~/.config/fish/completions/gpumem.fish")
	fmt.Fprintln(w, "complete -c gpumem -e")
	all := commandList(cmds)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c gpumem -n 'not __fish_seen_subcommand_from %s' -a %s -d %s\n", all, c.name, fishQuote(c.summary))
	}
	for _, c := range cmds {
		in := fmt.Sprintf("'__fish_seen_subcommand_from %s'", c.name)
		for _, f := range c.flags {
			opt := "-l " + f.bare
			if len(f.bare) == 1 {
				opt = "-s " + f.bare
			}
			extra := ""
			switch {
			case f.file:
				extra = " -r -F"
			case f.value:
				extra = " -x"
			}
			fmt.Fprintf(w, "complete -c gpumem -n %s %s%s -d %s\n", in, opt, extra, fishQuote(f.usage))
		}
		if len(c.verbs) > 0 {
			fmt.Fprintf(w, "complete -c gpumem -n \"__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s\" -f -a %s\n",
				c.name, strings.Join(c.verbs, " "), fishQuote(strings.Join(c.verbs, " ")))
		}
	}
}
