package units

import (
	_ "embed"
	"strings"
)

// SizesJS is sizes.js, the JavaScript mirror of Human, HumanSigned and
// Python as an ES module: the viewer serves it and the flamegraph SVG
// inlines it (ScriptJS), so that no page carries a copy of these rules.
//
//go:embed sizes.js
var SizesJS string

// ScriptJS is SizesJS for a classic <script> (a standalone SVG cannot load
// a module): the same functions, with their exports dropped.
func ScriptJS() string { return strings.ReplaceAll(SizesJS, "\nexport function ", "\nfunction ") }
