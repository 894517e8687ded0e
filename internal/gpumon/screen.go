package gpumon

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpumem/gpumem/internal/units"
)

// screen is watch's refreshing terminal table. It redraws in place (cursor
// home, each line cleared to its end) so the table does not flicker.
type screen struct {
	f       *os.File
	width   func() int // the terminal's columns
	backend string
	o       WatchOptions
	hist    map[string][]uint64 // used bytes per device, the last sparkWidth samples
	report  []Interval          // the last completed report
	alerts  map[string]string   // the latest warning of each device, by its sort key
	drawn   time.Time
	last    Sample     // the latest sample and interval so far, drawn by stop
	cur     []Interval // if the throttle skipped them
}

const sparkWidth = 40

func newScreen(f *os.File, backend string, o WatchOptions) *screen {
	return &screen{f: f, backend: backend, o: o, hist: map[string][]uint64{}}
}

func (s *screen) start() { fmt.Fprint(s.f, "\x1b[?25l\x1b[H\x1b[2J") }

// stop draws the latest state, shows the cursor again and leaves the
// table on the screen.
func (s *screen) stop() {
	if s.last.Devices != nil {
		s.draw()
	}
	fmt.Fprint(s.f, "\x1b[?25h")
}

func (s *screen) setReport(ivs []Interval) { s.report = ivs }

// setAlert keeps line as device dev's latest warning; every device's is
// shown, so two GPUs crossing in one sample both stay on the screen.
func (s *screen) setAlert(dev, line string) {
	if s.alerts == nil {
		s.alerts = map[string]string{}
	}
	s.alerts[dev] = line
}

// update records a sample and redraws, at most ten times a second.
func (s *screen) update(smp Sample, cur []Interval) {
	for _, d := range smp.Devices {
		k := DeviceKey(d)
		h := append(s.hist[k], d.Used)
		if len(h) > sparkWidth {
			h = h[len(h)-sparkWidth:]
		}
		s.hist[k] = h
	}
	s.last, s.cur = smp, cur
	if time.Since(s.drawn) >= 100*time.Millisecond {
		s.draw()
	}
}

func (s *screen) draw() {
	s.drawn = time.Now()
	width := 120
	if s.width != nil {
		if w := s.width(); w > 20 {
			width = w
		}
	}
	var b strings.Builder
	b.WriteString("\x1b[H")
	for _, line := range s.lines(s.last, s.cur) {
		if utf8.RuneCountInString(line) > width {
			line = string([]rune(line)[:width])
		}
		b.WriteString(line)
		b.WriteString("\x1b[K\r\n")
	}
	b.WriteString("\x1b[J")
	_, _ = s.f.WriteString(b.String())
}

func (s *screen) lines(smp Sample, cur []Interval) []string {
	out := []string{
		fmt.Sprintf("gpumem watch  %s  every %s  report every %s  %s   Ctrl-C to stop", s.backend, s.o.Interval, s.o.Report, smp.Time.Format("15:04:05")),
		"",
		fmt.Sprintf("%-5s %-24s %9s %9s %9s %5s  %-*s", "GPU", "NAME", "USED", "FREE", "TOTAL", "UTIL", sparkWidth, "USED, LAST "+fmt.Sprint(sparkWidth)+" SAMPLES"),
	}
	for _, d := range smp.Devices {
		id := fmt.Sprintf("%d%s", d.Index, migName(d.MIG))
		if !d.MemKnown {
			out = append(out, fmt.Sprintf("%-5s %-24s %9s", id, clip(d.Name, 24), "n/a"))
			continue
		}
		util := "n/a"
		if d.Util >= 0 {
			util = fmt.Sprintf("%d%%", d.Util)
		}
		out = append(out, fmt.Sprintf("%-5s %-24s %9s %9s %9s %5s  %s", id, clip(d.Name, 24), units.PythonU(d.Used), units.PythonU(d.Free),
			units.PythonU(d.Total), util, sparkline(s.hist[DeviceKey(d)], d.Total)))
	}
	out = append(out, "", fmt.Sprintf("%-5s %9s %9s %9s %9s   %s", "GPU", "PEAK", "MIN", "MEAN", "NOW PEAK", "PEAK SINCE THE LAST REPORT"))
	last := map[string]Interval{}
	for _, iv := range s.report {
		last[DeviceKey(iv.Device)] = iv
	}
	for _, c := range cur {
		id := fmt.Sprintf("%d%s", c.Device.Index, migName(c.Device.MIG))
		now := "-"
		if c.Samples > 0 {
			now = units.PythonU(c.Peak)
		}
		if iv, ok := last[DeviceKey(c.Device)]; ok && iv.Samples > 0 {
			out = append(out, fmt.Sprintf("%-5s %9s %9s %9s %9s   %s-%s, peak at %s", id, units.PythonU(iv.Peak), units.PythonU(iv.Min), units.PythonU(iv.Mean), now,
				iv.Start.Format("15:04:05"), iv.End.Format("15:04:05"), iv.PeakTime.Format("15:04:05.0")))
		} else {
			out = append(out, fmt.Sprintf("%-5s %9s %9s %9s %9s   first report at %s", id, "-", "-", "-", now, c.Start.Add(s.o.Report).Format("15:04:05")))
		}
	}
	out = append(out, "", fmt.Sprintf("%-5s %-8s %9s %9s  %s", "GPU", "PID", "USED", "NOW PEAK", "COMMAND"))
	peaks := map[int]int64{}
	for _, c := range cur {
		for _, p := range c.Procs {
			peaks[p.PID] = p.Peak
		}
	}
	if len(smp.Procs) == 0 {
		out = append(out, "(no processes reported)")
	}
	for _, p := range smp.Procs {
		out = append(out, fmt.Sprintf("%-5d %-8d %9s %9s  %s", p.Device, p.PID, procBytes(p.Used), procBytes(peaks[p.PID]), p.Command))
	}
	if len(s.alerts) > 0 {
		out = append(out, "")
		for _, k := range slices.Sorted(maps.Keys(s.alerts)) {
			out = append(out, s.alerts[k])
		}
	}
	return out
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

var sparkRunes = []rune("▁▂▃▄▅▆▇█")

// sparkline draws used memory against the device's total, so a full bar
// is a full device.
func sparkline(h []uint64, total uint64) string {
	if total == 0 {
		return ""
	}
	var b strings.Builder
	for _, v := range h {
		i := int(float64(v) / float64(total) * float64(len(sparkRunes)))
		i = min(max(i, 0), len(sparkRunes)-1)
		b.WriteRune(sparkRunes[i])
	}
	return b.String()
}
