package web

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gpumem/gpumem/internal/corpus"
)

// TestBundleApp bundles the viewer's real modules: every module app.js
// reaches is in the script once, after the modules it imports, with no
// import or export left, and node parses the result as a module (which
// rejects a name declared twice in its one scope).
func TestBundleApp(t *testing.T) {
	js, err := appScript()
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := fs.Sub(staticFS, "static")
	// The views loaded on demand (import() of compare.js ...) and the
	// watch page stay separate modules; everything else is in the page.
	onDemand := map[string]bool{"compare.js": true, "whatif.js": true, "steps.js": true, "ranks.js": true, "watch.js": true}
	names, _ := fs.Glob(sub, "*.js")
	pos := map[string]int{}
	for _, n := range names {
		i := strings.Index(js, "// ---- "+n+" ----\n")
		if onDemand[n] {
			if i >= 0 {
				t.Errorf("%s, loaded on demand, is in the page's bundle", n)
			}
			continue
		}
		if i < 0 || strings.Count(js, "// ---- "+n+" ----\n") != 1 {
			t.Errorf("%s is not in the page's bundle once", n)
		}
		pos[n] = i
	}
	// Each module comes after what it imports.
	imp := regexp.MustCompile(`(?m)^import \{[^}]*\} from '\./([\w-]+\.js)';`)
	for n, i := range pos {
		src, _ := fs.ReadFile(sub, n)
		for _, g := range imp.FindAllStringSubmatch(string(src), -1) {
			if j, ok := pos[g[1]]; ok && j > i {
				t.Errorf("%s comes before %s, which it imports", n, g[1])
			}
		}
	}
	if m := regexp.MustCompile(`(?m)^(import|export)\b.*$`).FindString(js); m != "" {
		t.Errorf("the bundle still has %q", m)
	}
	// A module's size and its header comment: its one job.
	for n := range pos {
		src, _ := fs.ReadFile(sub, n)
		if !strings.HasPrefix(string(src), "// ") {
			t.Errorf("%s does not begin with a comment saying its job", n)
		}
		if lines := strings.Count(string(src), "\n"); lines > 420 {
			t.Errorf("%s has %d lines: split it by responsibility", n, lines)
		}
	}

	node := corpus.Tool(t, "node", "the page's bundle is parsed with it; Debian: apt-get install nodejs")
	path := filepath.Join(t.TempDir(), "bundle.mjs")
	if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(node, "--check", path).CombinedOutput(); err != nil {
		t.Errorf("node does not parse the bundle: %v\n%s", err, out)
	}
}

// TestBundleModules checks the bundler on small module graphs: order,
// export stripping, the provided sizes.js, and each construct it refuses.
func TestBundleModules(t *testing.T) {
	ok := fstest.MapFS{
		"main.js":  {Data: []byte("// main\nimport { b } from './b.js';\nimport { a } from './a.js';\nimport { human } from './sizes.js';\nb(a, human);\n")},
		"a.js":     {Data: []byte("// a\nexport const a = 1;\nfunction helperA() {}\n")},
		"b.js":     {Data: []byte("// b\nimport { a } from './a.js';\nimport { python } from './u.js';\nexport function b(x) { return x + a; }\n")},
		"u.js":     {Data: []byte("export { python } from './sizes.js';\nexport async function getIt() {}\n")},
		"other.js": {Data: []byte("this is not imported\n")},
	}
	got, err := bundleModules(ok, "main.js")
	if err != nil {
		t.Fatal(err)
	}
	want := "// ---- a.js ----\n// a\nconst a = 1;\nfunction helperA() {}\n" +
		"// ---- u.js ----\nasync function getIt() {}\n" +
		"// ---- b.js ----\n// b\nfunction b(x) { return x + a; }\n" +
		"// ---- main.js ----\n// main\nb(a, human);\n"
	if got != want {
		t.Errorf("bundle:\n%s\nwant:\n%s", got, want)
	}

	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"cycle", fstest.MapFS{
			"main.js": {Data: []byte("import { x } from './x.js';\n")},
			"x.js":    {Data: []byte("import { y } from './y.js';\nexport const x = 1;\n")},
			"y.js":    {Data: []byte("import { x } from './x.js';\nexport const y = 1;\n")},
		}, "import cycle: main.js -> x.js -> y.js -> x.js"},
		{"clash", fstest.MapFS{
			"main.js": {Data: []byte("import { x } from './x.js';\nfunction helper() {}\n")},
			"x.js":    {Data: []byte("export const x = 1;\nlet helper = 2;\n")},
		}, `x.js and main.js both declare "helper"`},
		{"shadows sizes.js", fstest.MapFS{
			"main.js": {Data: []byte("function formatSize() {}\n")},
		}, `main.js declares "formatSize", which sizes.js provides`},
		{"not exported", fstest.MapFS{
			"main.js": {Data: []byte("import { hidden } from './x.js';\n")},
			"x.js":    {Data: []byte("export const x = 1;\nconst hidden = 2;\n")},
		}, `main.js imports "hidden" from x.js, which does not export it`},
		{"not in sizes.js", fstest.MapFS{
			"main.js": {Data: []byte("import { trimmed } from './sizes.js';\n")},
		}, `main.js imports "trimmed" from sizes.js, which does not export it`},
		{"missing module", fstest.MapFS{
			"main.js": {Data: []byte("import { x } from './gone.js';\n")},
		}, "module gone.js (imported by main.js)"},
		{"alias", fstest.MapFS{
			"main.js": {Data: []byte("import { x as y } from './x.js';\n")},
		}, "main.js:1: the page's bundle takes only `import { a, b } from './x.js';`"},
		{"namespace", fstest.MapFS{
			"main.js": {Data: []byte("// m\nimport * as x from './x.js';\n")},
		}, "main.js:2: the page's bundle takes only"},
		{"default export", fstest.MapFS{
			"main.js": {Data: []byte("export default function f() {}\n")},
		}, "main.js:1: the page's bundle takes only `export` of a named"},
		{"re-export", fstest.MapFS{
			"main.js": {Data: []byte("export { x } from './x.js';\n")},
		}, "main.js:1: the page's bundle takes `export { ... } from` only from a module the page provides"},
		{"destructuring", fstest.MapFS{
			"main.js": {Data: []byte("const { a, b } = window;\n")},
		}, "main.js:1: a top-level destructuring declaration"},
		{"indented import", fstest.MapFS{
			"main.js": {Data: []byte("{\n  import { x } from './x.js';\n}\n")},
		}, "main.js:2: import or export must start its line"},
	} {
		_, err := bundleModules(tc.fs, "main.js")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestBundleKeepsDynamicImport: the views loaded on demand are imported
// with import(), which the bundle leaves to the browser.
func TestBundleKeepsDynamicImport(t *testing.T) {
	js, err := appScript()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js, "await import(`./${S.p.view}.js`)") {
		t.Errorf("the on-demand views' import() is not in the bundle")
	}
}

