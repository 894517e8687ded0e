package analysis

import (
	"errors"
	"fmt"

	"github.com/gpumem/gpumem/internal/units"
	"github.com/gpumem/gpumem/snapshot"
)

// DumpFlags are gpumem oom's --at-dump, --request, --device-free and
// --stream as typed.
type DumpFlags struct {
	AtDump              bool
	Request, DeviceFree string
	Stream              int64
}

// DumpOOM reads the flags: nil when no OOM at the dump is asked for. The
// errors name the flags.
func (f DumpFlags) DumpOOM() (*DumpOOM, error) {
	if !f.AtDump && f.Request == "" {
		if f.DeviceFree != "" || f.Stream != 0 {
			return nil, errors.New("--device-free and --stream go with --request")
		}
		return nil, nil
	}
	if f.Request == "" {
		return nil, errors.New("--at-dump needs --request SIZE (the error message's \"Tried to allocate …\"), and --device-free SIZE when known")
	}
	dump := &DumpOOM{Stream: f.Stream, DeviceFreeUnknown: f.DeviceFree == ""}
	var err error
	if dump.RequestedBytes, err = units.Parse(f.Request); err != nil || dump.RequestedBytes == 0 {
		return nil, fmt.Errorf("--request %q: want a size such as 2GiB", f.Request)
	}
	if f.DeviceFree != "" {
		if dump.DeviceFreeBytes, err = units.Parse(f.DeviceFree); err != nil {
			return nil, fmt.Errorf("--device-free %q: want a size such as 1.1GiB", f.DeviceFree)
		}
	}
	return dump, nil
}

// CheckDevice fails when the OOM at the dump (nil: none asked for) does
// not say which device ran out: a snapshot of several devices needs the
// device chosen (--device).
func (d *DumpOOM) CheckDevice(s *snapshot.Snapshot, chosen bool) error {
	if d != nil && !chosen && len(s.Devices()) > 1 {
		return fmt.Errorf("--at-dump: the snapshot has devices %s; say which one ran out with --device", units.List(s.Devices()))
	}
	return nil
}

// ParseCapacity reads --capacity SIZE or --gpu NAME (0: neither given);
// the errors name the flags.
func ParseCapacity(size, gpu string) (uint64, error) {
	switch {
	case size != "" && gpu != "":
		return 0, errors.New("give --capacity or --gpu, not both")
	case size != "":
		c, err := units.Parse(size)
		if err != nil || c == 0 {
			return 0, fmt.Errorf("--capacity %q: want a size such as 80GiB", size)
		}
		return c, nil
	case gpu != "":
		g, err := LookupGPU(gpu)
		if err != nil {
			return 0, err
		}
		return g.Bytes, nil
	}
	return 0, nil
}
