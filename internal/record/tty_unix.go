//go:build linux || darwin

package record

import (
	"os"

	"golang.org/x/sys/unix"
)

// terminalSent (a variable for tests) reports whether a SIGINT or SIGHUP just received most likely
// came from the controlling terminal (Ctrl-C, a hang-up): the terminal
// sends those to its whole foreground process group, the command included,
// so sending it again would make a Python job see a second
// KeyboardInterrupt in the middle of handling the first. It is so when
// gpumem's process group is the terminal's foreground group; a signal sent
// with kill to gpumem alone (a scheduler, a script) finds gpumem in the
// background or without a terminal, and is forwarded.
var terminalSent = func() bool {
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal
	}
	defer tty.Close()
	fg, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && fg == unix.Getpgrp()
}
