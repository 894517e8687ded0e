// Package completion writes gpumem's shell completion scripts (bash, zsh,
// fish) from a description of its commands and flags.
package completion

import (
	"fmt"
	"io"
	"strings"
)

// Command is what completion knows of one command.
type Command struct {
	Name, Summary string
	Verbs         []string // the first argument's choices, if it has any
	Flags         []Flag
}

// Flag is one of a command's flags.
type Flag struct {
	Spelt string // as typed: --device, -o
	Bare  string // the name without dashes
	Usage string // first line of its help
	Value bool   // takes a value (not a bool flag)
	File  bool   // the value is a file name
}

// Shells are the shells Write knows.
var Shells = []string{"bash", "zsh", "fish"}

// Write writes the completion script of shell for cmds; ok is false for a
// shell it does not know.
func Write(w io.Writer, shell string, cmds []Command) (ok bool) {
	switch shell {
	case "bash":
		writeBash(w, cmds)
	case "zsh":
		writeZsh(w, cmds)
	case "fish":
		writeFish(w, cmds)
	default:
		return false
	}
	return true
}

func commandList(cmds []Command) string {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.Name
	}
	return strings.Join(names, " ")
}

func writeBash(w io.Writer, cmds []Command) {
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
		for _, f := range c.Flags {
			flags = append(flags, f.Spelt)
			spellings := []string{f.Spelt} // Go's flags take -name too
			if len(f.Bare) > 1 {
				spellings = append(spellings, "-"+f.Bare)
			}
			if f.Value {
				values = append(values, spellings...)
			}
			if f.File {
				files = append(files, spellings...)
			}
		}
		if c.Name != "help" {
			flags = append(flags, "--help")
		}
		fmt.Fprintf(w, "    %s) flags=%q; valueflags=%q; fileflags=%q; verbs=%q ;;\n", c.Name,
			strings.Join(flags, " "), strings.Join(values, " "), strings.Join(files, " "), strings.Join(c.Verbs, " "))
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

func writeZsh(w io.Writer, cmds []Command) {
	fmt.Fprint(w, `#compdef gpumem
# zsh completion for gpumem (made by 'gpumem completion zsh').
# Load it with: source <(gpumem completion zsh)   (after compinit)
_gpumem() {
    local -a cmds
    cmds=(
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "        '%s:%s'\n", c.Name, zshQuote(c.Summary))
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
		fmt.Fprintf(w, "    %s)\n        _arguments -s \\\n", c.Name)
		for _, f := range c.Flags {
			spec := fmt.Sprintf("'%s[%s]", f.Spelt, zshQuote(f.Usage))
			switch {
			case f.File:
				spec += ":file:_files"
			case f.Value:
				spec += ":value: "
			}
			fmt.Fprintf(w, "            %s' \\\n", spec)
		}
		if c.Name != "help" {
			fmt.Fprintf(w, "            '--help[print the help]' \\\n")
		}
		if len(c.Verbs) > 0 {
			fmt.Fprintf(w, "            '1:kind:(%s)' \\\n", strings.Join(c.Verbs, " "))
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

func writeFish(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, "# fish completion for gpumem (made by 'gpumem completion fish').")
	fmt.Fprintln(w, "# Install it with: gpumem completion fish > ~/.config/fish/completions/gpumem.fish")
	fmt.Fprintln(w, "complete -c gpumem -e")
	all := commandList(cmds)
	for _, c := range cmds {
		fmt.Fprintf(w, "complete -c gpumem -n 'not __fish_seen_subcommand_from %s' -a %s -d %s\n", all, c.Name, fishQuote(c.Summary))
	}
	for _, c := range cmds {
		in := fmt.Sprintf("'__fish_seen_subcommand_from %s'", c.Name)
		for _, f := range c.Flags {
			opt := "-l " + f.Bare
			if len(f.Bare) == 1 {
				opt = "-s " + f.Bare
			}
			extra := ""
			switch {
			case f.File:
				extra = " -r -F"
			case f.Value:
				extra = " -x"
			}
			fmt.Fprintf(w, "complete -c gpumem -n %s %s%s -d %s\n", in, opt, extra, fishQuote(f.Usage))
		}
		if len(c.Verbs) > 0 {
			fmt.Fprintf(w, "complete -c gpumem -n \"__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s\" -f -a %s\n",
				c.Name, strings.Join(c.Verbs, " "), fishQuote(strings.Join(c.Verbs, " ")))
		}
	}
}
