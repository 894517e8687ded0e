package export

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/demo"
)

// TestFormat: a format's name and options are checked before a file is
// read; each format writes what its writer writes; a device the snapshot
// lacks is an error.
func TestFormat(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	dev := s.DefaultDevice()
	for _, tc := range []struct {
		f      Format
		check  string // the Check error
		writer string // the Writer error
		starts string // what the output starts with
	}{
		{Format{Name: "perfetto", Device: -1, MinSlice: "64KiB"}, "", "", `{`},
		{Format{Name: "perfetto", Device: -1}, "", "", `{`},
		{Format{Name: "perfetto", Device: -1, MinSlice: "lots"}, "--min-slice: ", "", ""},
		{Format{Name: "json", Device: dev}, "", "", `{"schema":"` + JSONSchema},
		{Format{Name: "pprof", Device: -1}, "", "", "\x1f\x8b"}, // gzipped protobuf
		{Format{Name: "pprof", Device: dev + 5}, "", "no device", ""},
		{Format{Name: "svg", Device: -1}, `unknown format "svg"`, "", ""},
	} {
		err := tc.f.Check()
		if (err == nil) != (tc.check == "") || err != nil && !strings.HasPrefix(err.Error(), tc.check) {
			t.Errorf("%+v: Check %v, want %q", tc.f, err, tc.check)
		}
		if err != nil {
			continue
		}
		write, err := tc.f.Writer(s)
		if (err == nil) != (tc.writer == "") || err != nil && !strings.Contains(err.Error(), tc.writer) {
			t.Errorf("%+v: Writer %v, want %q", tc.f, err, tc.writer)
		}
		if err != nil {
			continue
		}
		var b bytes.Buffer
		if err := write(&b); err != nil || !strings.HasPrefix(b.String(), tc.starts) {
			t.Errorf("%+v: wrote %q…, %v; want it to start %q", tc.f, b.String()[:min(b.Len(), 40)], err, tc.starts)
		}
	}
}
