package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
)

func TestParseIncrease(t *testing.T) {
	for _, tt := range []struct {
		in    string
		want  Increase
		limit float64 // for a baseline of 2 GiB
		err   bool
	}{
		{"5%", Increase{Percent: 5, IsPercent: true}, float64(2<<30) * 5 / 100, false},
		{" 0.5 % ", Increase{Percent: 0.5, IsPercent: true}, float64(2<<30) * 0.5 / 100, false},
		{"1GiB", Increase{Bytes: 1 << 30}, 1 << 30, false},
		{"0", Increase{}, 0, false},
		{"-5%", Increase{}, 0, true},
		{"five", Increase{}, 0, true},
		{"%", Increase{}, 0, true},
		{"NaN%", Increase{}, 0, true},
	} {
		got, err := ParseIncrease(tt.in)
		if (err != nil) != tt.err || err == nil && (got != tt.want || got.Limit(2<<30) != tt.limit) {
			t.Errorf("ParseIncrease(%q) = %+v, %v; limit %v; want %+v, error %v, limit %v", tt.in, got, err, got.Limit(2<<30), tt.want, tt.err, tt.limit)
		}
	}
}

func TestSizeJSON(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Size
		err  bool
	}{
		{`"12GiB"`, 12 << 30, false},
		{`1048576`, 1 << 20, false},
		{`"1.5 MiB"`, 3 << 19, false},
		{`-1`, 0, true},
		{`1.5`, 0, true},
		{`"lots"`, 0, true},
		{`true`, 0, true},
	} {
		var s Size
		err := json.Unmarshal([]byte(tt.in), &s)
		if (err != nil) != tt.err || err == nil && s != tt.want {
			t.Errorf("%s: %d, %v; want %d, error %v", tt.in, s, err, tt.want, tt.err)
		}
	}
}

// TestFileFor: the top level, then devices, then ranks; a gpu set lower
// replaces a capacity set higher.
func TestFileFor(t *testing.T) {
	f, err := ParseFile([]byte(`{
		"max_peak": "10GiB", "max_category": {"activation": "1GiB", "parameter": "2GiB"},
		"min_headroom": "1GiB", "capacity": "80GiB",
		"devices": {"1": {"max_peak": "20GiB", "max_category": {"activation": "3GiB"}}},
		"ranks": {"2": {"max_peak": "30GiB", "gpu": "T4"}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	gib := func(n uint64) Size { return Size(n << 30) }
	for _, tt := range []struct {
		dev, rank  int
		peak, act  Size
		capacity   uint64
		parameterB Size
	}{
		{0, 0, gib(10), gib(1), 80 << 30, gib(2)},
		{1, 0, gib(20), gib(3), 80 << 30, gib(2)},
		{1, 2, gib(30), gib(3), 15360 << 20, gib(2)},
		{0, 2, gib(30), gib(1), 15360 << 20, gib(2)},
	} {
		b := f.For(tt.dev, tt.rank)
		if *b.MaxPeak != tt.peak || b.MaxCategory["activation"] != tt.act || b.MaxCategory["parameter"] != tt.parameterB || b.capacity() != tt.capacity {
			t.Errorf("device %d rank %d: peak %d activation %d parameter %d capacity %d", tt.dev, tt.rank, *b.MaxPeak, b.MaxCategory["activation"], b.MaxCategory["parameter"], b.capacity())
		}
		if err := b.Validate(); err != nil {
			t.Errorf("device %d rank %d: %v", tt.dev, tt.rank, err)
		}
	}
	// The file's own map is not changed by a merge.
	if f.MaxCategory["activation"] != gib(1) {
		t.Errorf("merge changed the top level: %v", f.MaxCategory)
	}
}

func TestParseFileErrors(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"max_peak": "1GiB"} {}`, "more than one JSON value"},
		{`{"max_fragmentation": 2}`, "max_fragmentation 2: want a fraction from 0 to 1"},
		{`{"gpu": "H100", "capacity": "80GiB"}`, "not both"},
		{`{"baseline": "a.pickle"}`, "a baseline and max_increase go together"},
		{`{"ranks": {"1": {"max_increase": "5%"}}}`, "ranks.1: a baseline and max_increase go together"},
		{`{"devices": {"-1": {}}}`, `devices: key "-1" is not a number`},
		{`{"gpu": "Z80"}`, "Z80"},
		{`[]`, "line 1: json: cannot unmarshal array"},
	} {
		_, err := ParseFile([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.in, err, tt.want)
		}
	}
}

