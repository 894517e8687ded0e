package gpumon

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestWatchPrometheusEndpoint(t *testing.T) {
	st := &watchState{last: Sample{Time: t0, Devices: []Device{{Index: 0, UUID: "GPU-fake-0", Name: "Fake H100", MIG: -1,
		Used: 10 * gib, Free: 70 * gib, Total: 80 * gib, Util: 60, MemKnown: true}}}}
	var errOut strings.Builder
	stop, err := servePrometheus(&errOut, "127.0.0.1:0", st)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	url := strings.TrimSpace(strings.TrimPrefix(errOut.String(), "gpumem watch: Prometheus metrics at "))
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("stderr %q", errOut.String())
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-fake-0",device="nvidia0",modelName="Fake H100",Hostname=`) ||
		!strings.Contains(string(body), "} 10240\n") {
		t.Errorf("status %d body:\n%s", resp.StatusCode, body)
	}
	// A loopback listener refuses other Host names (DNS rebinding).
	req, _ := http.NewRequest("GET", url, nil)
	req.Host = "attacker.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: status %d", resp.StatusCode)
	}
}

// TestWatchScreenKeepsEveryAlert: when two GPUs cross --alert, the terminal
// table shows both warnings (it kept only the last one), each device's
// latest, in device order.
func TestWatchScreenKeepsEveryAlert(t *testing.T) {
	s := newScreen(nil, "fake", WatchOptions{})
	s.setAlert("000001", "warning: GPU 1 at 31%")
	s.setAlert("000000", "warning: GPU 0 at 32%")
	s.setAlert("000001", "warning: GPU 1 at 35%")
	got := s.lines(Sample{}, nil)
	if n := len(got); n < 3 || got[n-3] != "" || got[n-2] != "warning: GPU 0 at 32%" || got[n-1] != "warning: GPU 1 at 35%" {
		t.Errorf("screen ends %q", got[max(0, len(got)-4):])
	}
}

// closeCheckBackend is fakeBackend that fails the test when a Sample
// runs, or starts, after Close.
// TestPromWarnsBeyondLoopback: watch --prom on 0.0.0.0 warns in one line.
func TestPromWarnsBeyondLoopback(t *testing.T) {
	var stderr bytes.Buffer
	stop, err := servePrometheus(&stderr, "0.0.0.0:0", &watchState{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if w := stderr.String(); !strings.HasPrefix(w, "gpumem: warning: gpumem watch --prom listens on ") || strings.Count(w, "warning") != 1 || strings.Count(strings.SplitN(w, "\n", 2)[0], "beyond loopback") != 1 {
		t.Errorf("warning %q", w)
	}
	stderr.Reset()
	stop, err = servePrometheus(&stderr, "127.0.0.1:0", &watchState{})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if strings.Contains(stderr.String(), "warning") {
		t.Errorf("loopback --prom warned: %q", stderr.String())
	}
}
