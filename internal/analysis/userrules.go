package analysis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gpumem/gpumem/snapshot"
)

// A --categories file: an ordered list of {"match": REGEX, "category":
// NAME}. The first rule whose regular expression (Go's RE2 syntax) matches
// any frame of an allocation's stack, spelt "file:line:function", sets its
// category, over the inferred one. NAME may be one of the built-in
// categories or a name of the user's own, shown as its own category.

// maxCategories bounds the built-in and user categories together (Totals
// is an array of this many counters).
const maxCategories = 64

// maxUserRules bounds a rules file (rule numbers must fit a Rule).
const maxUserRules = 100

// RuleUser is the first Rule number of the user's rules: rule k of a
// --categories file is RuleUser + k.
const RuleUser Rule = 128

// userCategoryNames are the names of the user categories, by Category
// from numCategories on; appended under userCategoryMu, read lock-free.
var (
	userCategoryMu    sync.Mutex
	userCategoryNames atomic.Pointer[[]string]
)

// categoryNamed is the category of a name: a built-in one, or a user
// category (registered on first use, for the life of the process).
func categoryNamed(name string) (Category, error) {
	for c := Category(0); c < numCategories; c++ {
		if categoryNames[c] == name {
			return c, nil
		}
	}
	userCategoryMu.Lock()
	defer userCategoryMu.Unlock()
	var names []string
	if p := userCategoryNames.Load(); p != nil {
		names = *p
	}
	for k, n := range names {
		if n == name {
			return numCategories + Category(k), nil
		}
	}
	if int(numCategories)+len(names) >= maxCategories {
		return 0, fmt.Errorf("more than %d categories of your own", maxCategories-int(numCategories))
	}
	grown := append(append([]string(nil), names...), name)
	userCategoryNames.Store(&grown)
	return numCategories + Category(len(names)), nil
}

// UserRules are the rules of a --categories file, in order.
type UserRules struct {
	// Source names the file in reasons and errors.
	Source string
	rules  []userRule
}

type userRule struct {
	match string
	re    *regexp.Regexp
	cat   Category
}

// Len is the number of rules.
func (u *UserRules) Len() int {
	if u == nil {
		return 0
	}
	return len(u.rules)
}

// reason spells user rule k's evidence.
func (u *UserRules) reason(k int) string {
	if u == nil || k < 0 || k >= len(u.rules) {
		return "a rule of the --categories file"
	}
	r := &u.rules[k]
	return fmt.Sprintf("a frame matches rules[%d] of %s (%s) → %s", k, u.Source, strconv.Quote(r.match), r.cat)
}

// LoadUserRules reads a --categories file. Errors name the file and, for
// a bad rule, its index ("rules[2]").
func LoadUserRules(path string) (*UserRules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	u, err := ParseUserRules(data, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return u, nil
}

// ParseUserRules parses a rules file's bytes; source names it in reasons.
func ParseUserRules(data []byte, source string) (*UserRules, error) {
	const shape = `want a JSON array of {"match": REGEX, "category": NAME} rules`
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if json.Valid(data) {
			return nil, fmt.Errorf("not a list of rules: %s", shape)
		}
		if ok := asSyntax(err, &se); ok {
			return nil, fmt.Errorf("not JSON (at byte %d: %v): %s", se.Offset, se, shape)
		}
		return nil, fmt.Errorf("not JSON (%v): %s", err, shape)
	}
	if len(raw) > maxUserRules {
		return nil, fmt.Errorf("%d rules: at most %d", len(raw), maxUserRules)
	}
	u := &UserRules{Source: source}
	for k, r := range raw {
		var one struct {
			Match    *string `json:"match"`
			Category *string `json:"category"`
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&one); err != nil {
			msg := err.Error()
			if strings.HasPrefix(msg, "json: ") {
				msg = strings.TrimPrefix(msg, "json: ")
			}
			if strings.Contains(msg, "cannot unmarshal") {
				msg = `want {"match": REGEX, "category": NAME} with strings`
			}
			return nil, fmt.Errorf("rules[%d]: %s", k, msg)
		}
		switch {
		case one.Match == nil:
			return nil, fmt.Errorf(`rules[%d]: no "match" (a regular expression over "file:line:function")`, k)
		case one.Category == nil:
			return nil, fmt.Errorf(`rules[%d]: no "category"`, k)
		}
		re, err := regexp.Compile(*one.Match)
		if err != nil {
			return nil, fmt.Errorf(`rules[%d]: "match" %s is not a regular expression: %v`, k, strconv.Quote(*one.Match), err)
		}
		name := *one.Category
		if name == "" || len(name) > 64 || strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return nil, fmt.Errorf(`rules[%d]: "category" %s: want a name of 1 to 64 printable characters`, k, strconv.Quote(name))
		}
		c, err := categoryNamed(name)
		if err != nil {
			return nil, fmt.Errorf("rules[%d]: %v", k, err)
		}
		u.rules = append(u.rules, userRule{match: *one.Match, re: re, cat: c})
	}
	return u, nil
}

func asSyntax(err error, se **json.SyntaxError) bool {
	s, ok := err.(*json.SyntaxError)
	if ok {
		*se = s
	}
	return ok
}

// SetUserRules makes u's rules override the inferred categories. It must
// be called before the first category is asked for.
func (d *Device) SetUserRules(u *UserRules) { d.user = u }

// applyUserRules returns, per item, the index of the user rule that sets
// its category (-1: none): the first rule matching any frame.
func applyUserRules(d *Device, u *UserRules) []int16 {
	s := d.S
	items := d.Active
	out := make([]int16, items.Len())
	frameRule := make([]int16, len(s.Frames)) // first rule matching the frame +1; 0: not yet computed
	stackRule := map[snapshot.StackID]int16{}
	var buf []byte
	for i := range items.Len() {
		d.pauseAt(i)
		st := d.itemStack(i)
		k, ok := stackRule[st]
		if !ok {
			k = -1
			for _, f := range s.StackFrames(st) {
				if f < 0 || int(f) >= len(frameRule) {
					continue
				}
				if frameRule[f] == 0 {
					fr := &s.Frames[f]
					buf = append(buf[:0], fr.Filename...)
					buf = append(buf, ':')
					buf = strconv.AppendInt(buf, fr.Line, 10)
					buf = append(buf, ':')
					buf = append(buf, fr.Name...)
					frameRule[f] = int16(len(u.rules)) + 1
					for r := range u.rules {
						if u.rules[r].re.Match(buf) {
							frameRule[f] = int16(r) + 1
							break
						}
					}
				}
				if fr := frameRule[f] - 1; int(fr) < len(u.rules) && (k < 0 || fr < k) {
					k = fr
				}
			}
			stackRule[st] = k
		}
		out[i] = k
	}
	return out
}
