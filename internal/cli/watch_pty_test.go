//go:build linux

package cli

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair through /dev/ptmx (what a terminal
// emulator does), sized rows x cols.
func openPTY(t *testing.T, rows, cols uint16) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// vt is the little of a VT100 that gpumem watch writes: cursor home, erase
// display/line, cursor show/hide, CR, LF and text.
type vt struct {
	rows, cols int
	cells      [][]rune
	r, c       int
}

func newVT(rows, cols int) *vt {
	v := &vt{rows: rows, cols: cols}
	v.clear(0)
	return v
}

func (v *vt) clear(fromRow int) {
	for len(v.cells) < v.rows {
		v.cells = append(v.cells, nil)
	}
	for r := fromRow; r < v.rows; r++ {
		v.cells[r] = []rune(strings.Repeat(" ", v.cols))
	}
}

func (v *vt) write(t *testing.T, b []byte) {
	for len(b) > 0 {
		switch {
		case b[0] == 0x1b:
			end := bytes.IndexFunc(b[1:], func(r rune) bool { return r >= '@' && r <= '~' && r != '[' })
			if len(b) < 2 || b[1] != '[' || end < 0 {
				t.Fatalf("unexpected escape %q", b[:min(len(b), 8)])
			}
			seq := string(b[:end+2])
			switch seq {
			case "\x1b[H":
				v.r, v.c = 0, 0
			case "\x1b[2J":
				v.clear(0)
			case "\x1b[J":
				copy(v.cells[v.r][v.c:], []rune(strings.Repeat(" ", v.cols-v.c)))
				v.clear(v.r + 1)
			case "\x1b[K":
				copy(v.cells[v.r][v.c:], []rune(strings.Repeat(" ", v.cols-v.c)))
			case "\x1b[?25l", "\x1b[?25h":
			default:
				t.Fatalf("unexpected escape %q", seq)
			}
			b = b[end+2:]
		case b[0] == '\r':
			v.c = 0
			b = b[1:]
		case b[0] == '\n':
			if v.r == v.rows-1 { // scroll
				v.cells = append(v.cells[1:], []rune(strings.Repeat(" ", v.cols)))
			} else {
				v.r++
			}
			b = b[1:]
		default:
			r, n := utf8.DecodeRune(b)
			if v.c < v.cols {
				v.cells[v.r][v.c] = r
				v.c++
			}
			b = b[n:]
		}
	}
}

func (v *vt) screen() []string {
	var out []string
	for _, row := range v.cells {
		out = append(out, strings.TrimRight(string(row), " "))
	}
	return out
}

// TestWatchTerminal runs gpumem watch on a pseudo-terminal with the fake
// backend and checks the screen a user is left with.
func TestWatchTerminal(t *testing.T) {
	const rows, cols = 30, 110
	master, slave := openPTY(t, rows, cols)
	defer master.Close()
	var raw bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&raw, master) // ends with EIO once the slave is closed
		close(copied)
	}()
	useFake(t, &fakeBackend{used: fakeRun, sleep: 30 * 1e6})
	var errOut bytes.Buffer
	code := Main([]string{"watch", "--interval", "50ms", "--report", "200ms", "--count", "12", "--alert", "90"}, nil, slave, &errOut)
	slave.Close()
	<-copied
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr %q: on a terminal the alert belongs in the table", errOut.String())
	}
	v := newVT(rows, cols)
	v.write(t, raw.Bytes())
	scr := v.screen()
	text := strings.Join(scr, "\n")
	if n := bytes.Count(raw.Bytes(), []byte("\x1b[H")); n < 3 {
		t.Errorf("the table was drawn %d times; it should refresh", n)
	}
	// The last sample (GPU 0 at 7 GiB, GPU 1 at 75 GiB) with its sparkline
	// of all twelve samples, scaled to the device's 80 GiB (10 GiB is the
	// second of eight levels).
	wantRows := []string{
		"gpumem watch  fake  every 50ms  report every 200ms  14:00:00   Ctrl-C to stop",
		"GPU   NAME                          USED      FREE     TOTAL  UTIL  USED, LAST 40 SAMPLES",
		"0     Fake H100                   7.0GiB   73.0GiB   80.0GiB   60%  ▂▃▄▃▂▂▂▂▅▁▁▁",
		"1     Fake H100                  75.0GiB    5.0GiB   80.0GiB   61%  ▁▁▁▁▁▁▁▁▁▂▂█",
		// The report written when --count ended the run: the third period's
		// peak (40 GiB at its first sample), not the first period's.
		"GPU        PEAK       MIN      MEAN  NOW PEAK   PEAK SINCE THE LAST REPORT",
		"0       40.0GiB    5.0GiB   14.5GiB   40.0GiB   14:00:00-14:00:00, peak at 14:00:00.4",
		"1       75.0GiB    9.0GiB   26.2GiB   75.0GiB   14:00:00-14:00:00, peak at 14:00:00.5",
		"GPU   PID           USED  NOW PEAK  COMMAND",
		"0     4100        6.5GiB   39.5GiB  python train.py --rank 0",
		"1     4101       74.5GiB   74.5GiB  python train.py --rank 1",
		"gpumem watch: warning: GPU 1 at 93.8% of its memory (75.0GiB of 80.0GiB), --alert 90%",
	}
	for _, w := range wantRows {
		found := false
		for _, row := range scr {
			if row == w {
				found = true
			}
		}
		if !found {
			t.Errorf("screen lacks the row\n%q\nscreen:\n%s", w, text)
		}
	}
}