// TestModulesImportWhatTheyUse: in the bundle's one scope a module would
// still find another's name that it forgot to import, and be placed
// before it; so each module must import every top-level name of another
// module that it uses (or declare its own, under another name).
func TestModulesImportWhatTheyUse(t *testing.T) {
	sub, _ := fs.Sub(staticFS, "static")
	var mods []*jsModule
	var visit func(string)
	seen := map[string]bool{}
	visit = func(name string) {
		if seen[name] || providedModules[name] != "" {
			return
		}
		seen[name] = true
		src, err := fs.ReadFile(sub, name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseModule(name, string(src))
		if err != nil {
			t.Fatal(err)
		}
		mods = append(mods, m)
		for _, d := range m.deps {
			visit(d)
		}
	}
	visit("app.js")
	owner := map[string]string{}
	for _, m := range mods {
		for _, d := range m.decls {
			owner[d] = m.name
		}
	}
	local := regexp.MustCompile(`\b(?:const|let|var|function)\s+([\w$]+)`)
	// Parameters: of functions and of arrows.
	params := regexp.MustCompile(`(?:function\s*[\w$]*\s*\(([^)]*)\)|\(([^()]*)\)\s*=>|([\w$]+)\s*=>)`)
	for _, m := range mods {
		code := jsCode(strings.Join(m.lines, "\n"))
		mine := map[string]bool{}
		for _, g := range local.FindAllStringSubmatch(code, -1) {
			mine[g[1]] = true
		}
		for _, g := range params.FindAllStringSubmatch(code, -1) {
			for _, id := range jsIdents(g[1] + " " + g[2] + " " + g[3]) {
				mine[id] = true
			}
		}
		for _, names := range m.imports {
			for _, n := range names {
				mine[n] = true
			}
		}
		for _, id := range jsIdents(code) {
			if o, ok := owner[id]; ok && o != m.name && !mine[id] {
				t.Errorf("%s uses %s's %q without importing it", m.name, o, id)
				mine[id] = true
			}
		}
	}
}

// jsCode blanks comments, string literals and the text of template
// literals (not their ${} expressions), leaving the code's identifiers.
func jsCode(src string) string {
	b := []byte(src)
	var tmpl []int // brace depth at which each open template's ${ began
	depth := 0
	for i := 0; i < len(b); i++ {
		c := b[i]
		inTemplate := len(tmpl) > 0 && tmpl[len(tmpl)-1] == -1
		switch {
		case inTemplate:
			switch {
			case c == '\\':
				b[i] = ' '
				if i+1 < len(b) {
					i++
					b[i] = ' '
				}
			case c == '`':
				tmpl = tmpl[:len(tmpl)-1]
			case c == '$' && i+1 < len(b) && b[i+1] == '{':
				tmpl[len(tmpl)-1] = depth
				depth++
				b[i], b[i+1] = ' ', ' '
				i++
			default:
				b[i] = ' '
			}
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case c == '\'' || c == '"':
			for i++; i < len(b) && b[i] != c && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					b[i] = ' '
					i++
				}
				b[i] = ' '
			}
		case c == '`':
			tmpl = append(tmpl, -1)
		case c == '{':
			depth++
		case c == '}':
			depth--
			if len(tmpl) > 0 && tmpl[len(tmpl)-1] == depth {
				tmpl[len(tmpl)-1] = -1 // back in the template's text
			}
		}
	}
	return string(b)
}

// jsIdents lists the identifiers of code that are not property names
// (after a dot).
func jsIdents(code string) []string {
	var out []string
	for _, loc := range regexp.MustCompile(`[A-Za-z_$][\w$]*`).FindAllStringIndex(code, -1) {
		if loc[0] > 0 && code[loc[0]-1] == '.' {
			continue
		}
		out = append(out, code[loc[0]:loc[1]])
	}
	return out
}

func TestJSIdents(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"a(`x ${b(`y ${c}`)} z`) // d\n'e' + f", "a b c f"},
		{`g("h \" i") + j.k + { l: m }`, "g j l m"},
		{"n(`${ {o: p}.q } r`)", "n o p"},
	} {
		if got := strings.Join(jsIdents(jsCode(tc.src)), " "); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.src, got, tc.want)
		}
	}
}
