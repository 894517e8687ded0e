package analysis

import (
	"slices"

	"github.com/gpumem/gpumem/internal/rules"
	"github.com/gpumem/gpumem/snapshot"
)

// SiteCurve is the bytes live from one allocation site over a device's
// trace, in buckets of events (rules.Buckets, the buckets of the
// timeline's totals): the Compare view draws it under each run's curve
// when a site of the diff is picked, so that the site's allocations are
// seen in both runs at once.
type SiteCurve struct {
	// Frames is the site: its innermost user frames as the diff spells
	// them (DiffSite.Frames), innermost first.
	Frames []string `json:"frames"`
	Events int      `json:"events"`
	// FirstEvent is each bucket's first raw event; BytesMax the most
	// bytes of the site live after any event of the bucket.
	FirstEvent []int32  `json:"first_event"`
	BytesMax   []uint64 `json:"bytes_max"`
	// Allocations counts the site's allocations on the Active Memory
	// Timeline (those made in the trace and those live before it).
	Allocations int `json:"allocations"`
}

// SiteCurve is the bytes of the allocations whose depth innermost user
// frames (TopFrames, as the diff folds them) are frames, live after each
// event, in at most buckets buckets. O(elements + events).
func (d *Device) SiteCurve(frames []string, depth, buckets int) *SiteCurve {
	ev := d.Events()
	n := len(ev)
	out := &SiteCurve{Frames: frames, Events: n, FirstEvent: []int32{}, BytesMax: []uint64{}}
	if n == 0 || buckets <= 0 {
		return out
	}
	match := map[snapshot.StackID]bool{}
	of := func(st snapshot.StackID) bool {
		m, ok := match[st]
		if !ok {
			top := TopFrames(d.S, d.S.StackFrames(st), depth)
			m = len(top) == len(frames)
			for k := 0; m && k < len(top); k++ {
				m = FrameString(d.S, top[k]) == frames[k]
			}
			match[st] = m
		}
		return m
	}
	// delta[i]: how the site's live bytes change with event i; an
	// element is live after the events from its birth to before its
	// death (both raw events; born before the trace: from the start).
	lt := d.Active
	delta := make([]int64, n+1)
	for i := range lt.Len() {
		d.pauseAt(i)
		if !of(d.itemStack(i)) {
			continue
		}
		it := lt.Item(i)
		from, to := 0, n
		if it.Born >= 0 {
			from = int(lt.Events[it.Born])
		}
		if int(it.Died) < len(lt.Events) {
			to = int(lt.Events[it.Died])
		}
		out.Allocations++
		delta[from] += int64(it.Size)
		delta[to] -= int64(it.Size)
	}
	buckets = min(buckets, n)
	bounds := rules.Buckets(0, n, buckets)
	out.FirstEvent = slices.Clip(bounds[:buckets])
	out.BytesMax = make([]uint64, buckets)
	var live int64
	for b := 0; b < buckets; b++ {
		var hi int64
		for i := bounds[b]; i < bounds[b+1]; i++ {
			live += delta[i]
			hi = max(hi, live)
		}
		out.BytesMax[b] = uint64(hi)
	}
	return out
}
