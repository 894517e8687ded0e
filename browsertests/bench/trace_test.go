package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTraceReport checks the listing of a slow zoom: the main thread is
// the one with the zoom's marks, events of other threads and short or
// outside ones are left out, B/E pairs are joined, and nested events are
// indented under the one that holds them.
func TestTraceReport(t *testing.T) {
	mark := func(ts float64, msg string) traceEvent {
		a, _ := json.Marshal(map[string]any{"data": map[string]any{"message": msg}})
		return traceEvent{Name: "TimeStamp", Ph: "I", Ts: ts, Pid: 1, Tid: 1, Args: a}
	}
	fn, _ := json.Marshal(map[string]any{"data": map[string]any{"functionName": "drawPlot", "url": "http://h/app.js"}})
	tr := &pageTrace{events: []traceEvent{
		mark(1000, "zoom 0"), mark(300_000, "zoomed 0"),
		mark(400_000, "zoom 1"), mark(450_000, "zoomed 1"),
		{Name: "RunTask", Ph: "X", Ts: 10_000, Dur: 100_000, Pid: 1, Tid: 1},
		{Name: "FunctionCall", Ph: "X", Ts: 11_000, Dur: 90_000, Pid: 1, Tid: 1, Args: fn},
		{Name: "Tiny", Ph: "X", Ts: 20_000, Dur: 1_000, Pid: 1, Tid: 1},
		{Name: "OtherThread", Ph: "X", Ts: 20_000, Dur: 50_000, Pid: 1, Tid: 2},
		{Name: "MajorGC", Ph: "B", Ts: 200_000, Pid: 1, Tid: 1},
		{Name: "MajorGC", Ph: "E", Ts: 260_000, Pid: 1, Tid: 1},
		{Name: "Later", Ph: "X", Ts: 410_000, Dur: 30_000, Pid: 1, Tid: 1},
	}}
	var b strings.Builder
	tr.report(&b, []float64{299, 49}, 100, 4)
	got := b.String()
	for _, want := range []string{
		"trace of zoom 0 (299 ms; 299 ms between the marks)",
		"bench:   +9 100 RunTask \n",
		"bench:     +10 90 FunctionCall functionName=drawPlot url=app.js\n",
		"bench:   +199 60 MajorGC \n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("listing lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"Tiny", "OtherThread", "zoom 1", "Later"} {
		if strings.Contains(got, not) {
			t.Errorf("listing has %q:\n%s", not, got)
		}
	}
}
