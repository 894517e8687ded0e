package cli

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// checkUsageError: a command-line mistake is exit 2, nothing on standard
// output, and at most 3 lines on standard error: what is wrong (naming
// want when it is not empty) and where the help is.
func checkUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	code, out, stderr := runMain(t, nil, args...)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	hint := "run 'gpumem " + args[0] + " --help' for usage"
	if code != 2 || out != "" || len(lines) > 3 || lines[len(lines)-1] != hint || !strings.Contains(stderr, want) {
		t.Errorf("gpumem %s: exit %d, %d bytes on stdout, stderr (%d lines):\n%s\nwant exit 2, at most 3 lines mentioning %q and ending %q",
			strings.Join(args, " "), code, len(out), len(lines), stderr, want, hint)
	}
}

// TestUsageErrorsShort goes over every registered command (those added
// later too): an unknown flag, a missing flag value and every flag value
// the flag's parser rejects are one line saying what and one saying where
// the help is, exit 2; -h prints the help on standard output, exit 0.
func TestUsageErrorsShort(t *testing.T) {
	if len(commands) < 15 {
		t.Fatalf("%d commands registered", len(commands))
	}
	for _, name := range commandNames() {
		t.Run(name, func(t *testing.T) {
			fs, _ := probe(commands[name])
			if fs == nil {
				t.Fatalf("gpumem %s -h made no flag set: make it with newFlagSet and parse before doing anything", name)
			}
			checkUsageError(t, []string{name, "--no-such-flag"}, "unknown flag --no-such-flag")
			code, out, stderr := runMain(t, nil, name, "--help")
			if code != 0 || !strings.HasPrefix(out, "usage: gpumem "+name) || stderr != "" {
				t.Errorf("gpumem %s --help: exit %d, stdout %.40q, stderr %q", name, code, out, stderr)
			}
			if hcode, hout, _ := runMain(t, nil, "help", name); hcode != 0 || hout != out {
				t.Errorf("gpumem help %s: exit %d, not the same as --help", name, hcode)
			}
			bad := 0
			fs.VisitAll(func(f *flag.Flag) {
				bf, isBool := f.Value.(interface{ IsBoolFlag() bool })
				if !isBool || !bf.IsBoolFlag() {
					// The value missing at the end of the line.
					checkUsageError(t, []string{name, "--" + f.Name}, dashed(f.Name)+" needs a value")
				}
				// A value the flag's own parser rejects never reaches the
				// command, so trying it runs nothing.
				const v = "no-such-value%"
				if f.Value.Set(v) != nil {
					bad++
					checkUsageError(t, []string{name, "--" + f.Name + "=" + v}, `"`+v+`" for `+dashed(f.Name))
				}
			})
			t.Logf("%s: %d flags with a rejected value", name, bad)
		})
	}
}

// TestUsageErrorsFromCommands: mistakes a command finds after parsing
// (a string flag's value, the arguments) are as short.
func TestUsageErrorsFromCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"estimate", "--dtype", "fp8", "--params", "7e9"}, `dtype "fp8"`},
		{[]string{"peak", "--at", "nowhere", "--demo"}, `--at "nowhere"`},
		{[]string{"oom", "--capacity", "lots", "--demo"}, `--capacity "lots"`},
		{[]string{"synth", "--model", "cnn", "-o", "x.pickle"}, `--model "cnn"`},
		{[]string{"html", "--view", "nope", "--demo", "-o", "x.html"}, `unknown --view "nope"`},
		{[]string{"flame", "nope", "--demo"}, `unknown kind "nope"`},
		{[]string{"export", "nope", "--demo"}, `unknown format "nope"`},
		{[]string{"sim"}, "need --script FILE or one snapshot FILE"},
		{[]string{"info"}, "no snapshot given"},
		{[]string{"stats", "a", "b"}, "want exactly one snapshot"},
		{[]string{"completion", "tcsh"}, `unknown shell "tcsh"`},
		{[]string{"estimate", "--params", "7e9", "--gpu", "A100"}, "--gpu A100 is ambiguous: A100-40GB, A100-80GB"},
		{[]string{"oom", "--demo", "--gpu", "a100"}, "a100 is ambiguous: A100-40GB, A100-80GB"},
	} {
		checkUsageError(t, tc.args, tc.want)
	}
}

