package gpumon

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gpumem/gpumem/internal/loopback"
)

// servePrometheus listens on addr (":9400" means 127.0.0.1:9400) and
// serves /metrics until the returned stop is called.
func servePrometheus(stderr io.Writer, addr string, st *watchState) (func(), error) {
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--prom: %v", err)
	}
	host, _ := os.Hostname()
	onLoopback := loopback.Addr(ln.Addr())
	if !onLoopback {
		// Prometheus scrapes from elsewhere name this machine as they
		// please: any Host is answered, but the user is told.
		fmt.Fprintln(stderr, loopback.Warning("gpumem watch --prom", ln.Addr().String()))
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		// A loopback listener answers only loopback names, so a web page
		// cannot read it through DNS rebinding.
		if onLoopback && !loopback.Host(r.Host) {
			http.Error(w, "bad Host", http.StatusForbidden)
			return
		}
		st.mu.Lock()
		last, prev := st.last, st.prev
		st.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = WritePrometheus(w, host, last, prev)
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Fprintf(stderr, "gpumem watch: Prometheus metrics at http://%s/metrics\n", ln.Addr())
	return func() { _ = hs.Close() }, nil
}
