package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/gpumem/gpumem/internal/demo"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/snapshot"
	"golang.org/x/term"
)

// progressMinBytes is the file size from which LoadFile draws a progress
// bar: smaller files load in well under a second.
const progressMinBytes = 20 << 20

// LoadFile decodes the snapshot at path ("-" for standard input). When
// env.Stderr is a terminal and the file is large it draws a one-line
// progress bar there, and clears it when done. Errors start with the file
// name.
func LoadFile(env *Env, path string) (*snapshot.Snapshot, error) {
	opt := &snapshot.Options{MaxBytes: env.MaxBytes}
	var bar *report.ProgressBar
	if path != "-" {
		fi, err := checkPath(path)
		if err != nil {
			return nil, err
		}
		if isTerminal(env.Stderr) && fi.Mode().IsRegular() && fi.Size() >= progressMinBytes {
			bar = &report.ProgressBar{W: env.Stderr, Name: report.BaseName(path)}
			opt.Progress = bar.Update
		}
	}
	s, err := decodePath(env, path, opt)
	if bar != nil {
		bar.Clear()
	}
	if err == nil {
		// The command's answers follow and the process ends with them:
		// their garbage is collected as eagerly as the decode's.
		snapshot.HoldEagerGC(s.Source.Size)
	}
	return s, err
}

// checkPath fails, with the file name, for a path that is missing or a
// directory.
func checkPath(path string) (os.FileInfo, error) { return statInput(path, "snapshot file") }

// statInput is checkPath for an input that should be a what.
func statInput(path, what string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, prefixError(path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, not a %s", path, what)
	}
	return fi, nil
}

// openInput opens the input path ("-": standard input) that should be a
// what, with the loader's one-line messages for a missing path or a
// directory.
func openInput(env *Env, path, what string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(env.Stdin), nil
	}
	if _, err := statInput(path, what); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, prefixError(path, err)
	}
	return f, nil
}

// decodePath decodes the file at path, or standard input for "-"; errors
// start with the file name.
func decodePath(env *Env, path string, opt *snapshot.Options) (*snapshot.Snapshot, error) {
	opt.MaxBytes, opt.LimitFlag = env.maxDecompressed, "--max-decompressed SIZE"
	if env.MaxBytes > 0 && (opt.MaxBytes == 0 || env.MaxBytes < opt.MaxBytes) {
		// The caller's own bound (gpumem mcp --max-bytes) is the tighter.
		opt.MaxBytes, opt.LimitFlag = env.MaxBytes, "gpumem mcp --max-bytes SIZE"
	}
	var (
		s   *snapshot.Snapshot
		err error
	)
	// The command's choice, not the library's: a big decode collects
	// eagerly (the GC setting is the process's, which is this one).
	opt.EagerGC = true
	opt.NoVersions = opt.NoVersions || env.noVersions
	if path == "-" {
		s, err = snapshot.Decode(env.Stdin, "-", opt)
	} else {
		s, err = snapshot.Open(path, opt)
	}
	if err != nil {
		return nil, prefixError(path, err)
	}
	return s, nil
}

// errNoSnapshot is the error of a command given no file.
var errNoSnapshot = errors.New("no snapshot given: pass a file (or - for stdin), or --demo")

// LoadArgs loads every file in paths, after the embedded demo snapshot when
// useDemo is set. It fails when there is nothing to load.
func LoadArgs(env *Env, paths []string, useDemo bool) ([]*snapshot.Snapshot, error) {
	if len(paths) == 0 && !useDemo {
		return nil, errNoSnapshot
	}
	var out []*snapshot.Snapshot
	if useDemo {
		s, err := demo.Open()
		if err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		out = append(out, s)
	}
	for _, p := range paths {
		s, err := LoadFile(env, p)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// loadOne loads the one snapshot that parseOneSnapshot accepted.
func loadOne(env *Env, files []string, useDemo bool) (*snapshot.Snapshot, error) {
	snaps, err := LoadArgs(env, files, useDemo)
	if err != nil {
		return nil, err
	}
	return snaps[0], nil
}

// writeStdout runs write on a buffered env.Stdout and flushes it.
func writeStdout(env *Env, write func(w io.Writer) error) error {
	w := bufio.NewWriter(env.Stdout)
	if err := write(w); err != nil {
		return err
	}
	return w.Flush()
}

// prefixError puts the file name in front of a load error; the decoder's
// errors (*snapshot.DecodeError) carry it already.
func prefixError(path string, err error) error {
	var de *snapshot.DecodeError
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return &noSuchFile{path, err}
	}
	return fmt.Errorf("%s: %w", path, err)
}

// noSuchFile is a missing input: "PATH: no such file".
type noSuchFile struct {
	path string
	err  error
}

func (e *noSuchFile) Error() string { return e.path + ": no such file" }
func (e *noSuchFile) Unwrap() error { return e.err }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
