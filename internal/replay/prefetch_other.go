//go:build !amd64

package replay

import "unsafe"

// prefetch does nothing where no assembly issues a prefetch: it only
// makes a later load faster.
func prefetch(p unsafe.Pointer) {}
