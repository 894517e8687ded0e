// Package atomicfile writes output files atomically: into a temporary
// file beside the target, renamed over it once complete, so that a reader
// never sees half a file and a failed write leaves nothing behind. Errors
// name the target, never the temporary file.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
)

// Write creates or replaces path with what write writes. A replaced file
// keeps its permission bits; a new one gets 0666 less the umask, as a
// file the shell creates. Should the process get SIGINT or SIGTERM while
// write runs, the temporary file is removed before it dies.
func Write(path string, write func(w io.Writer) error) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory", path)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: no such directory", path)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return targetError(path, err)
	}
	name := tmp.Name()
	untrack := track(name)
	defer untrack()
	err = write(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, modeFor(path))
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
		return targetError(path, err)
	}
	return nil
}

// modeFor is the permission bits path gets: those of the file it
// replaces, else 0666 less the process's umask.
func modeFor(path string) fs.FileMode {
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		return fi.Mode().Perm()
	}
	return 0o666 &^ umask()
}

// inflight are the temporary files being written, removed if a signal
// ends the process meanwhile.
var inflight struct {
	sync.Mutex
	names map[string]bool
	sigs  chan os.Signal
}

// track registers a temporary file until the returned function is called;
// while any is registered, SIGINT and SIGTERM remove them all and then
// end the process as the signal would have.
func track(name string) (untrack func()) {
	inflight.Lock()
	defer inflight.Unlock()
	if inflight.names == nil {
		inflight.names = map[string]bool{}
	}
	inflight.names[name] = true
	if inflight.sigs == nil {
		ch := make(chan os.Signal, 1)
		inflight.sigs = ch
		signal.Notify(ch, terminating...)
		go cleanOnSignal(ch)
	}
	return func() {
		inflight.Lock()
		defer inflight.Unlock()
		delete(inflight.names, name)
		if len(inflight.names) == 0 && inflight.sigs != nil {
			signal.Stop(inflight.sigs)
			close(inflight.sigs)
			inflight.sigs = nil
		}
	}
}

// cleanOnSignal waits for a signal on ch (closed once nothing is being
// written); on one it removes the temporary files and raises it again.
func cleanOnSignal(ch chan os.Signal) {
	sig, ok := <-ch
	if !ok {
		return
	}
	inflight.Lock()
	for name := range inflight.names {
		os.Remove(name)
	}
	signal.Stop(ch)
	inflight.Unlock()
	reraise(sig)
}

// WriteFile creates or replaces path with data (modes as for Write).
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// targetError is err about path: an operating-system error loses the
// temporary file's name it carries.
func targetError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return fmt.Errorf("%s: %w", path, err)
}
