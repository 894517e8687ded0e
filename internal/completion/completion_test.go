package completion

import (
	"io"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	cmds := []Command{{Name: "flame", Summary: "a flamegraph: it's [fast]", Verbs: []string{"memory", "peak"},
		Flags: []Flag{{Spelt: "-o", Bare: "o", Usage: "write to FILE", Value: true, File: true}, {Spelt: "--json", Bare: "json", Usage: "print JSON"}}}}
	for _, tc := range []struct {
		shell string
		want  []string
	}{
		{"bash", []string{`flame) flags="-o --json --help"; valueflags="-o"; fileflags="-o"; verbs="memory peak" ;;`}},
		{"zsh", []string{`'flame:a flamegraph  its (fast)'`, `'-o[write to FILE]:file:_files' \`, `'1:kind:(memory peak)' \`}},
		{"fish", []string{`-a flame -d 'a flamegraph: it\'s [fast]'`, `-n '__fish_seen_subcommand_from flame' -s o -r -F -d 'write to FILE'`}},
	} {
		var b strings.Builder
		if !Write(&b, tc.shell, cmds) {
			t.Fatalf("%s: not known", tc.shell)
		}
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s script lacks %q:\n%s", tc.shell, w, b.String())
			}
		}
	}
	if Write(io.Discard, "tcsh", cmds) {
		t.Error("tcsh accepted")
	}
}
