package analysis

import (
	"strings"
	"testing"
)

// TestParseUserRules: the format, and one-line errors naming the rule.
func TestParseUserRules(t *testing.T) {
	for _, tt := range []struct {
		in, err string
		n       int
	}{
		{`[]`, "", 0},
		{`[{"match": "a", "category": "parameter"}, {"match": "b.*", "category": "kv cache"}]`, "", 2},
		{`{"rules": []}`, "not a list of rules", 0},
		{`[{"match": "a", "category": "x"}, 3]`, "rules[1]: want {\"match\": REGEX, \"category\": NAME} with strings", 0},
		{`[{"match": "a", "category": "x", "colour": "red"}]`, `rules[0]: unknown field "colour"`, 0},
		{`[{"match": "[", "category": "x"}]`, `rules[0]: "match" "[" is not a regular expression`, 0},
		{`[{"category": "x"}]`, `rules[0]: no "match"`, 0},
		{`[{"match": "a", "category": "a\nb"}]`, `rules[0]: "category" "a\nb": want a name`, 0},
		{`[{"match": "a"`, "not JSON", 0},
		{`nonsense`, "not JSON", 0},
	} {
		u, err := ParseUserRules([]byte(tt.in), "r.json")
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: error %v, want one line with %q", tt.in, err, tt.err)
		case err == nil && u.Len() != tt.n:
			t.Errorf("%s: %d rules", tt.in, u.Len())
		}
	}
	u, _ := ParseUserRules([]byte(`[{"match": "a", "category": "parameter"}]`), "r.json")
	if u.rules[0].cat != Parameter {
		t.Errorf("a built-in name is the built-in category: %v", u.rules[0].cat)
	}
}

// FuzzParseUserRules: any bytes give rules or one error line, never a
// panic.
func FuzzParseUserRules(f *testing.F) {
	f.Add([]byte(`[{"match": "model\\.py:\\d+:forward", "category": "attention"}]`))
	f.Add([]byte(`[{"match": "(", "category": "x"}]`))
	f.Add([]byte(`{"match": "a"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		u, err := ParseUserRules(b, "f.json")
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error of several lines: %q", err)
			}
			return
		}
		for k := range u.rules {
			_ = u.reason(k)
		}
	})
}
