// Package units parses and formats byte sizes: the one size parser every
// flag and script uses, and the size formats of PyTorch's tools that
// gpumem's reports and viewer reproduce.
//
// Convention: KB, MB, GB, TB mean the same powers of 1024 as KiB, MiB, GiB,
// TiB (as PyTorch's own messages and PYTORCH_CUDA_ALLOC_CONF's "_mb" keys
// do), so "100MB" is 104857600 bytes.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Binary size units.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
	TiB = 1 << 40
)

// multipliers maps a lower-case unit suffix to its size in bytes.
var multipliers = map[string]uint64{
	"": 1, "b": 1,
	"k": KiB, "kb": KiB, "kib": KiB,
	"m": MiB, "mb": MiB, "mib": MiB,
	"g": GiB, "gb": GiB, "gib": GiB,
	"t": TiB, "tb": TiB, "tib": TiB,
}

// Parse reads a size: a byte count ("1048576") or a number with a unit
// ("3MiB", "1.5 GB", "2k"; case-insensitive; KB/MB/GB/TB are powers of
// 1024 like KiB/MiB/GiB/TiB). Fractions are rounded down to whole bytes.
// Zero is accepted; negative numbers and sizes of 2^64 bytes or more are not.
func Parse(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := multipliers[unit]
	if !ok || num == "" {
		return 0, fmt.Errorf("bad size %q (want a byte count or a number with KiB, MiB, GiB or TiB)", s)
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil || (v != 0 && mult > math.MaxUint64/v) {
			return 0, fmt.Errorf("bad size %q (too large)", s)
		}
		return v * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q", s)
	}
	if f*float64(mult) >= math.MaxUint64 {
		return 0, fmt.Errorf("bad size %q (too large)", s)
	}
	return uint64(f * float64(mult)), nil
}

// binaryUnits are the unit prefixes of PyTorch's and memory_viz's formats.
var binaryUnits = [...]string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi"}

// Python formats n exactly as PyTorch's _memory_viz._format_size
// (f"{num:3.1f}{unit}B", dividing by 1024 while |num| >= 1024), e.g.
// "512.0B", "10.0MiB": what `_memory_viz.py stats` prints. The float steps
// mirror Python's: the integer becomes a float64 at the first division and
// is rounded to one decimal half-to-even on the exact binary value (what
// both Python and strconv do).
func Python(n int64) string { return python(float64(n)) }

// PythonU is Python for unsigned sizes.
func PythonU(n uint64) string { return python(float64(n)) }

// PythonBytes is Python followed by the exact count:
// "1.5GiB (1610612736 bytes)", gpumem's own report style.
func PythonBytes(n uint64) string {
	return PythonU(n) + " (" + strconv.FormatUint(n, 10) + " bytes)"
}

func python(num float64) string {
	for _, unit := range binaryUnits {
		if math.Abs(num) < 1024.0 {
			// "{:3.1f}": one decimal is always at least 3 characters wide.
			return strconv.FormatFloat(num, 'f', 1, 64) + unit + "B"
		}
		num /= 1024.0
	}
	return strconv.FormatFloat(num, 'f', 1, 64) + "YiB"
}

// Viz formats n as memory_viz's JavaScript formatSize(n):
// "1.5KiB (1536 bytes)", rounding as Number.toFixed(1) does. formatSize
// in sizes.js, which the viewer uses, is this function's mirror.
func Viz(n uint64) string { return viz(float64(n), true) }

// VizShort is memory_viz's formatSize(n, false): "1.5KiB".
func VizShort(n uint64) string { return viz(float64(n), false) }

func viz(num float64, showBytes bool) string {
	orig := num
	for _, unit := range binaryUnits {
		if math.Abs(num) < 1024 {
			if showBytes {
				return toFixed1(num) + unit + "B (" + strconv.FormatFloat(orig, 'f', -1, 64) + " bytes)"
			}
			return toFixed1(num) + unit + "B"
		}
		num /= 1024
	}
	return toFixed1(num) + "YiB"
}

