package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpumem/gpumem/internal/units"
)

// ProgressBar draws "loading NAME: 123.4MiB of 1.0GiB (12%)" in place.
type ProgressBar struct {
	W     io.Writer
	Name  string
	last  time.Time
	width int // length of the last line drawn, to clear it
}

// Update draws done of total bytes (total < 0: unknown), at most every
// 100 ms but always at the end.
func (p *ProgressBar) Update(done, total int64) {
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond && done < total {
		return
	}
	p.last = now
	line := "loading " + p.Name + ": " + units.Progress(done)
	if total > 0 {
		line += fmt.Sprintf(" of %s (%d%%)", units.Progress(total), done*100/total)
	}
	pad := ""
	if n := p.width - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprint(p.W, "\r"+line+pad)
	p.width = len(line)
}

// Clear erases the line drawn.
func (p *ProgressBar) Clear() {
	if p.width > 0 {
		fmt.Fprint(p.W, "\r"+strings.Repeat(" ", p.width)+"\r")
	}
}
