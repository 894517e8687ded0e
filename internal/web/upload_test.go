package web

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/snapshot"
)

// send makes one request to h with the given headers.
func send(h http.Handler, method, url string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, url, bytes.NewReader(body))
	r.Host = "127.0.0.1:8123"
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestUploadSameOrigin: any page the user visits can POST text/plain to
// the viewer without asking; an upload is taken only from the viewer's
// own page (Origin, Sec-Fetch-Site) with a non-simple content type, and
// nothing is added otherwise.
func TestUploadSameOrigin(t *testing.T) {
	s, h := newTestServer(t)
	snap := demo.Bytes()
	const own = "http://127.0.0.1:8123"
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"other site, text/plain", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, 403},
		{"other site, octet-stream", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/octet-stream"}, 403},
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/octet-stream"}, 403},
		{"same-site other port", map[string]string{"Sec-Fetch-Site": "same-site", "Origin": "http://127.0.0.1:9999", "Content-Type": "application/octet-stream"}, 403},
		{"own page, text/plain", map[string]string{"Origin": own, "Content-Type": "text/plain"}, 415},
		{"own page, form", map[string]string{"Origin": own, "Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"no type", map[string]string{"Origin": own}, 415},
	} {
		w := send(h, "POST", "/api/upload?name=x.pickle", snap, tc.hdr)
		if w.Code != tc.want {
			t.Errorf("%s: status %d (%s), want %d", tc.name, w.Code, w.Body.String(), tc.want)
		}
	}
	if n := len(s.fileList()); n != 1 {
		t.Fatalf("refused uploads added files: %d listed", n)
	}
	ok := map[string]string{"Origin": own, "Sec-Fetch-Site": "same-origin", "Content-Type": "application/octet-stream"}
	if w := send(h, "POST", "/api/upload?name=x.pickle", snap, ok); w.Code != 200 {
		t.Fatalf("own page's upload: %d %s", w.Code, w.Body.String())
	}
	// curl and scripts send no Origin: the content type is enough.
	if w := send(h, "POST", "/api/upload?name=y.pickle", snap, map[string]string{"Content-Type": "application/octet-stream"}); w.Code != 200 {
		t.Fatalf("upload without Origin: %d %s", w.Code, w.Body.String())
	}
}

// TestUploadsCappedAndRemovable: the server keeps at most MaxUploads
// uploads and MaxUploadBytes of them (the oldest go first), and the page
// can close a file; another site cannot.
func TestUploadsCappedAndRemovable(t *testing.T) {
	snap := demo.Bytes()
	s := New(Options{Addr: "127.0.0.1:8123", MaxUploads: 2, MaxUploadBytes: int64(3 * len(snap)), Decode: func(name string, b []byte) (*snapshot.Snapshot, error) {
		return snapshot.DecodeBytes(b, name, nil)
	}})
	s.Add("tiny.pickle", tinySnapshot())
	h := s.Handler()
	ok := map[string]string{"Content-Type": "application/octet-stream"}
	for i := range 4 {
		if w := send(h, "POST", "/api/upload?name=u"+strconv.Itoa(i), snap, ok); w.Code != 200 {
			t.Fatalf("upload %d: %d %s", i, w.Code, w.Body.String())
		}
	}
	names := func() (out []string) {
		for _, f := range s.fileList() {
			out = append(out, f.Name)
		}
		return out
	}
	if got := names(); len(got) != 3 || got[0] != "tiny.pickle" || got[1] != "u2" || got[2] != "u3" {
		t.Errorf("kept %v, want tiny.pickle and the two newest uploads", got)
	}
	if w := get(t, h, "127.0.0.1:8123", "/api/meta?file=1"); w.Code != http.StatusNotFound {
		t.Errorf("dropped upload still answered: %d", w.Code)
	}
	// By size: three uploads fit MaxUploadBytes, a fourth drops one more.
	s.opt.MaxUploads, s.opt.MaxUploadBytes = 10, int64(2*len(snap)+1)
	send(h, "POST", "/api/upload?name=u4", snap, ok)
	if got := names(); len(got) != 3 || got[1] != "u3" || got[2] != "u4" {
		t.Errorf("kept %v, want the two newest uploads within the byte cap", got)
	}
	// Closing: not from another site, and not with a simple request.
	if w := send(h, "DELETE", "/api/files/5", nil, map[string]string{"Origin": "http://evil.example"}); w.Code != 403 {
		t.Errorf("cross-site DELETE: %d", w.Code)
	}
	if w := send(h, "POST", "/api/files/5", nil, nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST to a file: %d", w.Code)
	}
	if w := send(h, "DELETE", "/api/files/5", nil, map[string]string{"Origin": "http://127.0.0.1:8123"}); w.Code != 200 {
		t.Errorf("closing u4: %d %s", w.Code, w.Body.String())
	}
	if got := names(); len(got) != 2 || got[1] != "u3" {
		t.Errorf("after closing u4: %v", got)
	}
	if w := send(h, "DELETE", "/api/files/5", nil, nil); w.Code != http.StatusNotFound {
		t.Errorf("closing it again: %d", w.Code)
	}
	if w := get(t, h, "127.0.0.1:8123", "/api/meta?file=5"); w.Code != http.StatusNotFound {
		t.Errorf("closed file still answered: %d", w.Code)
	}
}

// TestHostCheckBeyondLoopback: bound to 0.0.0.0, the server answers the
// names in AllowHosts at its port, and the loopback names only from
// loopback clients (a machine elsewhere sending Host: localhost is not
// this machine's browser).
func TestHostCheckBeyondLoopback(t *testing.T) {
	s := New(Options{Addr: "0.0.0.0:8123", AllowHosts: []string{"GPUBox.lan"}})
	s.Add("tiny.pickle", tinySnapshot())
	h := s.Handler()
	for _, tc := range []struct {
		host, remote string
		want         int
	}{
		{"localhost:8123", "192.0.2.7:5555", 403},
		{"127.0.0.1:8123", "192.0.2.7:5555", 403},
		{"localhost:8123", "127.0.0.1:5555", 200},
		{"[::1]:8123", "[::1]:5555", 200},
		{"gpubox.lan:8123", "192.0.2.7:5555", 200},
		{"gpubox.lan", "192.0.2.7:5555", 200},
		{"gpubox.lan:9999", "192.0.2.7:5555", 403},
		{"evil.example:8123", "192.0.2.7:5555", 403},
		{"evil.example:8123", "127.0.0.1:5555", 403},
	} {
		r := httptest.NewRequest("GET", "/api/files", nil)
		r.Host, r.RemoteAddr = tc.host, tc.remote
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("Host %s from %s: %d, want %d", tc.host, tc.remote, w.Code, tc.want)
		}
	}
}
