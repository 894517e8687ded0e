package snapshot

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

type sourceInfo struct {
	Name                  string         `json:"name"`
	Size                  int64          `json:"size"`
	Protocol              int            `json:"protocol"`
	Format                string         `json:"format"`
	NSegments             int            `json:"n_segments"`
	NBlocks               int            `json:"n_blocks"`
	TraceEntriesPerDevice []int          `json:"trace_entries_per_device"`
	Actions               map[string]int `json:"actions"`
	NStreams              int            `json:"n_streams"`
}

// corpusGenerations reads the gen column of SOURCES.md.
func corpusGenerations(t testing.TB, dir string) map[string]Generation {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, "SOURCES.md"))
	if err != nil {
		t.Fatal(err)
	}
	gens := map[string]Generation{}
	for _, line := range splitLines(string(md)) {
		cells := splitCells(line)
		if len(cells) >= 5 && len(cells[0]) > 2 && cells[0][0] == '`' {
			gens[cells[0][1:len(cells[0])-1]] = Generation(cells[3])
		}
	}
	return gens
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func splitCells(line string) []string {
	var cells []string
	if len(line) == 0 || line[0] != '|' {
		return nil
	}
	cur := ""
	for _, r := range line[1:] {
		if r == '|' {
			cells = append(cells, trimSpace(cur))
			cur = ""
			continue
		}
		cur += string(r)
	}
	return cells
}

func trimSpace(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

func loadSources(t testing.TB, dir string) []sourceInfo {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "SOURCES.json"))
	if err != nil {
		t.Fatal(err)
	}
	var top struct {
		Snapshots []sourceInfo `json:"snapshots"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	return top.Snapshots
}

// TestCorpus checks every real snapshot against SOURCES.json/SOURCES.md.
func TestCorpus(t *testing.T) {
	dir := corpus.Dir(t)
	gens := corpusGenerations(t, dir)
	srcs := loadSources(t, dir)
	if len(srcs) != len(gens) || len(srcs) == 0 {
		t.Fatalf("SOURCES.json lists %d files, SOURCES.md %d", len(srcs), len(gens))
	}
	for _, src := range srcs {
		t.Run(src.Name, func(t *testing.T) {
			s, err := Open(filepath.Join(dir, src.Name), nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := gens[src.Name]; s.Source.Generation != want {
				t.Errorf("generation %q, want %q", s.Source.Generation, want)
			}
			if s.Source.Protocol != src.Protocol {
				t.Errorf("protocol %d, want %d", s.Source.Protocol, src.Protocol)
			}
			// n_streams counts the distinct raw streams of segments.
			segStreams := map[int64]bool{}
			for _, seg := range s.Segments {
				segStreams[s.RawStream(seg.Stream)] = true
			}
			if len(segStreams) != src.NStreams {
				t.Errorf("segments use %d streams, SOURCES.json says %d", len(segStreams), src.NStreams)
			}
			if len(s.Segments) != src.NSegments || len(s.Blocks) != src.NBlocks {
				t.Errorf("segments/blocks %d/%d, want %d/%d", len(s.Segments), len(s.Blocks), src.NSegments, src.NBlocks)
			}
			if src.TraceEntriesPerDevice == nil {
				if s.Traces != nil {
					t.Errorf("Traces = %d devices, want nil (generation L)", len(s.Traces))
				}
			} else {
				if len(s.Traces) != len(src.TraceEntriesPerDevice) {
					t.Fatalf("%d device traces, want %d", len(s.Traces), len(src.TraceEntriesPerDevice))
				}
				actions := map[string]int{}
				for d, n := range src.TraceEntriesPerDevice {
					if got := len(s.Traces[d].Events); got != n {
						t.Errorf("device %d: %d entries, want %d", d, got, n)
					}
					for _, e := range s.Traces[d].Events {
						actions[e.Action.String()]++
					}
				}
				if len(actions) != len(src.Actions) {
					t.Errorf("actions %v, want %v", actions, src.Actions)
				}
				for a, n := range src.Actions {
					if actions[a] != n {
						t.Errorf("action %s: %d, want %d", a, actions[a], n)
					}
				}
			}
		})
	}
}
