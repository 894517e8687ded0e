package web

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/gpumem/gpumem/internal/loopback"
	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// ParseMaxUpload reads --max-upload: a positive size of at most 1 TiB.
func ParseMaxUpload(s string) (int64, error) {
	n, err := units.Parse(s)
	if err != nil {
		return 0, err
	}
	if n == 0 || n > units.TiB {
		return 0, fmt.Errorf("size %q out of range (want 1 byte to 1TiB)", s)
	}
	return int64(n), nil
}

// OpenBrowser starts the platform's URL opener; failing is not an error
// because the URL is printed anyway: it is said on stderr.
func OpenBrowser(stderr io.Writer, url string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		if _, err := exec.LookPath("xdg-open"); err != nil {
			fmt.Fprintln(stderr, "gpumem: no xdg-open; open the URL above in a browser")
			return
		}
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "gpumem: could not open a browser: %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

// Launch is what gpumem serve starts the viewer with.
type Launch struct {
	Files      []string // snapshots and watch logs, as given ("-": standard input)
	Demo       bool     // also the embedded demo snapshot
	Addr       string   // host:port to listen on (port 0: a free one)
	AllowHosts []string // the host names clients use beyond loopback
	NoBrowser  bool
	// Open decodes one of Files (Load fills opt's progress); the caller
	// chooses its bounds and the process's GC setting.
	Open           func(path string, opt *snapshot.Options) (*snapshot.Snapshot, error)
	Stdout, Stderr io.Writer
}

// Launch serves the command line's files: watch logs on their page, the
// demo, and each snapshot decoding in the background while the page
// opens. It listens on l.Addr, says where (and that it listens beyond
// loopback), opens a browser, and serves until ctx ends or a file fails
// to decode, whose error it returns.
func (s *Server) Launch(ctx context.Context, l Launch) error {
	// gpumem watch logs are drawn by a page of their own.
	files, nlogs, err := s.AddWatchLogs(l.Files)
	if err != nil {
		return err
	}
	if l.Demo {
		if err := s.AddDemo(); err != nil {
			return err
		}
	}
	var loads []<-chan error
	for _, path := range files {
		name := filepath.Base(path)
		if path == "-" {
			name = "stdin"
		}
		_, done := s.Load(name, func(opt *snapshot.Options) (*snapshot.Snapshot, error) { return l.Open(path, opt) })
		loads = append(loads, done)
	}
	s.Warm(0) // the page opens the first file
	ln, err := net.Listen("tcp", l.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", l.Addr, err)
	}
	bound := ln.Addr().String()
	s.SetAddr(bound)
	if !loopback.Addr(ln.Addr()) {
		if len(l.AllowHosts) == 0 { // a host name that is not loopback's
			ln.Close()
			return fmt.Errorf("-http %s listens on %s, beyond loopback: name the host names clients will use with --allow-host", l.Addr, bound)
		}
		fmt.Fprintln(l.Stderr, loopback.Warning("gpumem serve", bound))
	}
	demo := 0
	if l.Demo {
		demo = 1
	}
	ann := Announce(bound, l.AllowHosts, loopback.Addr(ln.Addr()), len(files)+demo, nlogs)
	if len(loads) == 0 {
		fmt.Fprint(l.Stdout, ann.Serving)
	} else {
		// A file that fails ends the command with its error: serve says
		// it serves the files only once they have decoded.
		fmt.Fprint(l.Stdout, ann.Loading(len(loads)))
	}
	if !l.NoBrowser {
		OpenBrowser(l.Stderr, ann.URL)
	}
	return s.Serve(ctx, ln, loads, func() {
		if len(loads) > 0 {
			fmt.Fprint(l.Stdout, ann.Serving)
		}
	})
}
