package record

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// The values of record's list and monitor settings as a command line
// spells them: the rules on what they may be (a step is >= 1, a rank >= 0,
// a monitor interval >= 1 step) live with the Options they fill.

// StepsValue is --step N[,M,...]: optimizer steps >= 1, appended to Steps.
func (o *Options) StepsValue() flag.Value { return intList{&o.Steps, 1} }

// RanksValue is --ranks LIST: ranks >= 0; given, Ranks is no longer nil.
func (o *Options) RanksValue() flag.Value { return intList{&o.Ranks, 0} }

// MonitorValue is --monitor (every step) or --monitor=K (every K >= 1
// steps); it stands alone as a boolean flag does.
func (o *Options) MonitorValue() flag.Value { return monitorValue{&o.Monitor} }

// intList is a comma-separated list of integers >= min.
type intList struct {
	v   *[]int
	min int
}

func (l intList) String() string {
	if l.v == nil {
		return ""
	}
	s := make([]string, len(*l.v))
	for i, n := range *l.v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l intList) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < l.min {
			return fmt.Errorf("want numbers >= %d separated by commas, not %q", l.min, f)
		}
		*l.v = append(*l.v, n)
	}
	return nil
}

// monitorValue is Monitor's flag.
type monitorValue struct{ n *int }

func (m monitorValue) IsBoolFlag() bool { return true }

func (m monitorValue) String() string {
	if m.n == nil || *m.n == 0 {
		return ""
	}
	return strconv.Itoa(*m.n)
}

func (m monitorValue) Set(s string) error {
	switch s {
	case "true":
		*m.n = 1
		return nil
	case "false":
		*m.n = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return errors.New("want --monitor or --monitor=K with K >= 1 steps")
	}
	*m.n = n
	return nil
}
