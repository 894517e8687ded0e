package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"time"

	"github.com/gpumem/gpumem/internal/atomicfile"
	"github.com/gpumem/gpumem/internal/version"
)

// Options says what Release builds and where.
type Options struct {
	Root    string // the module's root: ./cmd/gpumem, README.md, docs/ and LICENSE are read from it
	Dist    string // where the archives, wheels and SHA256SUMS go
	Stamp   Stamp
	Targets []Target
	Log     io.Writer // one line per target
}

// Release builds every target and writes its archive and wheel into
// o.Dist, then SHA256SUMS over all of them. Each binary's header is
// checked against its target, and the one for this machine is run to check
// that "gpumem version" reports the stamp.
func Release(ctx context.Context, o Options) error {
	if err := CheckVersion(o.Stamp.Version); err != nil {
		return err
	}
	readme, err := os.ReadFile(filepath.Join(o.Root, "README.md"))
	if err != nil {
		return err
	}
	licenseText, err := os.ReadFile(filepath.Join(o.Root, "LICENSE"))
	if err != nil {
		return err
	}
	docs, err := Docs(o.Root)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.Dist, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(o.Dist, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var written []string
	for _, t := range o.Targets {
		bin := filepath.Join(tmp, t.OS+"-"+t.Arch, t.Exe())
		if err := Build(ctx, o.Root, t, o.Stamp, bin); err != nil {
			return err
		}
		h, err := CheckBinary(bin, t)
		if err != nil {
			return err
		}
		if t.OS == runtime.GOOS && t.Arch == runtime.GOARCH {
			if err := checkStamp(ctx, bin, o.Stamp); err != nil {
				return err
			}
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		name, arch, err := Archive(t, o.Stamp, b, readme, licenseText, docs)
		if err != nil {
			return err
		}
		whl, err := Wheel(t, o.Stamp, b, readme, licenseText)
		if err != nil {
			return err
		}
		if err := VerifyWheel(whl); err != nil {
			return fmt.Errorf("%s: %v", WheelName(o.Stamp.Version, t), err)
		}
		for _, f := range []File{{Name: name, Data: arch}, {Name: WheelName(o.Stamp.Version, t), Data: whl}} {
			if err := atomicfile.WriteFile(filepath.Join(o.Dist, f.Name), f.Data); err != nil {
				return err
			}
			written = append(written, f.Name)
		}
		if o.Log != nil {
			minOS := ""
			if h.MinOS != "" {
				minOS = ", macOS " + h.MinOS + "+"
			}
			fmt.Fprintf(o.Log, "%-14s %d bytes (header: %s/%s%s)  %s  %s\n", t, len(b), h.OS, h.Arch, minOS, name, WheelName(o.Stamp.Version, t))
		}
	}
	sums, err := SHA256Sums(o.Dist, written)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(o.Dist, "SHA256SUMS"), sums)
}

// Docs reads the manual, root/docs/*.md, as files named docs/NAME.md,
// sorted, for the archives: the README links into it.
func Docs(root string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no manual in %s", filepath.Join(root, "docs"))
	}
	sort.Strings(paths)
	var files []File
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files = append(files, File{"docs/" + filepath.Base(p), 0o644, b})
	}
	return files, nil
}

// Archive returns the release archive for t and its name: a .tar.gz (a
// .zip for Windows) holding one folder gpumem-VERSION-OS-ARCH with the
// binary, README.md, LICENSE and the manual (docs, from Docs) under docs/.
func Archive(t Target, s Stamp, bin, readme, licenseText []byte, docs []File) (name string, data []byte, err error) {
	dir := fmt.Sprintf("gpumem-%s-%s-%s", s.Version, t.OS, t.Arch)
	files := []File{
		{dir + "/", 0o755, nil},
		{dir + "/" + t.Exe(), 0o755, bin},
		{dir + "/LICENSE", 0o644, licenseText},
		{dir + "/README.md", 0o644, readme},
	}
	if len(docs) > 0 {
		files = append(files, File{dir + "/docs/", 0o755, nil})
	}
	for _, d := range docs {
		files = append(files, File{dir + "/" + d.Name, d.Mode, d.Data})
	}
	var b bytes.Buffer
	if t.OS == "windows" {
		name, err = dir+".zip", WriteZip(&b, files, s.Date)
	} else {
		name, err = dir+".tar.gz", WriteTarGz(&b, files, s.Date)
	}
	return name, b.Bytes(), err
}

// SHA256Sums returns "HASH  NAME" lines for the named files in dir, sorted
// by name, in the format "sha256sum -c" reads.
func SHA256Sums(dir string, names []string) ([]byte, error) {
	names = append([]string(nil), names...)
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256(data), n)
	}
	return b.Bytes(), nil
}

// checkStamp runs "BIN version --json" and compares it with s.
func checkStamp(ctx context.Context, bin string, s Stamp) error {
	out, err := exec.CommandContext(ctx, bin, "version", "--json").Output()
	if err != nil {
		return fmt.Errorf("%s version: %v", bin, err)
	}
	var got version.Info
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("%s version --json: %v", bin, err)
	}
	want := version.Info{Version: s.Version, Commit: s.Commit, Date: s.Date.UTC().Format(time.RFC3339)}
	if got.Version != want.Version || got.Commit != want.Commit || got.Date != want.Date {
		return fmt.Errorf("%s version reports %s %s %s, want %s %s %s", bin, got.Version, got.Commit, got.Date, want.Version, want.Commit, want.Date)
	}
	return nil
}
