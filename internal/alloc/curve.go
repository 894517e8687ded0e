package alloc

import "github.com/gpumem/gpumem/internal/rules"

// ReplayCurve is a replay's reserved bytes over the trace reduced to
// buckets of events, beside the recorded reserved bytes on the same
// buckets: what the What-if view draws. The buckets are every trace
// curve's (rules.Buckets over the whole trace, as the timeline's totals,
// replay.Curves.Downsample), so that the recorded curve lies on the
// timeline's.
type ReplayCurve struct {
	Bounds []int32 // len(Reserved)+1 bounds
	// Reserved is the highest reserved bytes of the model after any event
	// of the bucket; Recorded the same of the trace's segment events.
	Reserved, Recorded []uint64
	n                  int // events
}

// newReplayCurve makes the curve of a trace of n events in at most
// buckets buckets (none for an empty trace).
func newReplayCurve(n, buckets int) *ReplayCurve {
	buckets = min(buckets, n)
	if buckets <= 0 {
		return &ReplayCurve{Bounds: []int32{0}, Reserved: []uint64{}, Recorded: []uint64{}}
	}
	return &ReplayCurve{Bounds: rules.Buckets(0, n, buckets), Reserved: make([]uint64, buckets), Recorded: make([]uint64, buckets), n: n}
}

// mark takes the values after event i into its bucket (an event marked
// twice keeps the higher values).
func (c *ReplayCurve) mark(i int, model, recorded uint64) {
	if len(c.Reserved) == 0 || i < 0 || i >= c.n {
		return
	}
	b := rules.BucketOf(i, 0, c.n, len(c.Reserved))
	c.Reserved[b] = max(c.Reserved[b], model)
	c.Recorded[b] = max(c.Recorded[b], recorded)
}