// toFixed1 is JavaScript's Number.prototype.toFixed(1): round half away
// from zero on the exact binary value (strconv rounds half to even, which
// differs only for exact ties such as 0.25).
func toFixed1(x float64) string {
	s := strconv.FormatFloat(x, 'f', 1, 64)
	exact := strconv.FormatFloat(x, 'f', -1, 64)
	if i := strings.IndexByte(exact, '.'); i >= 0 && len(exact) == i+3 && exact[i+2] == '5' {
		r := math.Floor(math.Abs(x)*10) + 1
		if x < 0 {
			r = -r
		}
		s = strconv.FormatFloat(r/10, 'f', 1, 64)
	}
	return s
}

// AppendVizLower appends strings.ToLower(Viz(n)) without formatting a
// float: the viewer's search matches lower-cased element headers, and
// FormatFloat is most of the cost of one. Below 2^53 bytes (exact in
// float64, as Viz computes) it rounds the one decimal half up in integers.
func AppendVizLower(b []byte, n uint64) []byte {
	if n >= 1<<53 {
		return append(b, strings.ToLower(Viz(n))...)
	}
	lower := [...]string{"b", "kib", "mib", "gib", "tib", "pib"}
	k := 0
	for k+1 < len(lower) && n>>(10*(k+1)) > 0 && n >= 1024<<(10*k) {
		k++
	}
	shift := uint(10 * k)
	tenths := (20*n + 1<<shift) >> (shift + 1) // round(10n / 2^shift), half up
	b = strconv.AppendUint(b, tenths/10, 10)
	b = append(b, '.')
	b = append(b, byte('0'+tenths%10))
	b = append(b, lower[k]...)
	b = append(b, " ("...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, " bytes)"...)
}

// C10 formats n as c10's format_size does in CUDA out-of-memory messages:
// "1024 bytes" up to 1 KiB, then KiB, MiB or GiB with two decimals.
func C10(n uint64) string {
	switch {
	case n <= KiB:
		return fmt.Sprintf("%d bytes", n)
	case n <= MiB:
		return fmt.Sprintf("%.2f KiB", float64(n)/KiB)
	case n <= GiB:
		return fmt.Sprintf("%.2f MiB", float64(n)/MiB)
	default:
		return fmt.Sprintf("%.2f GiB", float64(n)/GiB)
	}
}

// Human formats n for gpumem's own short summaries: exact bytes below
// 10 KiB ("512 B"), else at most two decimals of the largest binary unit
// it reaches, trailing zeros dropped ("1.5 GiB", "20 MiB").
func Human(n uint64) string {
	switch {
	case n < 10*KiB:
		return strconv.FormatUint(n, 10) + " B"
	case n < MiB:
		return trimmed(float64(n)/KiB, "KiB")
	case n < GiB:
		return trimmed(float64(n)/MiB, "MiB")
	default:
		return trimmed(float64(n)/GiB, "GiB")
	}
}

// HumanSigned is Human with a sign: "+20 MiB", "-512 B", "0".
func HumanSigned(d int64) string {
	switch {
	case d > 0:
		return "+" + Human(uint64(d))
	case d < 0:
		return "-" + Human(uint64(-d))
	}
	return "0"
}

func trimmed(v float64, unit string) string {
	s := strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	return s + " " + unit
}

// Progress formats a byte count for a progress line: one decimal of MiB,
// or of GiB from 1 GiB ("123.0 MiB of 1.0 GiB"), so the figure moves
// smoothly while a file loads.
func Progress(n int64) string {
	if n >= GiB {
		return strconv.FormatFloat(float64(n)/GiB, 'f', 1, 64) + " GiB"
	}
	return strconv.FormatFloat(float64(n)/MiB, 'f', 1, 64) + " MiB"
}

// Thousands writes n with comma separators (6,738,415,616), for counts of
// bytes, parameters and events.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// List writes device or rank numbers as the messages name them: "0, 1, 3".
func List(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