// TestVerdict: the line of each kind of check, and exact figures where
// rounding would print the figure and the limit alike.
func TestVerdict(t *testing.T) {
	site := []Site{{Frames: []string{"/src/model.py:12:forward", "/src/train.py:40:step"}, Bytes: 3 << 30}}
	base := 2.0 * (1 << 30)
	for _, tt := range []struct {
		c    Check
		want string
	}{
		{Check{Budget: "max_peak", Subject: "peak active", Unit: Bytes, Value: 12 << 30, Limit: 10 << 30, Sites: site},
			"f.pickle cuda:0: peak active 12 GiB, over the max_peak budget 10 GiB; top site: 3 GiB forward (model.py:12) < step (train.py:40)"},
		{Check{Budget: "max_peak", Subject: "peak active", Unit: Bytes, Value: 10<<30 + 1, Limit: 10 << 30, Sites: site},
			"f.pickle cuda:0: peak active 10737418241 B, over the max_peak budget 10737418240 B; top site: 3 GiB forward (model.py:12) < step (train.py:40)"},
		{Check{Budget: "max_peak", Subject: "peak active", Unit: Bytes, Value: 10 << 30, Limit: 10 << 30, Sites: site},
			"f.pickle cuda:0: peak active 10 GiB, within the max_peak budget 10 GiB"},
		{Check{Budget: "min_headroom", Subject: "headroom", Unit: Bytes, Value: -(1 << 30), Limit: 1 << 30},
			"f.pickle cuda:0: headroom -1 GiB, under the min_headroom budget 1 GiB"},
		{Check{Budget: "min_headroom", Subject: "headroom", Unit: Bytes, Value: 1 << 30, Limit: 1 << 30},
			"f.pickle cuda:0: headroom 1 GiB, at least the min_headroom budget 1 GiB"},
		{Check{Budget: "max_fragmentation", Subject: "fragmentation", Unit: Fraction, Value: 0.30004, Limit: 0.3},
			"f.pickle cuda:0: fragmentation 0.30004, over the max_fragmentation budget 0.3"},
		{Check{Budget: "max_increase", Subject: "peak active over the baseline", Unit: Bytes, Value: -(5 << 20), Limit: 0, Baseline: &base},
			"f.pickle cuda:0: peak active over the baseline -5 MiB, within the max_increase budget 0 B (baseline b.pickle 2 GiB)"},
		{Check{Budget: "max_increase", Subject: "activation at the peak over the baseline", Unit: Bytes, Value: 3 << 30, Limit: 1 << 30, Baseline: &base, Sites: site},
			"f.pickle cuda:0: activation at the peak over the baseline +3 GiB, over the max_increase budget 1 GiB (baseline b.pickle 2 GiB); grew most: +3 GiB forward (model.py:12) < step (train.py:40)"},
		{Check{Budget: "max_growth_per_step", Subject: "growth", Unit: Bytes, Status: Error, Message: "1 step(s) found"},
			"f.pickle cuda:0: growth: cannot be checked: 1 step(s) found"},
	} {
		c := tt.c
		verdict(&c, "f.pickle cuda:0", "b.pickle")
		if c.Message != tt.want {
			t.Errorf("%s %v/%v:\n got %s\nwant %s", c.Budget, c.Value, c.Limit, c.Message, tt.want)
		}
	}
}

// TestRenderers: JUnit XML stays well-formed whatever the messages hold;
// GitHub's workflow commands escape what would end them.
func TestRenderers(t *testing.T) {
	r := NewResult([]Check{
		{File: `a&b<c>.pickle`, Budget: "max_peak", Status: Fail, Message: `a "quoted" <message> & more`},
		{File: `a&b<c>.pickle`, Budget: "max_category", Category: "activation", Status: Pass, Message: "fine"},
		{File: "z.pickle", Device: 1, Budget: "max_growth_per_step", Status: Error, Message: "100% broken,\nreally: yes"},
	})
	if r.OK || r.Failed != 2 || r.Budgets != 3 || r.Summary() != "3 budgets: 1 held, 2 failed" {
		t.Fatalf("result %+v %q", r, r.Summary())
	}
	var buf bytes.Buffer
	if err := r.WriteJUnit(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if doc.Tests != 3 || doc.Failures != 1 || doc.Errors != 1 || len(doc.Suites) != 2 || doc.Suites[0].Name != "a&b<c>.pickle cuda:0" ||
		doc.Suites[0].Cases[0].Failure.Message != `a "quoted" <message> & more` || doc.Suites[0].Cases[1].Name != "max_category activation" {
		t.Errorf("read back %+v\n%s", doc, buf.String())
	}
	buf.Reset()
	if err := r.WriteGitHub(&buf); err != nil {
		t.Fatal(err)
	}
	want := "::error title=gpumem check%3A max_peak::a \"quoted\" <message> & more\n" +
		"::error title=gpumem check%3A max_growth_per_step::100%25 broken,%0Areally: yes\n"
	if buf.String() != want {
		t.Errorf("GitHub:\n%s\nwant\n%s", buf.String(), want)
	}
}

// FuzzParseFile: any input is a budgets file or an error, never a panic;
// a file that parses gives valid budgets for every device and rank.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(`{"max_peak": "10GiB", "devices": {"1": {"max_reserved": 5}}, "ranks": {"0": {"baseline": "a", "max_increase": "5%"}}}`))
	f.Add([]byte(`{"max_category": {"activation": "1GiB"}, "min_headroom": 1, "gpu": "H100"}`))
	f.Add([]byte(`{"max_fragmentation": 0.5, "max_growth_per_step": "0"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		bf, err := ParseFile(data)
		if err != nil {
			return
		}
		for _, dev := range []int{0, 1, 2} {
			for _, rank := range []int{0, 1, 2} {
				b := bf.For(dev, rank)
				if err := b.Validate(); err != nil {
					t.Fatalf("device %d rank %d: %v", dev, rank, err)
				}
			}
		}
		if _, err := json.Marshal(bf); err != nil {
			t.Fatal(err)
		}
	})
}
