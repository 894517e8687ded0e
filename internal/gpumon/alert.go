package gpumon

// Alerter reports a device passing a threshold (percent of its total
// memory) once per crossing: it re-arms when the device drops below.
type Alerter struct {
	Threshold float64 // percent, e.g. 90
	above     map[string]bool
}

// NewAlerter makes an Alerter for threshold percent.
func NewAlerter(threshold float64) *Alerter {
	return &Alerter{Threshold: threshold, above: map[string]bool{}}
}

// Check returns an alert for every device that is at or above the
// threshold in s and was below it (or unseen) before.
func (a *Alerter) Check(s Sample) []AlertRecord {
	var out []AlertRecord
	for _, d := range s.Devices {
		if !d.MemKnown || d.Total == 0 {
			continue
		}
		k := DeviceKey(d)
		pct := 100 * float64(d.Used) / float64(d.Total)
		if pct < a.Threshold {
			a.above[k] = false
			continue
		}
		if a.above[k] {
			continue
		}
		a.above[k] = true
		out = append(out, AlertRecord{Type: "alert", Time: s.Time, GPU: d.Index, MIG: migPtr(d.MIG), UUID: d.UUID,
			Used: d.Used, Total: d.Total, Percent: pct, Threshold: a.Threshold})
	}
	return out
}
