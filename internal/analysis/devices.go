package analysis

import (
	"fmt"
	"slices"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// noDevice is the error of a device the snapshot (or summary) called name
// does not have.
func noDevice(name string, want int, have []int) error {
	return fmt.Errorf("%s: no device %d (devices: %s)", name, want, units.List(have))
}

// AnswerDevices is the devices an answer per device covers: every device
// of s with data, or only want when it is >= 0 (--device), which s must
// have; name names s in the error.
func AnswerDevices(s *snapshot.Snapshot, name string, want int) ([]int, error) {
	devs := s.Devices()
	if want < 0 {
		return devs, nil
	}
	if !slices.Contains(devs, want) {
		return nil, noDevice(name, want, devs)
	}
	return []int{want}, nil
}

// OneDevice is the device a one-device answer shows: want (--device), or
// the snapshot's DefaultDevice when want < 0. A device the snapshot does
// not have is an error naming the ones it has.
func OneDevice(s *snapshot.Snapshot, want int) (int, error) {
	if want < 0 {
		return s.DefaultDevice(), nil
	}
	if _, err := AnswerDevices(s, s.Source.Name, want); err != nil {
		return 0, err
	}
	return want, nil
}
