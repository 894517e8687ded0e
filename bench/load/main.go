// Command load fires a mix of viewer API requests at a `gpumem serve` on
// loopback, N at a time, and prints per endpoint the count, the errors
// (non-2xx, and any 5xx or "internal error" apart) and p50/p99 latency,
// then the server's peak RSS (VmHWM). The page's own traffic is the model:
// windows and state steps (what the user waits on) with curves, markers,
// events, search, the answers (peak, oom, classes, fragcurve, flame)
// mixed in.
//
//	go build -o /tmp/gpumem ./cmd/gpumem
//	go run ./bench/load -gpumem /tmp/gpumem -n 2000 -c 32 FILE
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("gpumem", "gpumem", "the gpumem binary to serve with")
	n := flag.Int("n", 2000, "requests in all")
	c := flag.Int("c", 32, "requests in flight at once")
	seed := flag.Int64("seed", 1, "random seed of the mix")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: load [-gpumem BIN] [-n N] [-c C] FILE")
		os.Exit(2)
	}
	cmd := exec.Command(*bin, "serve", "-no-browser", "-http", "127.0.0.1:0", flag.Arg(0))
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fail(err)
	}
	defer cmd.Process.Kill()
	rd := bufio.NewReader(out)
	base := ""
	for base == "" || !strings.Contains(base, "serving") {
		line, err := rd.ReadString('\n')
		if err != nil {
			fail(fmt.Errorf("serve ended: %v", err))
		}
		if i := strings.Index(line, "http://"); i >= 0 && base == "" {
			base = strings.Fields(line[i:])[0]
		}
		if strings.Contains(line, "serving") {
			base += " serving"
		}
	}
	base = strings.Fields(base)[0]
	go io.Copy(io.Discard, rd)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *c}, Timeout: 5 * time.Minute}

	// The file's extent, for windows and moments.
	var meta struct {
		Events int        `json:"events"`
		XEvent [2]float64 `json:"xEvent"`
	}
	if err := getJSON(client, base+"api/meta", &meta); err != nil {
		fail(err)
	}
	rnd := rand.New(rand.NewSource(*seed))
	x := func() (float64, float64) {
		a := rnd.Float64() * meta.XEvent[1]
		b := a + rnd.Float64()*(meta.XEvent[1]-a) + 1
		return a, b
	}
	type req struct{ ep, url string }
	gen := []struct {
		ep     string
		weight int
		url    func() string
	}{
		{"window", 8, func() string { a, b := x(); return fmt.Sprintf("api/window?x0=%g&x1=%g&w=1200&h=500", a, b) }},
		{"state", 4, func() string { return fmt.Sprintf("api/state?view=state&idx=%d", rnd.Intn(max(meta.Events, 1))) }},
		{"meta", 1, func() string { return "api/meta" }},
		{"curves", 2, func() string { a, b := x(); return fmt.Sprintf("api/curves?x0=%g&x1=%g&w=1200", a, b) }},
		{"markers", 1, func() string { return "api/markers" }},
		{"events", 2, func() string {
			return fmt.Sprintf("api/events?view=state&from=%d&count=100", rnd.Intn(max(meta.Events, 1)))
		}},
		{"search", 1, func() string { return "api/search?frame=forward" }},
		{"peak", 2, func() string { return fmt.Sprintf("api/peak?x=%g", rnd.Float64()*meta.XEvent[1]) }},
		{"oom", 1, func() string { return "api/oom" }},
		{"classes", 1, func() string { return "api/classes?by=category" }},
		{"fragcurve", 1, func() string { a, b := x(); return fmt.Sprintf("api/fragcurve?x0=%g&x1=%g&w=1200", a, b) }},
		{"flame", 1, func() string { return fmt.Sprintf("api/flame?view=state&idx=%d", rnd.Intn(max(meta.Events, 1))) }},
	}
	var bag []int
	for i, g := range gen {
		for range g.weight {
			bag = append(bag, i)
		}
	}
	reqs := make([]req, *n)
	for i := range reqs {
		g := gen[bag[rnd.Intn(len(bag))]]
		reqs[i] = req{g.ep, base + g.url()}
	}

	type result struct {
		d        time.Duration
		status   int
		internal bool
	}
	results := map[string][]result{}
	var mu sync.Mutex
	next := make(chan req)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				s := time.Now()
				status, internal := 0, false
				resp, err := client.Get(r.url)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					status, internal = resp.StatusCode, strings.Contains(string(body), "internal error")
				}
				mu.Lock()
				results[r.ep] = append(results[r.ep], result{time.Since(s), status, internal})
				mu.Unlock()
			}
		}()
	}
	for _, r := range reqs {
		next <- r
	}
	close(next)
	wg.Wait()
	wall := time.Since(t0)

	fmt.Printf("%d requests, %d at a time, in %.1f s (%s)\n\n", *n, *c, wall.Seconds(), flag.Arg(0))
	fmt.Println("| endpoint | requests | errors | 5xx | p50 | p99 | max |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	total, errs := 0, 0
	for _, g := range gen {
		rs := results[g.ep]
		if len(rs) == 0 {
			continue
		}
		ds := make([]time.Duration, len(rs))
		e, e5 := 0, 0
		for i, r := range rs {
			ds[i] = r.d
			if r.status < 200 || r.status > 299 || r.internal {
				e++
			}
			if r.status >= 500 || r.internal {
				e5++
			}
		}
		slices.Sort(ds)
		total += len(rs)
		errs += e
		fmt.Printf("| %s | %d | %d | %d | %s | %s | %s |\n", g.ep, len(rs), e, e5, ms(ds[len(ds)/2]), ms(ds[min(len(ds)-1, len(ds)*99/100)]), ms(ds[len(ds)-1]))
	}
	fmt.Printf("\n%d requests, %d errors; server peak RSS %s\n", total, errs, vmHWM(cmd.Process.Pid))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", d.Seconds()*1000) }

func getJSON(c *http.Client, url string, v any) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// vmHWM is the peak resident set of process pid (Linux).
func vmHWM(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}
