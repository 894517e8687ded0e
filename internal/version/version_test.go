package version

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/gpumem/gpumem", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-11-25T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	installed := &debug.BuildInfo{GoVersion: "go1.99.2", Main: debug.Module{Version: "v0.3.0"}}
	for _, tc := range []struct {
		name          string
		v, c, d       string
		bi            *debug.BuildInfo
		wantV, wantC  string
		wantD, wantGo string
	}{
		{"release ldflags win over build info", "0.1.0", "fff", "2026-01-02T03:04:05Z", vcs, "0.1.0", "fff", "2026-01-02T03:04:05Z", "go1.99.1"},
		{"go build in a dirty clone", "", "", "", vcs, "devel", "abc123+dirty", "2026-11-25T10:00:00Z", "go1.99.1"},
		{"go install module@version", "", "", "", installed, "v0.3.0", "unknown", "unknown", "go1.99.2"},
		{"no build info", "", "", "", nil, "devel", "unknown", "unknown", runtime.Version()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := get(tc.v, tc.c, tc.d, tc.bi)
			if in.Version != tc.wantV || in.Commit != tc.wantC || in.Date != tc.wantD || in.Go != tc.wantGo {
				t.Errorf("got %+v, want version %q commit %q date %q go %q", in, tc.wantV, tc.wantC, tc.wantD, tc.wantGo)
			}
			if in.OS != runtime.GOOS || in.Arch != runtime.GOARCH {
				t.Errorf("platform %s/%s, want %s/%s", in.OS, in.Arch, runtime.GOOS, runtime.GOARCH)
			}
		})
	}
}

func TestString(t *testing.T) {
	in := Info{Version: "0.1.0", Commit: "fff", Date: "2026-01-02T03:04:05Z", Go: "go1.26.8", OS: "linux", Arch: "arm64"}
	want := "gpumem 0.1.0\ncommit      fff\nbuild date  2026-01-02T03:04:05Z\ngo          go1.26.8\nplatform    linux/arm64\n"
	if got := in.String(); got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	if !strings.HasPrefix(Get().String(), "gpumem ") {
		t.Errorf("Get().String() does not start with the program name: %q", Get().String())
	}
}
