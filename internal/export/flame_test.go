package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

// svgFrames parses an SVG flamegraph as XML and returns its frames' titles
// and bytes (data-v), root first.
func svgFrames(t *testing.T, svg []byte) (names []string, values []int64) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	inTitle := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if tok.Name.Local == "g" {
				for _, a := range tok.Attr {
					if a.Name.Local == "data-v" {
						v, _ := strconv.ParseInt(a.Value, 10, 64)
						values = append(values, v)
					}
				}
			}
			inTitle = tok.Name.Local == "title"
		case xml.CharData:
			if inTitle {
				names = append(names, string(tok))
			}
		case xml.EndElement:
			inTitle = false
		}
	}
	return names, values
}

// foldedSum adds up the last number of every folded line.
func foldedSum(t *testing.T, folded []byte) (lines int, sum int64) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(folded))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		v, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("folded line %q: %v", sc.Text(), err)
		}
		lines++
		sum += v
	}
	return lines, sum
}

func TestFlameSVGAndFolded(t *testing.T) {
	tests := []struct {
		name  string
		paths map[string][2]int64 // "a;b;c" -> A, B bytes
		diff  bool
		lines int
		total int64
	}{
		{"plain", map[string][2]int64{"main;fwd;linear": {0, 300}, "main;fwd;gelu": {0, 100}, "main;bwd": {0, 50}, "main": {0, 7}, `we<ird>&";x`: {0, 1}}, false, 5, 458},
		{"diff", map[string][2]int64{"main;fwd": {100, 300}, "main;opt": {400, 200}, "main;gone": {10, 0}}, true, 3, 500},
		{"empty", map[string][2]int64{}, false, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFlame("all")
			for p, v := range tt.paths {
				if tt.diff {
					f.AddDiff(strings.Split(p, ";"), v[0], v[1])
				} else {
					f.Add(strings.Split(p, ";"), v[1])
				}
			}
			var svg, folded bytes.Buffer
			if err := WriteFlameSVG(&svg, f, FlameOptions{Title: "t <1>"}); err != nil {
				t.Fatal(err)
			}
			if err := WriteFolded(&folded, f); err != nil {
				t.Fatal(err)
			}
			names, values := svgFrames(t, svg.Bytes())
			if len(values) == 0 || values[0] != tt.total || names[0] != "all" {
				t.Fatalf("root %v %v, want all = %d", names, values, tt.total)
			}
			var js bytes.Buffer
			if err := WriteFlameJSON(&js, f); err != nil {
				t.Fatal(err)
			}
			var tree struct {
				Name     string `json:"name"`
				Value    int64  `json:"value"`
				Children []any  `json:"children"`
			}
			if err := json.Unmarshal(js.Bytes(), &tree); err != nil || tree.Value != tt.total || tree.Name != "all" {
				t.Errorf("JSON tree %s: %v", js.String(), err)
			}
			lines, sum := foldedSum(t, folded.Bytes())
			if lines != tt.lines || sum != tt.total {
				t.Errorf("folded: %d lines summing to %d, want %d lines, %d (SVG root)\n%s", lines, sum, tt.lines, tt.total, folded.String())
			}
			if tt.name == "plain" && !strings.Contains(folded.String(), "we<ird>&\"\n") && !strings.Contains(folded.String(), "we<ird>&\";x 1") {
				t.Errorf("odd names mangled:\n%s", folded.String())
			}
		})
	}
}
