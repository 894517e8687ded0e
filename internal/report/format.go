// Package report renders snapshots as the text reports gpumem prints.
package report

import (
	"math"
	"strconv"
	"strings"
)

// pythonSizeUnits are _memory_viz._format_size's units.
var pythonSizeUnits = [...]string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"}

// Bytes formats n exactly as PyTorch's _memory_viz.Bytes does
// (f"{num:3.1f}{unit}B", dividing by 1024 while |num| >= 1024), e.g.
// "512.0B", "10.0MiB". Output must match PyTorch byte for byte, so the
// float steps mirror Python's: the integer is converted to a float64 at the
// first division and rounded to one decimal with round-half-even on the
// exact binary value (what both Python and strconv do).
func Bytes(n int64) string { return pythonSize(float64(n)) }

// BytesU is Bytes for unsigned sizes.
func BytesU(n uint64) string { return pythonSize(float64(n)) }

// pythonSize is _format_size on an int already converted to a float, as
// Python converts it at the first division (for an int below 1024 the
// conversion is exact either way).
func pythonSize(num float64) string {
	for _, unit := range pythonSizeUnits {
		if math.Abs(num) < 1024.0 {
			return pyFixed1(num, 3) + unit + "B"
		}
		num /= 1024.0
	}
	return pyFixed1(num, 0) + "YiB"
}

// pyFixed1 is Python's format(x, "{width}.1f").
func pyFixed1(x float64, width int) string {
	s := strconv.FormatFloat(x, 'f', 1, 64)
	if len(s) < width {
		s = strings.Repeat(" ", width-len(s)) + s
	}
	return s
}

// Size formats a byte count for gpumem's own reports: the PyTorch-style
// human size followed by the exact count, e.g. "1.5GiB (1610612736 bytes)".
func Size(n uint64) string {
	return BytesU(n) + " (" + strconv.FormatUint(n, 10) + " bytes)"
}

// thousands formats n with comma separators (12,345,678) for counts.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
