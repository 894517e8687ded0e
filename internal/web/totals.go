package web

import (
	"net/http"
)

// totalsJSON is a device's whole trace reduced to buckets, for the Compare
// view's two curves: per bucket, its first raw event, that event's time
// from the trace's first event (when every event has a time), and the
// highest requested (the Active Memory Timeline's total) and reserved
// bytes in it.
type totalsJSON struct {
	Events    int      `json:"events"`
	First     []int32  `json:"first_event"`
	TimeUS    []int64  `json:"time_us_from_start"` // null without times
	Requested []uint64 `json:"requested_max"`
	Reserved  []uint64 `json:"reserved_max"`
}

// handleTotals answers /api/totals?file&device[&n=N]: the device's totals
// curves (replay.Curves, as the timeline's) in at most n buckets (300).
func (s *Server) handleTotals(w http.ResponseWriter, r *http.Request) {
	f, d, ok := s.readyDevice(w, r)
	if !ok {
		return
	}
	dd := f.device(d)
	c, err := dd.totals()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "%s: %v", f.Name, err)
		return
	}
	qp := newQuery(r)
	n := qp.int("n", 300, 2, 4096)
	if qp.bad(w) {
		return
	}
	out := totalsJSON{Events: len(dd.events), First: []int32{}, Requested: []uint64{}, Reserved: []uint64{}}
	if len(dd.events) > 0 {
		ds := c.Downsample(0, len(dd.events), n)
		out.First = ds.Bounds[:ds.Buckets]
		out.Requested, out.Reserved = ds.RequestedMax, ds.ReservedMax
		if f.Snap.TraceTimed(d) {
			t0 := dd.events[0].TimeUS
			for _, i := range out.First {
				out.TimeUS = append(out.TimeUS, dd.events[i].TimeUS-t0)
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
