// Package help holds the prose of gpumem's command help: what each command
// does, as -h and 'gpumem help COMMAND' print it above the flags.
package help

import (
	"embed"
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
