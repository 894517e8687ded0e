package release

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem/python"
)

// Project facts written into every wheel's METADATA.
const (
	summary        = "Offline analysis of PyTorch CUDA memory snapshots: one native binary, no PyTorch needed"
	homepage       = "https://github.com/gpumem/gpumem"
	requiresPython = ">=3.8" // the recorder module (python/gpumem) uses nothing newer
	license        = "MIT"
)

// WheelName is the wheel file's name: py3-none because the binary uses no
// Python at all, so only the platform tag narrows where it installs.
func WheelName(version string, t Target) string {
	return fmt.Sprintf("gpumem-%s-py3-none-%s.whl", version, t.Wheel)
}

// Wheel returns the wheel for t: the binary in gpumem-VERSION.data/scripts/
// (pip installs it into the environment's bin/ or Scripts/, as ruff's and
// uv's wheels do), the Python module (import gpumem: the recorder, the same
// files gpumem record injects, with gpumem.__version__ the stamp's), then
// the .dist-info with the licence, METADATA (the README as its
// description), WHEEL and, last, RECORD.
func Wheel(t Target, s Stamp, bin, readme, licenseText []byte) ([]byte, error) {
	data := "gpumem-" + s.Version + ".data"
	info := "gpumem-" + s.Version + ".dist-info"
	files := []File{{data + "/scripts/" + t.Exe(), 0o755, bin}}
	for _, f := range python.Module(s.Version) {
		files = append(files, File{f.Path, 0o644, f.Data})
	}
	files = append(files, []File{
		{info + "/licenses/LICENSE", 0o644, licenseText},
		{info + "/METADATA", 0o644, metadata(s.Version, readme)},
		{info + "/WHEEL", 0o644, wheelFile(s.Version, t)},
	}...)
	files = append(files, File{info + "/RECORD", 0o644, record(files, info+"/RECORD")})
	var b bytes.Buffer
	if err := WriteZip(&b, files, s.Date); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// metadata is the core metadata (version 2.4: License-Expression and
// License-File).
func metadata(version string, readme []byte) []byte {
	var b bytes.Buffer
	for _, kv := range [][2]string{
		{"Metadata-Version", "2.4"},
		{"Name", "gpumem"},
		{"Version", version},
		{"Summary", summary},
		{"Keywords", "pytorch,cuda,memory,snapshot,profiling"},
		{"Classifier", "Environment :: Console"},
		{"Classifier", "Environment :: GPU :: NVIDIA CUDA"},
		{"Classifier", "Intended Audience :: Developers"},
		{"Classifier", "Intended Audience :: Science/Research"},
		{"Classifier", "Topic :: Scientific/Engineering :: Artificial Intelligence"},
		{"Classifier", "Topic :: Software Development :: Debuggers"},
		{"License-Expression", license},
		{"License-File", "LICENSE"},
		{"Requires-Python", requiresPython},
		{"Project-URL", "Homepage, " + homepage},
		{"Project-URL", "Source, " + homepage},
		{"Project-URL", "Issues, " + homepage + "/issues"},
		{"Description-Content-Type", "text/markdown; charset=UTF-8"},
	} {
		fmt.Fprintf(&b, "%s: %s\n", kv[0], kv[1])
	}
	b.WriteString("\n")
	b.Write(readme)
	return b.Bytes()
}

func wheelFile(version string, t Target) []byte {
	return fmt.Appendf(nil, "Wheel-Version: 1.0\nGenerator: gpumem-release (%s)\nRoot-Is-Purelib: false\nTag: py3-none-%s\n", version, t.Wheel)
}

// record is the RECORD file: each member's sha256 (urlsafe base64, no
// padding) and size, and RECORD itself with both left empty.
func record(files []File, self string) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	for _, f := range files {
		sum := sha256.Sum256(f.Data)
		w.Write([]string{f.Name, "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]), strconv.Itoa(len(f.Data))})
	}
	w.Write([]string{self, "", ""})
	w.Flush()
	return b.Bytes()
}

// VerifyWheel checks a wheel the way an installer does: every member is
// listed in RECORD with its hash and size, RECORD lists nothing more, and
// the binary in .data/scripts is executable.
func VerifyWheel(whl []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(whl), int64(len(whl)))
	if err != nil {
		return err
	}
	var recordName string
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, ".dist-info/RECORD") {
			recordName = f.Name
		}
	}
	if recordName == "" {
		return fmt.Errorf("no .dist-info/RECORD")
	}
	raw, err := readMember(zr, recordName)
	if err != nil {
		return err
	}
	rows, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		return fmt.Errorf("%s: %v", recordName, err)
	}
	listed := map[string][2]string{}
	for _, r := range rows {
		if len(r) != 3 {
			return fmt.Errorf("%s: row %q has %d fields, want 3", recordName, r, len(r))
		}
		listed[r[0]] = [2]string{r[1], r[2]}
	}
	if h := listed[recordName]; h != [2]string{"", ""} {
		return fmt.Errorf("%s: its own line must have no hash and size, has %q", recordName, h)
	}
	for _, f := range zr.File {
		want, ok := listed[f.Name]
		if !ok {
			return fmt.Errorf("%s is not in RECORD", f.Name)
		}
		delete(listed, f.Name)
		if f.Name == recordName {
			continue
		}
		b, err := readMember(zr, f.Name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		got := [2]string{"sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]), strconv.Itoa(len(b))}
		if got != want {
			return fmt.Errorf("%s: RECORD says %q, the member has %q", f.Name, want, got)
		}
		if strings.Contains(f.Name, ".data/scripts/") && f.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s: not executable (mode %v)", f.Name, f.Mode())
		}
	}
	for name := range listed {
		return fmt.Errorf("RECORD lists %s, which the wheel does not hold", name)
	}
	return nil
}

func readMember(zr *zip.Reader, name string) ([]byte, error) {
	r, err := zr.Open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}
