package analysis

import "testing"

// FuzzInputKind: whatever the first bytes, telling summaries, monitor
// files and snapshots apart never panics, and a summary row is made or
// refused with an error.
func FuzzInputKind(f *testing.F) {
	f.Add([]byte(`{"file": "x.pickle", "generation": "D3", "devices": [{"device": 0, "trace_entries": 3}]}`))
	f.Add([]byte(`[{"decoded_bytes": 1}]`))
	f.Add([]byte(`{"segments": []}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if InputKind(data) != KindSummary {
			return
		}
		if row, err := RankOfSummary(data, "s.json", 0, -1); err == nil && row.RankInput == nil {
			t.Fatal("a summary row without its source")
		}
	})
}
