package alloc

// ReplayCurve is a replay's reserved bytes over the trace reduced to
// buckets of events, beside the recorded reserved bytes on the same
// buckets: what the What-if view draws. The buckets are those the
// timeline's totals use (replay.Curves.Downsample over the whole trace):
// bucket b holds events [Bounds[b], Bounds[b+1]), Bounds[b] =
// b·events/buckets, so that the recorded curve lies on the timeline's.
type ReplayCurve struct {
	Bounds []int32 // len(Reserved)+1 bounds
	// Reserved is the highest reserved bytes of the model after any event
	// of the bucket; Recorded the same of the trace's segment events.
	Reserved, Recorded []uint64
	n                  uint64 // events
}

// newReplayCurve makes the curve of a trace of n events in at most
// buckets buckets (none for an empty trace).
func newReplayCurve(n, buckets int) *ReplayCurve {
	buckets = min(buckets, n)
	if buckets <= 0 {
		return &ReplayCurve{Bounds: []int32{0}, Reserved: []uint64{}, Recorded: []uint64{}}
	}
	c := &ReplayCurve{Bounds: make([]int32, buckets+1), Reserved: make([]uint64, buckets), Recorded: make([]uint64, buckets), n: uint64(n)}
	for b := range c.Bounds {
		c.Bounds[b] = int32(uint64(n) * uint64(b) / uint64(buckets))
	}
	return c
}

// mark takes the values after event i into its bucket (an event marked
// twice keeps the higher values).
func (c *ReplayCurve) mark(i int, model, recorded uint64) {
	if len(c.Reserved) == 0 || i < 0 || uint64(i) >= c.n {
		return
	}
	// The last bucket b with Bounds[b] <= i: b·n/B <= i < (b+1)·n/B.
	b := ((uint64(i)+1)*uint64(len(c.Reserved)) - 1) / c.n
	c.Reserved[b] = max(c.Reserved[b], model)
	c.Recorded[b] = max(c.Recorded[b], recorded)
}
