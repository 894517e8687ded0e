package report

import (
	"encoding/json"
	"io"
)

// WriteJSON writes v as every --json answer is written: indented by two
// spaces, with a newline.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteJSONAnswers writes the answers of a command that answers per file
// or device: one object for one answer, else an array ([] for none).
func WriteJSONAnswers(w io.Writer, out []any) error {
	switch {
	case len(out) == 1:
		return WriteJSON(w, out[0])
	case out == nil:
		return WriteJSON(w, []any{})
	}
	return WriteJSON(w, out)
}
