package snapshot

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// pythonCheck loads each pickle with CPython, re-dumps it with
// pickle.dumps(obj, protocol=4) and compares the bytes; where NAME.json
// exists it also compares json.dumps(obj). It prints one line per mismatch.
const pythonCheck = `
import json, os, pickle, sys
for path in sys.argv[1:]:
    data = open(path, 'rb').read()
    obj = pickle.loads(data)
    again = pickle.dumps(obj, protocol=4)
    if again != data:
        n = next((i for i in range(min(len(again), len(data))) if again[i] != data[i]), min(len(again), len(data)))
        print('%s: pickle differs from CPython re-dump at byte %d (ours %d bytes, CPython %d)' % (path, n, len(data), len(again)))
    jpath = path[:-len('.pickle')] + '.json'
    if os.path.exists(jpath):
        want = json.dumps(obj)
        got = open(jpath, encoding='ascii').read()
        if got != want:
            n = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]), min(len(got), len(want)))
            print('%s: JSON differs from json.dumps at char %d: ours %r, CPython %r' % (jpath, n, got[max(0, n-40):n+40], want[max(0, n-40):n+40]))
`

// CPythonCheck writes every snapshot in snaps (name -> snapshot) with
// WritePickle and WriteJSON into a temporary folder and reports each file
// CPython would write differently. It skips when python3 is absent.
func cpythonCheck(t *testing.T, snaps map[string]*Snapshot) {
	t.Helper()
	py := corpus.Tool(t, "python3", "CPython byte-identity is checked with it; Debian: apt-get install python3")
	dir := t.TempDir()
	args := []string{"-c", pythonCheck}
	for name, s := range snaps {
		var pb, jb bytes.Buffer
		if err := WritePickle(&pb, s); err != nil {
			t.Fatalf("%s: WritePickle: %v", name, err)
		}
		if err := WriteJSON(&jb, s); err != nil {
			t.Fatalf("%s: WriteJSON: %v", name, err)
		}
		p := filepath.Join(dir, name+".pickle")
		os.WriteFile(p, pb.Bytes(), 0o644)
		os.WriteFile(filepath.Join(dir, name+".json"), jb.Bytes(), 0o644)
		args = append(args, p)
	}
	out, err := exec.Command(py, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if msg := strings.TrimSpace(string(out)); msg != "" {
		t.Error(strings.ReplaceAll(msg, dir+string(os.PathSeparator), ""))
	}
}

// TestCPythonIdentical re-encodes real snapshots of every generation, plus
// one with unknown keys, and checks the bytes against CPython's.
func TestCPythonIdentical(t *testing.T) {
	dir := corpus.Dir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.pickle"))
	// Smallest file of each generation keeps the test fast.
	best := map[Generation]string{}
	size := map[string]int64{}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			continue
		}
		size[f] = st.Size()
	}
	snaps := map[string]*Snapshot{}
	for _, f := range files {
		if size[f] > 3<<20 {
			continue
		}
		s, err := Open(f, nil)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		g := s.Source.Generation
		if b, ok := best[g]; !ok || size[f] < size[b] {
			best[g] = f
		}
	}
	if testing.Short() && len(best) > 2 {
		t.Log("short mode: checking all generations anyway (small files)")
	}
	for _, f := range best {
		s, err := Open(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		snaps[strings.TrimSuffix(filepath.Base(f), ".pickle")] = s
	}
	if len(snaps) == 0 {
		corpus.Missing(t, "no snapshots in %s", dir)
	}
	cpythonCheck(t, snaps)
}

// TestCPythonBatchingAndScalars checks CPython's container batching (0, 1,
// 999, 1000, 1001 and 2001 items), frame cuts inside large values, and
// scalar encodings (ints across every opcode width, uint64 above 2^63,
// floats, unicode strings) through unknown keys, which replay from JSON.
func TestCPythonBatchingAndScalars(t *testing.T) {
	list := func(n int, item func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = item(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	dict := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf(`"k%d":%d`, i, i*7919)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	num := func(i int) string { return strconv.Itoa(i * 104729) }
	// Long strings push the pickle past several 64 KiB frames.
	long := func(i int) string { return fmt.Sprintf(`"%s%d"`, strings.Repeat("x", 200), i) }
	var extra KeyValues
	for _, n := range []int{0, 1, 2, 999, 1000, 1001, 2001} {
		extra = append(extra, KeyValue{Key: fmt.Sprintf("list%d", n), JSON: list(n, num)},
			KeyValue{Key: fmt.Sprintf("dict%d", n), JSON: dict(n)})
	}
	extra = append(extra,
		KeyValue{Key: "long", JSON: list(1500, long)},
		KeyValue{Key: "nested", JSON: `[[["a"]],[[]],{"one":{"two":[1]}},{}]`},
		KeyValue{Key: "ints", JSON: `[0,255,256,65535,65536,-1,-128,-129,2147483647,2147483648,-2147483648,-2147483649,9223372036854775807,-9223372036854775808,9223372036854775808,18446744073709551615,1099511627776]`},
		KeyValue{Key: "floats", JSON: `[0.0,-0.0,0.1,1.5,1000000.0,1e16,1e22,1e-5,0.0001,123456789012345678.0,2.5e-300]`},
		KeyValue{Key: "strings", JSON: `["", "é", "☃", "😀", "tab\t\"q\"\\ \u007f \u0001", null, true, false]`},
	)
	s := &Snapshot{Source: Source{Generation: GenD7}, Extra: extra}
	cpythonCheck(t, map[string]*Snapshot{"edge": s})
}
