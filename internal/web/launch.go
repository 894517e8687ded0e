package web

import (
	"fmt"
	"io"
	"os/exec"
	"runtime"

	"github.com/gpumem/gpumem/internal/units"
)

// ParseMaxUpload reads --max-upload: a positive size of at most 1 TiB.
func ParseMaxUpload(s string) (int64, error) {
	n, err := units.Parse(s)
	if err != nil {
		return 0, err
	}
	if n == 0 || n > units.TiB {
		return 0, fmt.Errorf("size %q out of range (want 1 byte to 1TiB)", s)
	}
	return int64(n), nil
}

// OpenBrowser starts the platform's URL opener; failing is not an error
// because the URL is printed anyway: it is said on stderr.
func OpenBrowser(stderr io.Writer, url string) {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		if _, err := exec.LookPath("xdg-open"); err != nil {
			fmt.Fprintln(stderr, "gpumem: no xdg-open; open the URL above in a browser")
			return
		}
		cmd = exec.Command("xdg-open", url)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "gpumem: could not open a browser: %v\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}
