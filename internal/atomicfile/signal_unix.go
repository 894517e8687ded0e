//go:build unix

package atomicfile

import (
	"bufio"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// terminating are the signals that remove temporary files.
var terminating = []os.Signal{syscall.SIGINT, syscall.SIGTERM}

// reraise ends the process with sig, as if it had not been caught (other
// handlers of it, such as a server's Ctrl-C, get it instead).
func reraise(sig os.Signal) {
	if s, ok := sig.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), s)
		time.Sleep(time.Second) // delivered meanwhile; if not, exit anyway
		os.Exit(128 + int(s))
	}
	os.Exit(1)
}

// umask is the process's file-creation mask: from /proc/self/status on
// Linux, else by setting it and back.
func umask() fs.FileMode {
	if f, err := os.Open("/proc/self/status"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return fs.FileMode(n)
				}
			}
		}
	}
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := syscall.Umask(0o22)
	syscall.Umask(old)
	return fs.FileMode(old)
}

var umaskMu sync.Mutex
