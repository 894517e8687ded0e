// Package python holds gpumem's Python module, the recorder that runs
// inside a PyTorch job (python/gpumem/), for the binary ("gpumem record"
// writes it beside its sitecustomize) and for the wheel (pip installs it as
// "import gpumem"): one implementation, embedded in both.
package python

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed gpumem/*.py
var module embed.FS

// File is one file of the module, its path relative to site-packages
// (gpumem/__init__.py).
type File struct {
	Path string
	Data []byte
}

// Module returns the module's files in path order, with gpumem/_version.py
// added, which gives gpumem.__version__ the binary's version.
func Module(version string) []File {
	var files []File
	fs.WalkDir(module, "gpumem", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := module.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, File{p, b})
		return nil
	})
	files = append(files, File{"gpumem/_version.py", []byte("# Written by gpumem's build: the version of the gpumem binary this module ships with.\nversion = " + pyString(version) + "\n")})
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files
}

// pyString quotes s as a Python string literal (versions are plain ASCII;
// anything else is escaped).
func pyString(s string) string {
	b := []byte{'"'}
	for _, c := range []byte(s) {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c >= 0x7f:
			b = append(b, []byte(`\x`)...)
			b = append(b, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
