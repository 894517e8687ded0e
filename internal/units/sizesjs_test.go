package units_test

import (
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/units"
)

// TestSizesJSMirrorsUnits runs sizes.js (as the flame graph's SVG inlines
// it) through node and checks it prints every size as units.Human,
// units.HumanSigned, units.Python, units.Viz and units.VizShort do, so that a page and the server
// never print the same bytes two ways. Ties (x.xx5, x.x5) are where
// JavaScript's toFixed and Go's FormatFloat round differently.
func TestSizesJSMirrorsUnits(t *testing.T) {
	node := corpus.Tool(t, "node", "sizes.js is checked with it; Debian: apt-get install nodejs")
	sizes := []int64{0, 1, 511, 1023, 1024, 10239, 10240, 10241, 1152, 11392, 11648, 1048575, 1048576, 1<<20 + 1<<17,
		1<<30 - 1, 1 << 30, 1<<30 + 1<<27, 4596932612, 4599030272, 1 << 40, 1<<52 + 3}
	r := rand.New(rand.NewPCG(3, 4))
	for range 400 {
		sizes = append(sizes, int64(r.Uint64N(1<<53)>>r.UintN(53)))
	}
	for _, unit := range []int64{1 << 10, 1 << 20, 1 << 30} {
		for k := int64(80); k < 2000; k += 7 {
			sizes = append(sizes, k*unit/8) // odd eighths: exact ties at two decimals
			sizes = append(sizes, k*unit/4) // odd quarters: exact ties at one decimal
		}
	}
	for _, n := range sizes[:len(sizes)/2] {
		sizes = append(sizes, -n)
	}
	arg, _ := json.Marshal(sizes)
	script := units.ScriptJS() + "\nconsole.log(JSON.stringify(" + string(arg) +
		".map(function (n) { return [n < 0 ? '' : human(n), humanSigned(n), python(n), n < 0 ? '' : formatSize(n), n < 0 ? '' : formatSize(n, false)]; })));\n"
	cmd := exec.Command(node, "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got [][5]string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(sizes) {
		t.Fatalf("node printed %d results (%v): %.200s", len(got), err, out)
	}
	for i, n := range sizes {
		want := [5]string{"", units.HumanSigned(n), units.Python(n)}
		if n >= 0 {
			want[0], want[3], want[4] = units.Human(uint64(n)), units.Viz(uint64(n)), units.VizShort(uint64(n))
		}
		if got[i] != want {
			t.Errorf("%d: sizes.js %q, units %q", n, got[i], want)
		}
	}
}
