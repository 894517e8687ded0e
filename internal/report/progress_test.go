package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressBar(t *testing.T) {
	var out bytes.Buffer
	p := &ProgressBar{W: &out, Name: "x.pickle"}
	p.Update(123<<20, 1<<30)
	p.Update(500<<20, 1<<30) // within 100 ms: skipped
	p.Update(1<<30, 1<<30)   // the end is always drawn
	p.Clear()
	want := "\rloading x.pickle: 123.0 MiB of 1.0 GiB (12%)" +
		"\rloading x.pickle: 1.0 GiB of 1.0 GiB (100%) " + // padded over the longer line
		"\r" + strings.Repeat(" ", len("loading x.pickle: 1.0 GiB of 1.0 GiB (100%)")) + "\r"
	if out.String() != want {
		t.Errorf("got %q\nwant %q", out.String(), want)
	}

	out.Reset()
	p = &ProgressBar{W: &out, Name: "-"}
	p.Update(5<<20, -1) // unknown total (stdin)
	if got := out.String(); got != "\rloading -: 5.0 MiB" {
		t.Errorf("unknown total: got %q", got)
	}
}
