package report

import (
	"fmt"
	"io"
)

// Answers writes the answers of a command that answers per file or
// device as they come: texts separated by a blank line, JSON values kept
// and written by Flush as one document (WriteJSONAnswers).
type Answers struct {
	W    io.Writer
	JSON bool
	vals []any
	n    int // texts written
}

// Add writes one answer: v as JSON (kept until Flush), or text.
func (a *Answers) Add(v any, text func(io.Writer) error) error {
	if a.JSON {
		a.vals = append(a.vals, v)
		return nil
	}
	if a.n++; a.n > 1 {
		if _, err := io.WriteString(a.W, "\n"); err != nil {
			return err
		}
	}
	return text(a.W)
}

// None says, as text, that the snapshot name holds nothing to answer for
// (no segments and no trace events); JSON lists nothing for it. The line
// is no answer: no blank line sets it apart.
func (a *Answers) None(name string) error {
	if a.JSON {
		return nil
	}
	_, err := fmt.Fprintf(a.W, "%s: the snapshot holds no segments and no trace events\n", name)
	return err
}

// Flush writes the JSON document of the answers added (none: []); text
// has been written already.
func (a *Answers) Flush() error {
	if !a.JSON {
		return nil
	}
	return WriteJSONAnswers(a.W, a.vals)
}
