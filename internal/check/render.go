package check

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// Result is every check of one `gpumem check` run: its --json document.
type Result struct {
	// OK: every budget held.
	OK bool `json:"ok"`
	// Budgets counts the checks, Failed those that failed or could not be
	// measured.
	Budgets int     `json:"budgets"`
	Failed  int     `json:"failed"`
	Checks  []Check `json:"checks"`
}

// Err is the result's error: nil when every budget held, else how many
// failed (the command's exit 1).
func (r *Result) Err() error {
	if r.OK {
		return nil
	}
	return fmt.Errorf("%d of %d budgets failed", r.Failed, r.Budgets)
}

// NewResult collects checks.
func NewResult(checks []Check) *Result {
	r := &Result{Checks: checks, Budgets: len(checks)}
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	for _, c := range checks {
		if c.Status != Pass {
			r.Failed++
		}
	}
	r.OK = r.Failed == 0
	return r
}

// Summary is the last line of the text: "7 budgets: 5 held, 2 failed".
func (r *Result) Summary() string {
	plural := "s"
	if r.Budgets == 1 {
		plural = ""
	}
	return fmt.Sprintf("%d budget%s: %d held, %d failed", r.Budgets, plural, r.Budgets-r.Failed, r.Failed)
}

// WriteText prints one line per check ("ok", "FAIL" or "ERROR" first),
// then the summary.
func (r *Result) WriteText(w io.Writer) error {
	for _, c := range r.Checks {
		tag := map[Status]string{Pass: "ok   ", Fail: "FAIL ", Error: "ERROR"}[c.Status]
		if _, err := fmt.Fprintf(w, "%s %s\n", tag, c.Message); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, r.Summary())
	return err
}

// WriteJSON prints the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteGitHub prints a GitHub Actions workflow command (::error::) per
// failed check, so that the run's summary shows it.
func (r *Result) WriteGitHub(w io.Writer) error {
	for _, c := range r.Checks {
		if c.Status == Pass {
			continue
		}
		title := "gpumem check: " + c.Budget
		if c.Category != "" {
			title += " " + c.Category
		}
		if _, err := fmt.Fprintf(w, "::error title=%s::%s\n", escapeProperty(title), escapeData(c.Message)); err != nil {
			return err
		}
	}
	return nil
}

// escapeData and escapeProperty are the escapes of GitHub's workflow
// commands (actions/toolkit's command.ts).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// JUnit XML: one test suite per snapshot and device, one test case per
// budget; a failed budget is a <failure>, one that could not be measured
// an <error>.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes the result as JUnit XML.
func (r *Result) WriteJUnit(w io.Writer) error {
	doc := junitSuites{Name: "gpumem check", Tests: len(r.Checks)}
	index := map[string]int{}
	for _, c := range r.Checks {
		suite := fmt.Sprintf("%s cuda:%d", c.File, c.Device)
		k, ok := index[suite]
		if !ok {
			k = len(doc.Suites)
			index[suite] = k
			doc.Suites = append(doc.Suites, junitSuite{Name: suite})
		}
		s := &doc.Suites[k]
		name := c.Budget
		if c.Category != "" {
			name += " " + c.Category
		}
		tc := junitCase{Name: name, Classname: "gpumem.check." + suite}
		switch c.Status {
		case Fail:
			tc.Failure = &junitMessage{Message: c.Message, Type: c.Budget, Text: c.Message}
			s.Failures++
			doc.Failures++
		case Error:
			tc.Error = &junitMessage{Message: c.Message, Type: c.Budget, Text: c.Message}
			s.Errors++
			doc.Errors++
		default:
			tc.SystemOut = c.Message
		}
		s.Tests++
		s.Cases = append(s.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
