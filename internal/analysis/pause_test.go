package analysis

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpumem/gpumem/internal/demo"
)

// TestNewDevicePausedWaits: a device's analysis and its answers stop in
// the pause function while it blocks, and come out the same as
// NewDevice's once it returns.
func TestNewDevicePausedWaits(t *testing.T) {
	s, err := demo.Open()
	if err != nil {
		t.Fatal(err)
	}
	answer := func(d *Device) []byte {
		m, err := d.Resolve("peak")
		if err != nil {
			t.Error(err)
			return nil
		}
		a := d.LiveAnswer(m, LiveOptions{Depth: 3, Top: 20, Items: true})
		b, _ := json.Marshal(a)
		return b
	}
	want := answer(NewDevice(s, 0))

	var busy atomic.Bool
	var calls atomic.Int64
	busy.Store(true)
	pause := func() {
		calls.Add(1)
		for busy.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	done := make(chan []byte, 1)
	go func() { done <- answer(NewDevicePaused(s, 0, pause)) }()
	select {
	case <-done:
		t.Fatal("the paused analysis finished while its pause function blocked")
	case <-time.After(150 * time.Millisecond):
	}
	busy.Store(false)
	var got []byte
	select {
	case got = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the paused analysis never finished once its pause function returned")
	}
	if string(got) != string(want) {
		t.Errorf("the paused peak answer differs from NewDevice's:\n got %s\nwant %s", got, want)
	}
	if calls.Load() == 0 {
		t.Error("pause never called")
	}

	// Beside the lifetimes' loops (replay tests them), the device's own:
	// the state at a moment (the answers' fragmentation) and the
	// categories.
	d := NewDevicePaused(s, 0, func() { calls.Add(1) })
	d.Active.Pause, d.Segments.Pause = nil, nil
	m, _ := d.Resolve("peak")
	calls.Store(0)
	d.FragmentationAt(m)
	if n := calls.Load(); n < 4 {
		t.Errorf("the state at the peak paused %d times, want at least 4 (its two loops, its two sorts)", n)
	}
	calls.Store(0)
	d.Category(0)
	if n := calls.Load(); n < 1 {
		t.Errorf("the categories paused %d times, want at least 1", n)
	}
}