// TestGuideShort: gpumem alone prints a guide of at most 25 lines that
// names every command; gpumem help lists them with what they do.
func TestGuideShort(t *testing.T) {
	code, out, _ := runMain(t, nil)
	if n := strings.Count(out, "\n"); code != 2 || n > 25 {
		t.Errorf("gpumem: exit %d, %d lines:\n%s", code, n, out)
	}
	code, full, _ := runMain(t, nil, "help")
	for _, n := range commandNames() {
		if !strings.Contains(out, " "+n) || !strings.Contains(full, "  "+n+" ") {
			t.Errorf("gpumem or gpumem help does not name %s", n)
		}
	}
	if code != 0 {
		t.Errorf("gpumem help: exit %d", code)
	}
}

// TestCompletion: each shell's script names every command and every flag
// of a command with kinds; bash loads it and completes from it.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, stderr := runMain(t, nil, "completion", sh)
		if code != 0 || stderr != "" {
			t.Fatalf("completion %s: exit %d, %s", sh, code, stderr)
		}
		for _, n := range commandNames() {
			if !strings.Contains(out, n) {
				t.Errorf("completion %s does not name %s", sh, n)
			}
		}
		for _, w := range []string{"width", "collapsed", "segments", "perfetto"} {
			if !strings.Contains(out, w) {
				t.Errorf("completion %s lacks %q", sh, w)
			}
		}
	}
	// zsh and fish, where installed, read their scripts without a
	// syntax error (the bash script is run below).
	for _, sh := range []string{"zsh", "fish"} {
		p, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s not installed: its script is checked for names only", sh)
			continue
		}
		_, script, _ := runMain(t, nil, "completion", sh)
		f := filepath.Join(t.TempDir(), "c."+sh)
		if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(p, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s -n on its completion script: %v\n%s", sh, err, out)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed to load the bash completion: ", err)
	}
	_, script, _ := runMain(t, nil, "completion", "bash")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.bash"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.pickle"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ words, want string }{
		{"gpumem fl", "flame"},
		{"gpumem flame ''", "memory segments peak diff"},
		{"gpumem flame peak --wi", "--width"},
		{"gpumem export pp", "pprof"},
		{"gpumem help st", "stats steps"},
		{"gpumem peak ru", "run.pickle"},
		{"gpumem html -o ru", "run.pickle"},
		{"gpumem info --device ''", ""},
	} {
		cmd := exec.Command(bash, "-c", `source c.bash; complete -p gpumem >/dev/null || exit 3
COMP_WORDS=(`+tc.words+`); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _gpumem; echo "${COMPREPLY[*]}"`)
		cmd.Dir = dir
		got, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(got)) != tc.want {
			t.Errorf("bash completion of %s: %q (%v), want %q", tc.words, got, err, tc.want)
		}
	}
}

// TestDocsCoverCommands: every command has a row in the manual's index
// (docs/README.md) linking to its page, and that page documents it.
func TestDocsCoverCommands(t *testing.T) {
	docs := corpus.Docs(t)
	rows := strings.Split(docs["docs/README.md"], "\n")
	link := regexp.MustCompile(`^\| \[[^]]+\]\(([a-z0-9-]+\.md)\) \|([^|]*)\|`)
	for _, n := range commandNames() {
		page := ""
		for _, r := range rows {
			if m := link.FindStringSubmatch(r); m != nil && strings.Contains(m[2], "`"+n+"`") {
				page = "docs/" + m[1]
			}
		}
		switch {
		case page == "":
			t.Errorf("docs/README.md has no row for %s", n)
		case slices.Contains(corpus.PendingPages, page):
			// written on another branch; TestPendingPagesAbsent says when it lands
		case !strings.Contains(docs[page], "gpumem "+n):
			t.Errorf("%s, the page docs/README.md gives for %s, does not document gpumem %s", page, n, n)
		}
	}
}

// TestWrongLine: the flag package's messages spell flags as users type
// them; a command's own message is left as it is.
func TestWrongLine(t *testing.T) {
	for in, want := range map[string]string{
		"flag provided but not defined: -nope\n":            "unknown flag --nope",
		"flag needs an argument: -o\n":                      "-o needs a value",
		`invalid value "x" for flag -device: want a number`: `invalid value "x" for --device: want a number`,
		`invalid boolean value "x" for -json: parse error`:  `invalid boolean value "x" for --json: parse error`,
		"want a size for --capacity, not -1\n":              "want a size for --capacity, not -1",
		"one\ntwo\n":                                        "one; two",
	} {
		if got := wrongLine(in); got != want {
			t.Errorf("wrongLine(%q) = %q, want %q", in, got, want)
		}
	}
}
