package report

import (
	"io"
	"strings"
	"testing"
)

// TestAnswers: texts come as they are added, a blank line between two;
// JSON is one object for one answer, an array for several, [] for none.
func TestAnswers(t *testing.T) {
	for _, tc := range []struct {
		json bool
		vals []int
		want string
	}{
		{false, nil, ""},
		{false, []int{1}, "a1\n"},
		{false, []int{1, 2, 3}, "a1\n\na2\n\na3\n"},
		{true, nil, "[]\n"},
		{true, []int{1}, "1\n"},
		{true, []int{1, 2}, "[\n  1,\n  2\n]\n"},
	} {
		var b strings.Builder
		a := Answers{W: &b, JSON: tc.json}
		for _, v := range tc.vals {
			if err := a.Add(v, func(w io.Writer) error { _, err := io.WriteString(w, "a"+string(rune('0'+v))+"\n"); return err }); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("json %v, %v: %q, want %q", tc.json, tc.vals, b.String(), tc.want)
		}
	}
}

// TestAnswersNone: a snapshot with nothing to answer for is one line of
// text, set apart from no answer, and nothing in JSON.
func TestAnswersNone(t *testing.T) {
	text := func(w io.Writer) error { _, err := io.WriteString(w, "answer\n"); return err }
	for _, tc := range []struct {
		json bool
		want string
	}{
		{false, "a.pickle: the snapshot holds no segments and no trace events\nanswer\n\nanswer\n"},
		{true, "[\n  1,\n  2\n]\n"},
	} {
		var b strings.Builder
		a := Answers{W: &b, JSON: tc.json}
		if err := a.None("a.pickle"); err != nil {
			t.Fatal(err)
		}
		for _, v := range []int{1, 2} {
			if err := a.Add(v, text); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != tc.want {
			t.Errorf("json %v: %q, want %q", tc.json, b.String(), tc.want)
		}
	}
}
