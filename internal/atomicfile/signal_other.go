//go:build !unix

package atomicfile

import (
	"io/fs"
	"os"
)

// terminating are the signals that remove temporary files.
var terminating = []os.Signal{os.Interrupt}

// reraise ends the process after sig.
func reraise(os.Signal) { os.Exit(1) }

// umask: files are created 0644 where there is none.
func umask() fs.FileMode { return 0o022 }
