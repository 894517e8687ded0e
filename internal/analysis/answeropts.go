package analysis

import (
	"errors"

	"github.com/gpumem/gpumem/snapshot"
)

// AnswerOptions are what the answers per device (gpumem peak and oom)
// share: the devices, the sites' depth and number, and the user's
// category rules.
type AnswerOptions struct {
	Device int // -1: every device with data (AnswerDevices)
	LiveOptions
	Rules *UserRules // nil: the built-in categories only
}

// Validate checks the sites' depth and number; the messages name the
// flags.
func (o LiveOptions) Validate() error {
	if o.Depth < 1 {
		return errors.New("--depth must be at least 1")
	}
	if o.Top < 0 {
		return errors.New("--top must be at least 0 (0 = all)")
	}
	return nil
}

// Devices is the analysis of each device of s that an answer covers, with
// the user's category rules; name names s in the error of a device it
// lacks. A snapshot without segments or trace events has none.
func (o AnswerOptions) Devices(s *snapshot.Snapshot, name string) ([]*Device, error) {
	devs, err := AnswerDevices(s, name, o.Device)
	if err != nil {
		return nil, err
	}
	out := make([]*Device, len(devs))
	for i, d := range devs {
		out[i] = NewDevice(s, d)
		out[i].SetUserRules(o.Rules)
	}
	return out, nil
}
