package web

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
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
