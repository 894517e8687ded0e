package web

import (
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/gpumem/gpumem/internal/units"
)

// The viewer's script is ES modules in static/ (app.js and what it
// imports), each with one job. The page carries them as ONE inline module
// script, which bundleModules makes by scope hoisting: the modules in
// dependency order, their import lines dropped and their export keywords
// removed, in one scope. That keeps the page one request (its first paint
// waits for no module fetch) and lets a gpumem html page, opened from
// file://, run with no import at all. It holds only because the modules
// keep to a subset that bundleModules checks: imports and exports of
// named declarations on one line, no top-level name declared twice
// across the bundle, no import cycle; anything else is an error here
// (and in TestBundleApp), never a page that fails in the browser.

// providedModules are the modules the page provides as classic scripts
// before the bundle (their functions are globals there): an import from
// one is dropped, after checking that it exports the name.
var providedModules = map[string]string{"sizes.js": units.SizesJS}

var (
	importLine   = regexp.MustCompile(`^import \{ *([\w$]+(?: *, *[\w$]+)*) *,? *\} from '\./([\w-]+\.js)';\s*$`)
	reexportLine = regexp.MustCompile(`^export \{ *([\w$]+(?: *, *[\w$]+)*) *,? *\} from '\./([\w-]+\.js)';\s*$`)
	exportDecl   = regexp.MustCompile(`^export ((?:async )?function\*? *|const |let |class )([\w$]+)`)
	topDecl      = regexp.MustCompile(`^(?:export )?(?:(?:async )?function\*? *|const |let |var |class )([\w$]+)`)
	topPattern   = regexp.MustCompile(`^(?:export )?(?:const|let|var) *[{\[]`)
	nestedModule = regexp.MustCompile(`^\s+(?:import|export)\s*[{*\w]`)
	providedFunc = regexp.MustCompile(`(?m)^export function ([\w$]+)`)
)

type jsModule struct {
	name    string
	lines   []string // the text with import lines dropped and export removed
	deps    []string // in import order
	imports map[string][]string
	exports map[string]bool
	decls   []string
}

// parseModule reads one module's imports, exports and top-level names.
func parseModule(name, src string) (*jsModule, error) {
	m := &jsModule{name: name, imports: map[string][]string{}, exports: map[string]bool{}}
	for i, line := range strings.Split(strings.TrimSuffix(src, "\n"), "\n") {
		where := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: "+format, append([]any{name, i + 1}, a...)...)
		}
		switch {
		case strings.HasPrefix(line, "import ") || strings.HasPrefix(line, "import{"):
			g := importLine.FindStringSubmatch(line)
			if g == nil {
				return nil, where("the page's bundle takes only `import { a, b } from './x.js';` on one line, without `as`")
			}
			if _, seen := m.imports[g[2]]; !seen {
				m.deps = append(m.deps, g[2])
			}
			m.imports[g[2]] = append(m.imports[g[2]], splitNames(g[1])...)
			continue
		case strings.HasPrefix(line, "export {") || strings.HasPrefix(line, "export{"):
			g := reexportLine.FindStringSubmatch(line)
			if g == nil || providedModules[g[2]] == "" {
				return nil, where("the page's bundle takes `export { ... } from` only from a module the page provides (%s)", providedNames())
			}
			// The names are the provided script's globals: importing them
			// from this module is the same as from the provided one.
			m.imports[g[2]] = append(m.imports[g[2]], splitNames(g[1])...)
			for _, n := range splitNames(g[1]) {
				m.exports[n] = true
			}
			continue
		case strings.HasPrefix(line, "export "):
			g := exportDecl.FindStringSubmatch(line)
			if g == nil {
				return nil, where("the page's bundle takes only `export` of a named function, const, let or class")
			}
			m.exports[g[2]] = true
			line = strings.TrimPrefix(line, "export ")
		case nestedModule.MatchString(line):
			return nil, where("import or export must start its line")
		}
		if topPattern.MatchString(line) {
			return nil, where("a top-level destructuring declaration cannot be checked for clashes in the page's bundle: declare each name")
		}
		if g := topDecl.FindStringSubmatch(line); g != nil {
			m.decls = append(m.decls, g[1])
		}
		m.lines = append(m.lines, line)
	}
	return m, nil
}

func splitNames(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func providedNames() string {
	var names []string
	for n := range providedModules {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// bundleModules returns the module graph of entry in fsys as one module
// script: each module once, after the modules it imports (an ES module's
// evaluation order), in one scope.
func bundleModules(fsys fs.FS, entry string) (string, error) {
	mods := map[string]*jsModule{}
	var order []*jsModule
	state := map[string]int{} // 1: being visited, 2: done
	var visit func(name string, from []string) error
	visit = func(name string, from []string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("import cycle: %s -> %s", strings.Join(from, " -> "), name)
		case 2:
			return nil
		}
		state[name] = 1
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return fmt.Errorf("module %s (imported by %s): %w", name, strings.Join(from, " -> "), err)
		}
		m, err := parseModule(name, string(src))
		if err != nil {
			return err
		}
		mods[name] = m
		for _, dep := range m.deps {
			if providedModules[dep] != "" {
				continue
			}
			if err := visit(dep, append(from, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, m)
		return nil
	}
	if err := visit(entry, nil); err != nil {
		return "", err
	}

	provided := map[string]map[string]bool{}
	for name, src := range providedModules {
		provided[name] = map[string]bool{}
		for _, g := range providedFunc.FindAllStringSubmatch(src, -1) {
			provided[name][g[1]] = true
		}
	}
	declaredIn := map[string]string{}
	var b strings.Builder
	for _, m := range order {
		for _, d := range m.decls {
			if other, ok := declaredIn[d]; ok {
				return "", fmt.Errorf("%s and %s both declare %q: in the page's one scope the names must differ", other, m.name, d)
			}
			for pname, names := range provided {
				if names[d] {
					return "", fmt.Errorf("%s declares %q, which %s provides to the page", m.name, d, pname)
				}
			}
			declaredIn[d] = m.name
		}
		for dep, names := range m.imports {
			exports := provided[dep]
			if exports == nil {
				exports = mods[dep].exports
			}
			for _, n := range names {
				if !exports[n] {
					return "", fmt.Errorf("%s imports %q from %s, which does not export it", m.name, n, dep)
				}
			}
		}
		fmt.Fprintf(&b, "// ---- %s ----\n", m.name)
		for _, line := range m.lines {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String(), nil
}

// appScript is the viewer's bundled script, made once.
var appScript = sync.OnceValues(func() (string, error) {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return "", err
	}
	return bundleModules(sub, "app.js")
})
