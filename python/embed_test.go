package python

import (
	"os"
	"strings"
	"testing"
)

// TestModule: the embedded files are the module's source as it is in the
// tree, plus _version.py with the version quoted for Python.
func TestModule(t *testing.T) {
	files := Module(`1.2.3"x\`)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "gpumem/__init__.py gpumem/_version.py" {
		t.Fatalf("files %q", paths)
	}
	src, err := os.ReadFile("gpumem/__init__.py")
	if err != nil || string(files[0].Data) != string(src) {
		t.Errorf("gpumem/__init__.py differs from the tree's (%v)", err)
	}
	if v := string(files[1].Data); !strings.HasSuffix(v, "\nversion = \"1.2.3\\\"x\\\\\"\n") {
		t.Errorf("_version.py: %q", v)
	}
}
