package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// drive asks the server at base (http://HOST:PORT) what the viewer
// bench's page asks, in its order: the file shown, the first (whole)
// window, curves and markers, 24 zoom and pan windows (8× "+", 8× "→",
// 8× "-", as browsertests/bench presses them, 1600×600 pixels), the
// state view and five steps back and, with answers, the answers the page
// loads when idle. It prints each window's and step's time. With atOnce
// the zooms start right after the first window, the curves and markers
// asked for beside them (a user quick on the keys, before the window
// index is built).
//
// With page, it asks what the page does, in its order: the curves,
// markers and the peak's answer (which the page asks for right after its
// first paint) go out beside the zooms, then the state view and steps;
// drive returns once the peak's answer, curves and markers are made
// (browsertests/bench reads the server's peak RSS right after the last
// step, some of them still being made then; a user who waits a second
// has them all).
func drive(base string, answers, atOnce, firstOnly, page bool) error {
	client := &http.Client{Timeout: 10 * time.Minute}
	var timing string // the last answer's Server-Timing
	get := func(path string) ([]byte, time.Duration, error) {
		t0 := time.Now()
		r, err := client.Get(base + path)
		if err != nil {
			return nil, 0, err
		}
		defer r.Body.Close()
		timing = r.Header.Get("Server-Timing")
		b, err := io.ReadAll(r.Body)
		if err == nil && r.StatusCode != http.StatusOK {
			err = fmt.Errorf("%s: %s: %s", path, r.Status, strings.TrimSpace(string(b)))
		}
		return b, time.Since(t0), err
	}
	for t0 := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		if _, _, err := get("/api/files"); err == nil {
			break
		} else if time.Since(t0) > time.Minute {
			return err
		}
	}
	p := "file=0&device=0&view=active&detail=15000&mode=event"
	if _, _, err := get("/api/files?wait=0"); err != nil {
		return err
	}
	b, _, err := get("/api/meta?" + p)
	if err != nil {
		return err
	}
	var meta struct {
		XEvent [2]float64 `json:"xEvent"`
		Peak   float64    `json:"peak"`
		Events int        `json:"events"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return err
	}
	T, P := meta.XEvent[1], meta.Peak
	win := func(x0, x1, y0, y1 float64) (time.Duration, error) {
		q := url.Values{}
		for k, v := range map[string]float64{"x0": x0, "x1": x1, "y0": y0, "y1": y1, "w": 1600, "h": 600} {
			q.Set(k, fmt.Sprint(v))
		}
		_, d, err := get("/api/window?" + p + "&" + q.Encode())
		return d, err
	}
	d, err := win(0, T, 0, 0)
	if err != nil {
		return err
	}
	fmt.Printf("first window: %v\n", d.Round(time.Millisecond))
	if firstOnly {
		return nil
	}
	side := make(chan error, 1)
	go func() {
		for _, u := range []string{fmt.Sprintf("/api/curves?%s&x0=0&x1=%.0f&w=1600", p, T), "/api/markers?" + p} {
			if _, _, err := get(u); err != nil {
				side <- err
				return
			}
		}
		side <- nil
	}()
	peak := make(chan error, 1)
	if page {
		go func() {
			_, _, err := get("/api/peak?at=peak&" + p)
			peak <- err
		}()
	}
	if !atOnce && !page {
		if err := <-side; err != nil {
			return err
		}
		time.Sleep(time.Second)
	}
	x0, x1, y0, y1 := 0.0, T, 0.0, P
	var ms, server []string
	cpu0, wall0 := processCPU(), time.Now()
	for k := range 24 {
		span, h := x1-x0, y1-y0
		switch {
		case k < 8:
			cx, cy := x0+span/2, y0+h/2
			span, h = span/1.5, h/1.5
			x0, y0 = cx-span/2, cy-h/2
		case k < 16:
			x0 += span * 0.2
		default:
			cx, cy := x0+span/2, y0+h/2
			span, h = min(span*1.5, T), min(h*1.5, P)
			x0, y0 = cx-span/2, cy-h/2
		}
		x0, y0 = min(max(x0, 0), T-span), min(max(y0, 0), P-h)
		x1, y1 = x0+span, y0+h
		d, err := win(x0, x1, y0, y1)
		if err != nil {
			return err
		}
		ms = append(ms, fmt.Sprint(d.Milliseconds()))
		server = append(server, serverTime(timing))
	}
	fmt.Printf("zoom/pan windows (ms, in order): %s\n", strings.Join(ms, " "))
	fmt.Printf("  the server's time on each (wall/CPU ms, Server-Timing): %s\n", strings.Join(server, " "))
	fmt.Printf("  the process's CPU over the 24 windows: %v in %v (the queries' and what ran beside them)\n",
		(processCPU() - cpu0).Round(time.Millisecond), time.Since(wall0).Round(time.Millisecond))
	if atOnce && !page {
		if err := <-side; err != nil {
			return err
		}
	}
	if !page {
		time.Sleep(time.Second)
	}
	sp := strings.Replace(p, "view=active", "view=state", 1)
	ms = ms[:0]
	for k := range 6 {
		_, d, err := get(fmt.Sprintf("/api/state?%s&idx=%d", sp, meta.Events-1-k))
		if err != nil {
			return err
		}
		ms = append(ms, fmt.Sprint(d.Milliseconds()))
	}
	fmt.Printf("state view and 5 steps back (ms): %s\n", strings.Join(ms, " "))
	if page {
		for _, c := range []chan error{side, peak} {
			if err := <-c; err != nil {
				return err
			}
		}
	}
	if answers {
		for _, u := range []string{"/api/peak?", "/api/classes?by=category&", fmt.Sprintf("/api/fragcurve?x0=0&x1=%.0f&w=1600&", T)} {
			if _, d, err := get(u + p); err != nil {
				fmt.Printf("%s: %v\n", u, err)
			} else {
				fmt.Printf("%s: %v\n", u, d.Round(time.Millisecond))
			}
		}
	}
	return nil
}

// processCPU is this process's user+system CPU time: the server's, which
// runs in it, and the driver's few requests.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverTime reads a window answer's Server-Timing header (window;dur=W,
// cpu;dur=C) as "W/C".
func serverTime(h string) string {
	var wall, cpu string
	for _, m := range strings.Split(h, ",") {
		name, dur, _ := strings.Cut(strings.TrimSpace(m), ";dur=")
		switch name {
		case "window":
			wall = dur
		case "cpu":
			cpu = dur
		}
	}
	if wall == "" {
		return "?"
	}
	if cpu == "" {
		return wall
	}
	return wall + "/" + cpu
}
