//go:build unix

package atomicfile

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestModes: a new file gets 0666 less the umask; a replaced file keeps
// its mode (always 0644 before).
func TestModes(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	fresh := filepath.Join(dir, "fresh.txt")
	if err := WriteFile(fresh, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o640 {
		t.Errorf("new file under umask 027: mode %v, want 0640", fi.Mode().Perm())
	}
	private := filepath.Join(dir, "private.txt")
	if err := os.WriteFile(private, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(private, 0o600)
	if err := WriteFile(private, []byte("still secret")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(private); fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced 0600 file: mode %v, want 0600 kept", fi.Mode().Perm())
	}
	shared := filepath.Join(dir, "shared.txt")
	os.WriteFile(shared, nil, 0o666)
	os.Chmod(shared, 0o664)
	WriteFile(shared, []byte("x"))
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o664 {
		t.Errorf("replaced 0664 file: mode %v, want 0664 kept", fi.Mode().Perm())
	}
}

// TestSignalRemovesTemporary: a process killed by SIGINT or SIGTERM in
// the middle of a Write leaves no temporary file (it left a 0-byte
// .NAME.tmpNNN) and still dies of the signal.
func TestSignalRemovesTemporary(t *testing.T) {
	if dir := os.Getenv("ATOMICFILE_CHILD_DIR"); dir != "" {
		// The child: start writing, say so, and wait to be killed.
		_ = Write(filepath.Join(dir, "out.html"), func(w io.Writer) error {
			io.WriteString(w, "partial")
			os.Stdout.WriteString("writing\n")
			time.Sleep(time.Minute)
			return errors.New("not killed")
		})
		os.Exit(3)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesTemporary$")
		cmd.Env = append(os.Environ(), "ATOMICFILE_CHILD_DIR="+dir)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "writing\n" {
			cmd.Process.Kill()
			t.Fatalf("child said %q", line)
		}
		tmps, _ := filepath.Glob(filepath.Join(dir, ".out.html.tmp*"))
		if len(tmps) != 1 {
			t.Fatalf("while writing: temporary files %v", tmps)
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(ee.String(), "signal") {
			t.Errorf("%v: child ended with %v, want death by the signal", sig, err)
		}
		left, _ := os.ReadDir(dir)
		if len(left) != 0 {
			t.Errorf("%v: left %v behind", sig, left)
		}
	}
}
