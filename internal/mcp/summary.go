package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpumem/gpumem/internal/analysis"
	"github.com/gpumem/gpumem/internal/units"
)

// summarize is a tool result's short text: the figures an agent reads
// first, from the command's JSON (one line per answer when it holds
// several). The whole JSON follows it in the result.
func summarize(name string, out []byte) string {
	out = bytes.TrimSpace(out)
	var items []json.RawMessage
	if len(out) > 0 && out[0] == '[' {
		if json.Unmarshal(out, &items) != nil {
			return name + ": see the JSON"
		}
	} else {
		items = []json.RawMessage{out}
	}
	if len(items) == 0 {
		return name + ": no device with data"
	}
	lines := make([]string, 0, len(items))
	for _, it := range items {
		lines = append(lines, summarizeOne(name, it))
	}
	return strings.Join(lines, "\n")
}

type jsonSite struct {
	Frames []string `json:"frames"`
	Bytes  uint64   `json:"bytes"`
}

func topSite(sites []jsonSite) string {
	if len(sites) == 0 {
		return ""
	}
	return fmt.Sprintf("; top site %s %s", units.Human(sites[0].Bytes), analysis.SiteString(sites[0].Frames))
}

func summarizeOne(name string, raw json.RawMessage) string {
	h := units.Human
	switch name {
	case "info":
		var v struct {
			File    string `json:"file"`
			Format  string `json:"generation"`
			Devices []struct {
				Device   int    `json:"device"`
				Active   uint64 `json:"active_timeline_peak_bytes"`
				Reserved uint64 `json:"segment_timeline_peak_bytes"`
			} `json:"devices"`
		}
		if json.Unmarshal(raw, &v) == nil {
			var d []string
			for _, dv := range v.Devices {
				d = append(d, fmt.Sprintf("cuda:%d peak active %s, peak reserved %s", dv.Device, h(dv.Active), h(dv.Reserved)))
			}
			return fmt.Sprintf("%s (format %s): %d device(s); %s", v.File, v.Format, len(v.Devices), strings.Join(d, "; "))
		}
	case "peak":
		var v struct {
			File   string `json:"file"`
			Device int    `json:"device"`
			At     struct {
				Spec  string `json:"spec"`
				Event int    `json:"event"`
			} `json:"at"`
			Peak  uint64     `json:"peak_allocated_bytes"`
			Live  uint64     `json:"live_bytes"`
			Count int        `json:"live_count"`
			Sites []jsonSite `json:"sites"`
			Frag  struct {
				Headline float64 `json:"headline"`
			} `json:"fragmentation"`
		}
		if json.Unmarshal(raw, &v) == nil {
			return fmt.Sprintf("%s cuda:%d at %s (event %d): %s live in %d allocations (peak active %s), fragmentation %.3f%s",
				v.File, v.Device, v.At.Spec, v.At.Event, h(v.Live), v.Count, h(v.Peak), v.Frag.Headline, topSite(v.Sites))
		}
	case "oom":
		var v struct {
			File       string   `json:"file"`
			Device     int      `json:"device"`
			Verdict    string   `json:"verdict"`
			Arithmetic []string `json:"arithmetic"`
			OOMs       []any    `json:"ooms"`
		}
		if json.Unmarshal(raw, &v) == nil {
			s := fmt.Sprintf("%s cuda:%d: %s", v.File, v.Device, v.Verdict)
			if len(v.OOMs) > 1 {
				s += fmt.Sprintf(" (first of %d OOMs)", len(v.OOMs))
			}
			if len(v.Arithmetic) > 0 {
				s += ": " + strings.Join(v.Arithmetic, "; ")
			}
			return s
		}
	case "diff":
		var v struct {
			A, B struct {
				File string `json:"file"`
				Peak uint64 `json:"peak_allocated_bytes"`
				Live uint64 `json:"live_bytes"`
			}
			Sites []struct {
				Frames []string `json:"frames"`
				Delta  int64    `json:"delta_bytes"`
			} `json:"sites"`
		}
		if json.Unmarshal(raw, &v) == nil {
			s := fmt.Sprintf("B %s against A %s: peak active %s -> %s (%s), live at the moment %s -> %s",
				v.B.File, v.A.File, h(v.A.Peak), h(v.B.Peak), units.HumanSigned(int64(v.B.Peak)-int64(v.A.Peak)), h(v.A.Live), h(v.B.Live))
			if len(v.Sites) > 0 {
				s += fmt.Sprintf("; largest change %s %s", units.HumanSigned(v.Sites[0].Delta), analysis.SiteString(v.Sites[0].Frames))
			}
			return s
		}
	case "steps":
		var v struct {
			File   string `json:"file"`
			Device int    `json:"device"`
			Source string `json:"source"`
			Steps  []any  `json:"steps"`
			Leak   bool   `json:"leak"`
			Growth int64  `json:"growth_per_step_bytes"`
		}
		if json.Unmarshal(raw, &v) == nil {
			leak := "no leak"
			if v.Leak {
				leak = "LEAK"
			}
			return fmt.Sprintf("%s cuda:%d: %d steps (from %s); %s, %s per step", v.File, v.Device, len(v.Steps), v.Source, leak, units.HumanSigned(v.Growth))
		}
	case "ranks":
		var v struct {
			Ranks   []any   `json:"ranks"`
			Median  uint64  `json:"median_peak_allocated_bytes"`
			Spread  float64 `json:"spread_percent_of_median"`
			Outlier *struct {
				Rank int    `json:"rank"`
				From int64  `json:"bytes_from_median"`
				File string `json:"file"`
			} `json:"outlier"`
		}
		if json.Unmarshal(raw, &v) == nil {
			s := fmt.Sprintf("%d ranks: median peak active %s, spread %.1f%% of the median", len(v.Ranks), h(v.Median), v.Spread)
			if v.Outlier != nil {
				s += fmt.Sprintf("; outlier rank %d (%s from the median)", v.Outlier.Rank, units.HumanSigned(v.Outlier.From))
			}
			return s
		}
	case "sim":
		var v struct {
			File      string `json:"file"`
			Config    string `json:"config"`
			Predicted struct {
				Reserved uint64 `json:"peak_reserved_bytes"`
				OOMs     []any  `json:"ooms"`
			} `json:"predicted"`
			Recorded *struct {
				Reserved uint64 `json:"peak_reserved_bytes"`
			} `json:"recorded"`
		}
		if json.Unmarshal(raw, &v) == nil {
			s := fmt.Sprintf("%s under %s: predicted peak reserved %s, %d OOM(s)", orScript(v.File), v.Config, h(v.Predicted.Reserved), len(v.Predicted.OOMs))
			if v.Recorded != nil && v.Recorded.Reserved > 0 {
				s += fmt.Sprintf(" (recorded %s)", h(v.Recorded.Reserved))
			}
			return s
		}
	case "estimate":
		var v struct {
			Params   uint64 `json:"parameters"`
			Peak     uint64 `json:"peak_bytes"`
			Total    uint64 `json:"total_bytes"`
			GPU      string `json:"gpu"`
			Fits     *bool  `json:"fits"`
			MaxBatch *int   `json:"max_batch"`
		}
		if json.Unmarshal(raw, &v) == nil {
			s := fmt.Sprintf("%s parameters: peak %s, with context and cache %s", units.Thousands(int64(v.Params)), h(v.Peak), h(v.Total))
			if v.Fits != nil {
				s += fmt.Sprintf("; on %s fits: %v", v.GPU, *v.Fits)
			}
			if v.MaxBatch != nil {
				s += fmt.Sprintf(", largest batch %d", *v.MaxBatch)
			}
			return s
		}
	case "check":
		var v struct {
			OK      bool `json:"ok"`
			Budgets int  `json:"budgets"`
			Failed  int  `json:"failed"`
			Checks  []struct {
				Status  string `json:"status"`
				Message string `json:"message"`
			} `json:"checks"`
		}
		if json.Unmarshal(raw, &v) == nil {
			s := fmt.Sprintf("%d budgets: %d held, %d failed", v.Budgets, v.Budgets-v.Failed, v.Failed)
			for _, c := range v.Checks {
				if c.Status != "pass" {
					s += "\n" + strings.ToUpper(c.Status) + " " + c.Message
				}
			}
			return s
		}
	}
	return name + ": see the JSON"
}

func orScript(file string) string {
	if file == "" {
		return "the script"
	}
	return file
}
