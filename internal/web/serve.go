package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gpumem/gpumem/internal/demo"
)

// Serve serves the viewer on ln until ctx ends or one of loads (the files
// given on the command line, as Load returned them) fails, whose error it
// returns then: a file that fails to decode ends the command, as in every
// other subcommand. loaded is called once every load has succeeded.
func (s *Server) Serve(ctx context.Context, ln net.Listener, loads []<-chan error, loaded func()) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	var loadErr error
	var errMu sync.Mutex
	loadCtx, failed := context.WithCancel(ctx)
	defer failed()
	go func() {
		for _, done := range loads {
			select {
			case err := <-done:
				if err != nil {
					errMu.Lock()
					loadErr = err
					errMu.Unlock()
					failed()
					return
				}
			case <-loadCtx.Done():
				return
			}
		}
		loaded()
	}()
	go func() {
		<-loadCtx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	errMu.Lock()
	defer errMu.Unlock()
	return loadErr
}

// Announcement is what gpumem serve says once it listens: the viewer's
// URL (the one the browser opens) and the line that says what it serves.
type Announcement struct {
	URL, Serving string
}

// Announce makes serve's announcement for a listener bound to bound:
// beyond loopback the URL names the first of allowHosts (the name clients
// use); with only watch logs it opens their page.
func Announce(bound string, allowHosts []string, onLoopback bool, snapshots, logs int) Announcement {
	url := "http://" + bound + "/"
	if len(allowHosts) > 0 && !onLoopback {
		_, port, _ := net.SplitHostPort(bound)
		url = "http://" + net.JoinHostPort(allowHosts[0], port) + "/"
	}
	if logs > 0 && snapshots == 0 {
		url += "watch.html"
		return Announcement{url, fmt.Sprintf("gpumem: serving %d watch log(s) at %s (Ctrl-C to stop)\n", logs, url)}
	}
	more := "" // logs given beside snapshots are on their own page
	if logs > 0 {
		more = fmt.Sprintf(", %d watch log(s) at %swatch.html", logs, url)
	}
	return Announcement{url, fmt.Sprintf("gpumem: serving %d snapshot(s) at %s%s (Ctrl-C to stop)\n", snapshots, url, more)}
}

// Loading is the line serve prints while n files decode: the page opens
// meanwhile (it shows their progress), and the serving line follows once
// they have decoded.
func (a Announcement) Loading(n int) string {
	return fmt.Sprintf("gpumem: loading %d snapshot(s); the viewer is at %s (Ctrl-C to stop)\n", n, a.URL)
}

// AddDemo adds the embedded demo snapshot, under the name it gives itself
// ("demo" when it gives none).
func (s *Server) AddDemo() error {
	snap, err := demo.Open()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	name := snap.Source.Name
	if name == "" {
		name = "demo"
	}
	s.Add(name, snap)
	return nil
}
