package completion

import (
	"flag"
	"reflect"
	"testing"
)

// TestDescribe: verbs come from the usage line's first word; a flag takes
// a value unless it is a boolean, and the value is a path when its help
// names a FILE, OUT or DIR (or the flag is -o).
func TestDescribe(t *testing.T) {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.String("o", "", "write to here")
	fs.Bool("json", false, "print JSON")
	fs.String("budgets", "", "budgets `FILE.json`")
	fs.String("dir", "", "write to `DIR`\nmore help")
	fs.Int("device", -1, "device `N`")
	spell := func(n string) string { return "<" + n + ">" }
	got := Describe("export", "write a snapshot", "perfetto|json|pprof [-o OUT] FILE", fs, spell)
	want := Command{Name: "export", Summary: "write a snapshot", Verbs: []string{"perfetto", "json", "pprof"}, Flags: []Flag{
		{Spelt: "<budgets>", Bare: "budgets", Usage: "budgets FILE.json", Value: true, File: true},
		{Spelt: "<device>", Bare: "device", Usage: "device N", Value: true},
		{Spelt: "<dir>", Bare: "dir", Usage: "write to DIR", Value: true, File: true},
		{Spelt: "<json>", Bare: "json", Usage: "print JSON"},
		{Spelt: "<o>", Bare: "o", Usage: "write to here", Value: true, File: true},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Describe:\n got %+v\nwant %+v", got, want)
	}
	for _, args := range []string{"[--json] FILE", "memory FILE", ""} {
		if c := Describe("x", "", args, nil, spell); c.Verbs != nil || c.Flags != nil {
			t.Errorf("%q: %+v, want no verbs and no flags", args, c)
		}
	}
	cmds := WithHelp([]Command{{Name: "info"}, {Name: "peak"}})
	if h := cmds[len(cmds)-1]; h.Name != "help" || !reflect.DeepEqual(h.Verbs, []string{"info", "peak"}) {
		t.Errorf("help: %+v", h)
	}
}
