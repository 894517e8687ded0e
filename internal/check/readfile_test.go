package check

import (
	"strings"
	"testing"
)

// TestReadFile: a budgets file's relative baselines are relative to its
// directory (standard input's to the working directory); a file that is
// not one, or too large to be one, is an error naming it.
func TestReadFile(t *testing.T) {
	const in = `{"max_peak": "1GiB", "baseline": "old.pickle", "max_increase": "5%",
		"ranks": {"1": {"baseline": "/abs/r1.pickle", "max_increase": "5%"}}}`
	for _, tc := range []struct {
		path, in       string
		base, rankBase string
		err            string
	}{
		{"ci/budgets.json", in, "ci/old.pickle", "/abs/r1.pickle", ""},
		{"-", in, "old.pickle", "/abs/r1.pickle", ""},
		{"ci/budgets.json", `{"max_peek": "1GiB"}`, "", "", "ci/budgets.json: "},
		{"big.json", `{"max_peak": "1GiB"` + strings.Repeat(" ", MaxFileBytes) + `}`, "", "", "big.json: larger than 16 MiB, not a budgets file"},
	} {
		f, err := ReadFile(strings.NewReader(tc.in), tc.path)
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.path, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.path, err)
		}
		if f.Baseline != tc.base || f.Ranks["1"].Baseline != tc.rankBase {
			t.Errorf("%s: baselines %q, %q; want %q, %q", tc.path, f.Baseline, f.Ranks["1"].Baseline, tc.base, tc.rankBase)
		}
	}
}

// TestResultErr: a result fails when any budget failed or could not be
// measured, and says how many of how many.
func TestResultErr(t *testing.T) {
	for _, tc := range []struct {
		statuses []Status
		want     string
	}{
		{nil, ""},
		{[]Status{Pass, Pass}, ""},
		{[]Status{Pass, Fail, Error}, "2 of 3 budgets failed"},
	} {
		var checks []Check
		for _, s := range tc.statuses {
			checks = append(checks, Check{Status: s})
		}
		err := NewResult(checks).Err()
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.statuses, err, tc.want)
		}
	}
}
