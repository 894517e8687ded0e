package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/atomicfile"
	"github.com/gpumem/gpumem/internal/corpus"
)

var testStamp = Stamp{Version: "9.8.7rc1", Commit: "0123456789abcdef0123456789abcdef01234567", Date: time.Date(2026, 11, 25, 14, 3, 22, 0, time.UTC)}

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{
		{"0.1.0", true}, {"1.2.3rc1", true}, {"1.0.post2", true}, {"2.0.dev3", true}, {"10", true},
		{"v0.1.0", false}, {"01.2", false}, {"1.2-rc1", false}, {"1.2+local", false}, {"", false}, {"1..2", false}, {"1.2/../x", false},
	} {
		if err := CheckVersion(tc.v); (err == nil) != tc.ok {
			t.Errorf("CheckVersion(%q) = %v, want ok=%v", tc.v, err, tc.ok)
		}
	}
}

func TestLdflags(t *testing.T) {
	want := "-s -w -buildid= -X github.com/gpumem/gpumem/internal/version.version=9.8.7rc1" +
		" -X github.com/gpumem/gpumem/internal/version.commit=0123456789abcdef0123456789abcdef01234567" +
		" -X github.com/gpumem/gpumem/internal/version.date=2026-11-25T14:03:22Z"
	if got := testStamp.Ldflags(); got != want {
		t.Errorf("Ldflags() =\n%s\nwant\n%s", got, want)
	}
}

// TestWheel checks every target's wheel as pip reads it: member names and
// order, modes, mtimes, RECORD, WHEEL's tag and METADATA; and that writing
// it twice gives the same bytes.
func TestWheel(t *testing.T) {
	bin := []byte("\x7fELF not really a binary")
	for _, tg := range Targets {
		t.Run(tg.Wheel, func(t *testing.T) {
			whl, err := Wheel(tg, testStamp, bin, []byte("# gpumem\nreadme\n"), []byte("MIT License\n"))
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Wheel(tg, testStamp, bin, []byte("# gpumem\nreadme\n"), []byte("MIT License\n"))
			if !bytes.Equal(whl, again) {
				t.Error("two writes of the same wheel differ")
			}
			if err := VerifyWheel(whl); err != nil {
				t.Fatal(err)
			}
			zr, err := zip.NewReader(bytes.NewReader(whl), int64(len(whl)))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				"gpumem-9.8.7rc1.data/scripts/" + tg.Exe(),
				"gpumem/__init__.py",
				"gpumem/_version.py",
				"gpumem-9.8.7rc1.dist-info/licenses/LICENSE",
				"gpumem-9.8.7rc1.dist-info/METADATA",
				"gpumem-9.8.7rc1.dist-info/WHEEL",
				"gpumem-9.8.7rc1.dist-info/RECORD",
			}
			var got []string
			for i, f := range zr.File {
				got = append(got, f.Name)
				wantMode := fs.FileMode(0o644)
				if i == 0 {
					wantMode = 0o755
				}
				if f.Mode() != wantMode || !f.Modified.Equal(testStamp.Date) {
					t.Errorf("%s: mode %v mtime %v, want %v %v", f.Name, f.Mode(), f.Modified, wantMode, testStamp.Date)
				}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("members\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if v := member(t, zr, "gpumem/_version.py"); !strings.HasSuffix(v, "\nversion = \"9.8.7rc1\"\n") {
				t.Errorf("gpumem/_version.py:\n%s", v)
			}
			wheel := member(t, zr, want[5])
			if wheel != "Wheel-Version: 1.0\nGenerator: gpumem-release (9.8.7rc1)\nRoot-Is-Purelib: false\nTag: py3-none-"+tg.Wheel+"\n" {
				t.Errorf("WHEEL:\n%s", wheel)
			}
			meta := member(t, zr, want[4])
			for _, line := range []string{"Metadata-Version: 2.4\n", "Name: gpumem\n", "Version: 9.8.7rc1\n", "Summary: Offline analysis",
				"License-Expression: MIT\n", "License-File: LICENSE\n", "Requires-Python: >=3.8\n",
				"Project-URL: Source, https://github.com/gpumem/gpumem\n", "\n\n# gpumem\nreadme\n"} {
				if !strings.Contains(meta, line) {
					t.Errorf("METADATA lacks %q:\n%s", line, meta)
				}
			}
			if name := WheelName("9.8.7rc1", tg); name != "gpumem-9.8.7rc1-py3-none-"+tg.Wheel+".whl" {
				t.Errorf("WheelName = %s", name)
			}
		})
	}
}

