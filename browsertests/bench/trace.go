package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/tracing"
	"github.com/chromedp/chromedp"
)

// pageTrace records Chromium's trace of the page (its main thread's
// tasks, scripts, garbage collections, frames and network events) while
// the zooms run, so that a slow zoom can be taken apart: what the page's
// main thread did between the key press and the frame that showed it.
type pageTrace struct {
	mu     sync.Mutex
	events []traceEvent
	done   chan struct{}
}

type traceEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	Ts   float64         `json:"ts"`
	Dur  float64         `json:"dur"`
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	Args json.RawMessage `json:"args"`
}

// startTrace starts tracing the page's categories that say where the
// main thread's time goes.
func startTrace(ctx context.Context) (*pageTrace, error) {
	t := &pageTrace{done: make(chan struct{})}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *tracing.EventDataCollected:
			t.mu.Lock()
			for _, v := range e.Value {
				var te traceEvent
				if json.Unmarshal(v, &te) == nil {
					t.events = append(t.events, te)
				}
			}
			t.mu.Unlock()
		case *tracing.EventTracingComplete:
			close(t.done)
		}
	})
	cats := []string{"devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "blink.user_timing", "v8", "v8.gc", "toplevel"}
	if extra := os.Getenv("GPUMEM_BENCH_TRACECATS"); extra != "" {
		cats = append(cats, strings.Split(extra, ",")...)
	}
	err := chromedp.Run(ctx, tracing.Start().WithTransferMode(tracing.TransferModeReportEvents).
		WithTraceConfig(&tracing.TraceConfig{IncludedCategories: cats, ExcludedCategories: []string{"*"}}))
	return t, err
}

// stop ends the trace and waits for its events.
func (t *pageTrace) stop(ctx context.Context) error {
	if err := chromedp.Run(ctx, tracing.End()); err != nil {
		return err
	}
	<-t.done
	return nil
}

// report writes, for each zoom slower than slowMs, the main thread's
// events of at least minMs inside it (nested ones indented), found
// between the page's console.timeStamp marks "zoom N" and "zoomed N".
func (t *pageTrace) report(w io.Writer, times []float64, slowMs, minMs float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// The page's main thread: the thread that holds the zooms' marks.
	start, end := map[int]float64{}, map[int]float64{}
	var pid, tid int
	for _, e := range t.events {
		if e.Name != "TimeStamp" {
			continue
		}
		var a struct {
			Data struct{ Message string } `json:"data"`
		}
		_ = json.Unmarshal(e.Args, &a)
		var n int
		if _, err := fmt.Sscanf(a.Data.Message, "zoom %d", &n); err == nil && strings.HasPrefix(a.Data.Message, "zoom ") {
			start[n], pid, tid = e.Ts, e.Pid, e.Tid
		} else if _, err := fmt.Sscanf(a.Data.Message, "zoomed %d", &n); err == nil {
			end[n] = e.Ts
		}
	}
	// Complete events on that thread, B/E pairs joined.
	type span struct {
		name, what string
		ts, dur    float64
	}
	var spans []span
	var stack []traceEvent
	for _, e := range t.events {
		if e.Pid != pid || e.Tid != tid {
			continue
		}
		switch e.Ph {
		case "X":
			spans = append(spans, span{e.Name, describe(e.Args), e.Ts, e.Dur})
		case "B":
			stack = append(stack, e)
		case "E":
			if len(stack) > 0 {
				b := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				spans = append(spans, span{b.Name, describe(b.Args), b.Ts, e.Ts - b.Ts})
			}
		}
	}
	// GPUMEM_TRACE_DUMP=FILE keeps the trace's events as JSON, for a
	// closer look than the listing.
	if f := os.Getenv("GPUMEM_TRACE_DUMP"); f != "" {
		if b, err := json.Marshal(t.events); err == nil {
			_ = os.WriteFile(f, b, 0o644)
		}
	}
	sort.Slice(spans, func(i, j int) bool {
		if spans[i].ts != spans[j].ts {
			return spans[i].ts < spans[j].ts
		}
		return spans[i].dur > spans[j].dur
	})
	for i, ms := range times {
		s, ok1 := start[i]
		e, ok2 := end[i]
		if ms < slowMs || !ok1 || !ok2 {
			continue
		}
		fmt.Fprintf(w, "bench: trace of zoom %d (%.0f ms; %.0f ms between the marks): the page's main thread, tasks of ≥ %.0f ms (ms from the key press, duration)\n", i, ms, (e-s)/1000, minMs)
		var open []float64 // ends of the enclosing spans shown
		for _, sp := range spans {
			if sp.ts+sp.dur < s || sp.ts > e || sp.dur < minMs*1000 {
				continue
			}
			for len(open) > 0 && open[len(open)-1] <= sp.ts {
				open = open[:len(open)-1]
			}
			fmt.Fprintf(w, "bench:   %s%+.0f %.0f %s %s\n", strings.Repeat("  ", len(open)), (sp.ts-s)/1000, sp.dur/1000, sp.name, sp.what)
			open = append(open, sp.ts+sp.dur)
		}
	}
}

// describe picks what an event's arguments say about its work: the
// function, script, URL or GC kind.
func describe(args json.RawMessage) string {
	var a struct {
		Data map[string]any `json:"data"`
		Type string         `json:"type"`
	}
	_ = json.Unmarshal(args, &a)
	var parts []string
	for _, k := range []string{"functionName", "url", "lineNumber", "type", "frame", "usedHeapSizeBefore", "usedHeapSizeAfter"} {
		if v, ok := a.Data[k]; ok && fmt.Sprint(v) != "" {
			s := fmt.Sprint(v)
			if k == "url" {
				s = s[strings.LastIndexByte(s, '/')+1:]
			}
			if k == "frame" {
				continue
			}
			parts = append(parts, k+"="+s)
		}
	}
	if a.Type != "" {
		parts = append(parts, "type="+a.Type)
	}
	return strings.Join(parts, " ")
}
