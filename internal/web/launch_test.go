package web

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

func TestParseMaxUpload(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"4GiB", 4 << 30}, {"512MiB", 512 << 20}, {"100MB", 100 << 20}, {"1048576", 1 << 20}, {"1.5 GiB", 3 << 29}, {"2K", 2048},
	} {
		if got, err := ParseMaxUpload(tc.in); err != nil || got != tc.want {
			t.Errorf("ParseMaxUpload(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "x", "-1GiB", "0", "GiB", "2TiB"} {
		if _, err := ParseMaxUpload(bad); err == nil {
			t.Errorf("ParseMaxUpload(%q) succeeded", bad)
		}
	}
}

// lines receives what Launch prints, one Fprint at a time, from its
// goroutines.
type lines chan string

func (l lines) Write(p []byte) (int, error) { l <- string(p); return len(p), nil }

// TestLaunch: serve's start. The files decode through Open under their
// base names ("stdin" for -), serve says it loads them and then that it
// serves them; a file that fails ends the launch with its error.
func TestLaunch(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	failed := errors.New("bad.pickle: truncated")
	for _, tc := range []struct {
		name    string
		files   []string
		demo    bool
		want    error
		names   []string
		serving string
	}{
		{"two files", []string{"dir/a.pickle", "-"}, false, nil, []string{"a.pickle", "stdin"}, "serving 2 snapshot(s)"},
		{"demo only", nil, true, nil, []string{"demo"}, "serving 1 snapshot(s)"},
		{"a file fails", []string{"ok.pickle", "bad.pickle"}, false, failed, []string{"ok.pickle", "bad.pickle"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := New(Options{})
			stdout, stderr := make(lines, 8), make(lines, 8)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- srv.Launch(ctx, Launch{
					Files: tc.files, Demo: tc.demo, Addr: "127.0.0.1:0", NoBrowser: true, Stdout: stdout, Stderr: stderr,
					Open: func(path string, opt *snapshot.Options) (*snapshot.Snapshot, error) {
						if strings.HasPrefix(path, "bad") {
							return nil, failed
						}
						return s, nil
					},
				})
			}()
			var said []string
			if tc.want == nil {
				for !strings.Contains(strings.Join(said, ""), tc.serving) {
					select {
					case l := <-stdout:
						said = append(said, l)
					case <-time.After(10 * time.Second):
						t.Fatalf("no %q line: %q", tc.serving, said)
					}
				}
				cancel()
			}
			if err := <-done; err != tc.want {
				t.Errorf("Launch: %v, want %v", err, tc.want)
			}
			var names []string
			for _, f := range srv.fileList() {
				names = append(names, f.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.names, ",") {
				t.Errorf("files %v, want %v", names, tc.names)
			}
			for len(stdout) > 0 {
				said = append(said, <-stdout)
			}
			if len(tc.files) > 0 && !strings.HasPrefix(strings.Join(said, ""), "gpumem: loading") || len(stderr) > 0 {
				t.Errorf("stdout %q, stderr has %d lines", said, len(stderr))
			}
		})
	}
}
