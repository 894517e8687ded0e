// Package release builds gpumem's release files reproducibly: one static
// binary per platform, packed as a .tar.gz or .zip archive and as a Python
// wheel that puts the binary on pip's PATH, plus SHA256SUMS.
package release

import (
	"fmt"
	"regexp"
	"time"
)

// Target is one platform a release ships for.
type Target struct {
	OS, Arch string // GOOS, GOARCH
	// Wheel is the wheel's platform tag. Linux: the binary is static, so
	// the oldest common manylinux tag fits. macOS: Go 1.26 binaries need
	// macOS 12 (CheckBinary compares it with the binary's own minimum).
	Wheel string
}

// Targets are the platforms of a release, in the order they are built.
var Targets = []Target{
	{"linux", "amd64", "manylinux_2_17_x86_64"},
	{"linux", "arm64", "manylinux_2_17_aarch64"},
	{"darwin", "amd64", "macosx_12_0_x86_64"},
	{"darwin", "arm64", "macosx_12_0_arm64"},
	{"windows", "amd64", "win_amd64"},
	{"windows", "arm64", "win_arm64"},
}

func (t Target) String() string { return t.OS + "/" + t.Arch }

// Exe is the binary's file name on the target.
func (t Target) Exe() string {
	if t.OS == "windows" {
		return "gpumem.exe"
	}
	return "gpumem"
}

// LookupTarget returns the release target for GOOS/GOARCH.
func LookupTarget(goos, goarch string) (Target, bool) {
	for _, t := range Targets {
		if t.OS == goos && t.Arch == goarch {
			return t, true
		}
	}
	return Target{}, false
}

// Stamp is what a release build records in the binary (see
// internal/version) and in its archives.
type Stamp struct {
	Version string    // "0.1.0": a canonical PEP 440 version, so the wheel's name and METADATA use it unchanged
	Commit  string    // the commit built
	Date    time.Time // the commit's time: the build date and every file's mtime, never the clock
}

// pep440 accepts canonical public versions (no leading zeros, no "v", no
// local part): "1.2.3", "0.4.0rc1", "2.0.post1", "1.0.dev3". Being
// canonical means the same string is valid for the wheel's file name,
// its METADATA and "gpumem version".
var pep440 = regexp.MustCompile(`^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?$`)

// CheckVersion says whether v can name a release.
func CheckVersion(v string) error {
	if !pep440.MatchString(v) {
		return fmt.Errorf("version %q is not a canonical PEP 440 version such as 1.2.3, 1.2.3rc1, 1.2.3.post1 or 1.2.3.dev1", v)
	}
	return nil
}
