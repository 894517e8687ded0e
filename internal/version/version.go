// Package version says which gpumem this binary is: the release version,
// commit and build date stamped in by scripts/release.sh, or what the Go
// toolchain recorded when it was built some other way.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the release build with
// -ldflags "-X github.com/gpumem/gpumem/internal/version.version=0.1.0 ...";
// empty in a plain "go build", where Get falls back to the build info.
var (
	version string
	commit  string
	date    string // RFC 3339, UTC: the commit's time, so rebuilding gives the same binary
)

// Info is what "gpumem version" prints.
type Info struct {
	Version string `json:"version"` // "0.1.0" for a release, a module version or "devel" otherwise
	Commit  string `json:"commit"`  // full hash, "+dirty" appended when the tree had changes; "unknown" when not recorded
	Date    string `json:"date"`    // RFC 3339 commit time; "unknown" when not recorded
	Go      string `json:"go"`      // toolchain that built the binary
	OS      string `json:"os"`
	Arch    string `json:"arch"`
}

// Get returns this binary's version information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(version, commit, date, bi)
}

// get fills Info from the link-time values, falling back to the build
// info for each one that is empty: "go install ...@v0.1.0" records the
// module version, and "go build" in a clone records the VCS revision and
// time (unless -buildvcs=false).
func get(v, c, d string, bi *debug.BuildInfo) Info {
	in := Info{Version: v, Commit: c, Date: d, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi != nil {
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		var rev, when string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if in.Commit == "" && rev != "" {
			in.Commit = rev
			if modified {
				in.Commit += "+dirty"
			}
		}
		if in.Date == "" {
			in.Date = when
		}
	}
	if in.Version == "" {
		in.Version = "devel"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	if in.Date == "" {
		in.Date = "unknown"
	}
	return in
}

// String is the human-readable form: the version on the first line, as
// "gpumem --version" conventionally prints, then one fact per line.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "gpumem %s\n", in.Version)
	fmt.Fprintf(&b, "commit      %s\n", in.Commit)
	fmt.Fprintf(&b, "build date  %s\n", in.Date)
	fmt.Fprintf(&b, "go          %s\n", in.Go)
	fmt.Fprintf(&b, "platform    %s/%s\n", in.OS, in.Arch)
	return b.String()
}
