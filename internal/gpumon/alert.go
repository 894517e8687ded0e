package gpumon

// Alerter reports a device passing a threshold (percent of its total
// memory) when it crosses it from below, at most once per device per report
// period: a training loop whose every step peaks above the line gives one
// warning per period, not one per step.
type Alerter struct {
	Threshold float64 // percent, e.g. 90
	above     map[string]bool
	alerted   map[string]bool // in this period
}

// NewAlerter makes an Alerter for threshold percent.
func NewAlerter(threshold float64) *Alerter {
	return &Alerter{Threshold: threshold, above: map[string]bool{}, alerted: map[string]bool{}}
}

// NewPeriod starts a report period: each device may alert again.
func (a *Alerter) NewPeriod() { clear(a.alerted) }

// Check returns an alert for every device that is at or above the
// threshold in s, was below it (or unseen) before and has not alerted in
// this period.
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
		if a.above[k] || a.alerted[k] {
			a.above[k] = true
			continue
		}
		a.above[k], a.alerted[k] = true, true
		out = append(out, AlertRecord{RecordHead: newHead("alert", s.Time, d),
			Used: d.Used, Total: d.Total, Percent: pct, Threshold: a.Threshold})
	}
	return out
}