func member(t *testing.T, zr *zip.Reader, name string) string {
	t.Helper()
	b, err := readMember(zr, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVerifyWheelRejects makes sure the RECORD check can fail.
func TestVerifyWheelRejects(t *testing.T) {
	bin := File{"gpumem-1.0.data/scripts/gpumem", 0o755, []byte("binary")}
	meta := File{"gpumem-1.0.dist-info/METADATA", 0o644, []byte("Name: gpumem\n")}
	const rec = "gpumem-1.0.dist-info/RECORD"
	good := record([]File{bin, meta}, rec)
	for _, tc := range []struct {
		name  string
		files []File
		want  string
	}{
		{"good", []File{bin, meta, {rec, 0o644, good}}, ""},
		{"changed member", []File{{bin.Name, 0o755, []byte("binarz")}, meta, {rec, 0o644, good}}, "RECORD says"},
		{"unlisted member", []File{bin, meta, {"extra", 0o644, nil}, {rec, 0o644, good}}, "extra is not in RECORD"},
		{"listed but absent", []File{bin, {rec, 0o644, good}}, "which the wheel does not hold"},
		{"not executable", []File{{bin.Name, 0o644, bin.Data}, meta, {rec, 0o644, good}}, "not executable"},
		{"RECORD hashes itself", []File{bin, meta, {rec, 0o644, append(record([]File{bin, meta}, "x"), rec+",sha256=x,1\n"...)}}, "own line"},
		{"no RECORD", []File{bin, meta}, "no .dist-info/RECORD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteZip(&b, tc.files, testStamp.Date); err != nil {
				t.Fatal(err)
			}
			err := VerifyWheel(b.Bytes())
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("VerifyWheel = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestArchive reads back the .tar.gz and .zip archives: one folder with
// the binary (executable), LICENSE, README.md and the manual in docs/,
// every mtime the commit's, and the same bytes when written twice.
func TestArchive(t *testing.T) {
	docs := []File{{"docs/README.md", 0o644, []byte("index")}, {"docs/peak-oom.md", 0o644, []byte("peak")}}
	for _, tg := range []Target{Targets[0], Targets[4]} {
		t.Run(tg.String(), func(t *testing.T) {
			name, data, err := Archive(tg, testStamp, []byte("bin"), []byte("readme"), []byte("license"), docs)
			if err != nil {
				t.Fatal(err)
			}
			_, again, _ := Archive(tg, testStamp, []byte("bin"), []byte("readme"), []byte("license"), docs)
			if !bytes.Equal(data, again) {
				t.Error("two writes of the same archive differ")
			}
			dir := "gpumem-9.8.7rc1-" + tg.OS + "-" + tg.Arch
			type entry struct {
				mode fs.FileMode
				data string
			}
			want := map[string]entry{
				dir + "/":                 {fs.ModeDir | 0o755, ""},
				dir + "/" + tg.Exe():      {0o755, "bin"},
				dir + "/LICENSE":          {0o644, "license"},
				dir + "/README.md":        {0o644, "readme"},
				dir + "/docs/":            {fs.ModeDir | 0o755, ""},
				dir + "/docs/README.md":   {0o644, "index"},
				dir + "/docs/peak-oom.md": {0o644, "peak"},
			}
			got := map[string]entry{}
			var mtimes []time.Time
			if tg.OS == "windows" {
				if name != dir+".zip" {
					t.Errorf("name %s", name)
				}
				zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range zr.File {
					var b string
					if !f.Mode().IsDir() {
						b = member(t, zr, f.Name)
					}
					got[f.Name] = entry{f.Mode(), b}
					mtimes = append(mtimes, f.Modified)
				}
			} else {
				if name != dir+".tar.gz" {
					t.Errorf("name %s", name)
				}
				gz, err := gzip.NewReader(bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				if !gz.ModTime.IsZero() || gz.Name != "" {
					t.Errorf("gzip header records %v %q", gz.ModTime, gz.Name)
				}
				tr := tar.NewReader(gz)
				for {
					h, err := tr.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(tr)
					got[h.Name] = entry{h.FileInfo().Mode(), string(b)}
					mtimes = append(mtimes, h.ModTime)
					if h.Uid != 0 || h.Gid != 0 || h.Uname != "root" {
						t.Errorf("%s: owner %d:%d %s", h.Name, h.Uid, h.Gid, h.Uname)
					}
				}
			}
			if len(got) != len(want) {
				t.Errorf("archive holds %v, want %v", got, want)
			}
			for n, e := range want {
				if got[n] != e {
					t.Errorf("%s: %v, want %v", n, got[n], e)
				}
			}
			for _, m := range mtimes {
				if !m.Equal(testStamp.Date) {
					t.Errorf("mtime %v, want %v", m, testStamp.Date)
				}
			}
		})
	}
}

func TestSHA256Sums(t *testing.T) {
	dir := t.TempDir()
	for n, s := range map[string]string{"b.whl": "abc", "a.tar.gz": ""} {
		if err := atomicfile.WriteFile(filepath.Join(dir, n), []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := SHA256Sums(dir, []string{"b.whl", "a.tar.gz"})
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of "" and of "abc", as sha256sum prints them.
	want := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a.tar.gz\n" +
		"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  b.whl\n"
	if string(got) != want {
		t.Errorf("SHA256SUMS:\n%s\nwant\n%s", got, want)
	}
	if _, err := SHA256Sums(dir, []string{"missing"}); err == nil {
		t.Error("no error for a missing file")
	}
}

// TestInspectHost reads this test binary's own header.
func TestInspectHost(t *testing.T) {
	tg, ok := LookupTarget(runtime.GOOS, runtime.GOARCH)
	if !ok {
		t.Skipf("%s/%s is not a release target", runtime.GOOS, runtime.GOARCH)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Inspect(exe)
	if err != nil || h.OS != tg.OS || h.Arch != tg.Arch {
		t.Errorf("Inspect(test binary) = %+v, %v; want %s", h, err, tg)
	}
	if _, err := Inspect("release_test.go"); err == nil {
		t.Error("a Go source file passed as an executable")
	}
	other := Targets[1]
	if other == tg {
		other = Targets[0]
	}
	if _, err := CheckBinary(exe, other); err == nil {
		t.Errorf("the %s test binary passed as %s", tg, other)
	}
}

func TestMacOSTagCovers(t *testing.T) {
	for _, tc := range []struct {
		minOS, tag string
		ok         bool
	}{
		{"12.0", "macosx_12_0_x86_64", true},
		{"11.0", "macosx_12_0_arm64", true},
		{"12.0", "macosx_11_0_arm64", false}, // Go 1.26 binaries under the tag the issue first named
		{"11.3", "macosx_11_0_arm64", false},
		{"", "macosx_12_0_arm64", false},
		{"12.0", "win_amd64", false},
	} {
		if err := macOSTagCovers(tc.minOS, tc.tag); (err == nil) != tc.ok {
			t.Errorf("macOSTagCovers(%q, %q) = %v, want ok=%v", tc.minOS, tc.tag, err, tc.ok)
		}
	}
}

// TestDocsInArchive: the archives carry every page of the manual, and
// every relative link in README.md and docs/ leads to a file of the
// repository (a page on corpus.PendingPages excepted until it lands).
func TestDocsInArchive(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := Docs(root)
	if err != nil {
		t.Fatal(err)
	}
	pages := corpus.Docs(t)
	carried := map[string]bool{}
	for _, d := range docs {
		carried[d.Name] = true
	}
	for name := range pages {
		if strings.HasPrefix(name, "docs/") && !carried[name] {
			t.Errorf("%s is not in the archives", name)
		}
	}
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for name, text := range pages {
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			rel := path.Clean(path.Join(path.Dir(name), target))
			if slices.Contains(corpus.PendingPages, rel) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
				t.Errorf("%s links to %s, which is not there", name, target)
			}
		}
	}
}
