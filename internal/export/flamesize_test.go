package export

import (
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
	"github.com/gpumem/gpumem/internal/units"
)

// TestFlameSizeScriptMirrorsUnits runs the flame graph's size formatting
// through node and checks it prints every size as units.Human and
// units.HumanSigned do, so that the hover line and the subtitle of one SVG
// never print the same bytes two ways. Ties (x.xx5) are where JavaScript's
// toFixed and Go's FormatFloat round differently.
func TestFlameSizeScriptMirrorsUnits(t *testing.T) {
	node := corpus.Tool(t, "node", "the flame graph's script is checked with it; Debian: apt-get install nodejs")
	sizes := []int64{0, 1, 511, 1023, 1024, 10239, 10240, 10241, 1152, 11392, 11648, 1048575, 1048576, 1<<20 + 1<<17,
		1<<30 - 1, 1 << 30, 1<<30 + 1<<27, 4596932612, 4599030272, 1 << 40, 1<<52 + 3}
	r := rand.New(rand.NewPCG(3, 4))
	for range 400 {
		sizes = append(sizes, int64(r.Uint64N(1<<53)>>r.UintN(53)))
	}
	for _, unit := range []int64{1 << 10, 1 << 20, 1 << 30} {
		for k := int64(80); k < 2000; k += 7 {
			sizes = append(sizes, k*unit/8) // odd eighths: exact ties at two decimals
		}
	}
	for _, n := range sizes[:len(sizes)/2] {
		sizes = append(sizes, -n)
	}
	arg, _ := json.Marshal(sizes)
	script := flameSizeScript + "\nconsole.log(JSON.stringify(" + string(arg) +
		".map(function (n) { return [n < 0 ? '' : fmt(n), fmtSigned(n)]; })));\n"
	cmd := exec.Command(node, "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got [][2]string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(sizes) {
		t.Fatalf("node printed %d results (%v): %.200s", len(got), err, out)
	}
	for i, n := range sizes {
		want := [2]string{"", units.HumanSigned(n)}
		if n >= 0 {
			want[0] = units.Human(uint64(n))
		}
		if got[i] != want {
			t.Errorf("%d: flame script %q, units %q", n, got[i], want)
		}
	}
}
