package web

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
)

// TestFlameEndpoint: the state view's flamegraph of a moment is an SVG
// whose root is what is live then.
func TestFlameEndpoint(t *testing.T) {
	snap, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Addr: "127.0.0.1:8123"})
	s.Add("demo", snap)
	h := s.Handler()
	for _, tc := range []struct {
		idx  string
		code int
	}{{"-1", 200}, {"900", 200}, {"", 200}, {"999999", 400}} {
		w := get(t, h, "127.0.0.1:8123", "/api/flame?file=0&view=state&idx="+tc.idx)
		if w.Code != tc.code {
			t.Fatalf("idx %q: status %d, want %d: %s", tc.idx, w.Code, tc.code, w.Body.String())
		}
		if tc.code != 200 {
			continue
		}
		if ct := w.Header().Get("Content-Type"); ct != "image/svg+xml" {
			t.Errorf("idx %q: content type %q", tc.idx, ct)
		}
		d := xml.NewDecoder(bytes.NewReader(w.Body.Bytes()))
		for {
			if _, err := d.Token(); err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("idx %q: SVG is not XML: %v", tc.idx, err)
				}
				break
			}
		}
		if !strings.Contains(w.Body.String(), `<g class="f"`) {
			t.Errorf("idx %q: no frames", tc.idx)
		}
	}
}
