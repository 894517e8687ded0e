package alloc

import (
	"errors"
	"fmt"
)

// Request is one call of a request replay (ReplayRequests): a malloc of
// Size bytes (requested, before rounding) on Stream that names its block
// ID, or with Free the free of block ID.
type Request struct {
	ID     int32
	Size   uint64
	Stream int64
	Free   bool
	// Failed marks the request that ran out of memory in the recording
	// (it has no block: it is never freed).
	Failed bool
}

// RequestsResult is what a request replay shows.
type RequestsResult struct {
	// PeakAllocated and PeakReserved are the allocator's peaks
	// (torch.cuda.max_memory_allocated / max_memory_reserved: rounded
	// block bytes and segment bytes).
	PeakAllocated, PeakReserved uint64
	// FailedOOM: the recording's failed request (Request.Failed) fails in
	// the replay too. OOMs counts every request the replay could not serve;
	// FirstOOM is the index of the first (-1: none).
	FailedOOM bool
	OOMs      int
	FirstOOM  int
	Requests  int
}

// ReplayRequests runs requests through a fresh allocator under cfg on a
// device of capacity bytes (0: unlimited), free-running: the model decides
// where each block goes and when to cudaMalloc, as a what-if must when
// the sizes differ from the recording's (`gpumem sim --batch-scale`). A
// request that does not fit is counted and its block skipped (its free
// too); the recording's failed request, when it fits, stays allocated to
// the end, since what the run did after it is not known.
func ReplayRequests(cfg Config, capacity uint64, reqs []Request) (*RequestsResult, error) {
	a := New(cfg, Options{Capacity: capacity})
	r := &RequestsResult{FirstOOM: -1, Requests: len(reqs)}
	var maxID int32 = -1
	for i := range reqs {
		maxID = max(maxID, reqs[i].ID)
	}
	addrs := make([]uint64, maxID+1)
	live := make([]bool, maxID+1)
	for i := range reqs {
		q := &reqs[i]
		if q.Free {
			if q.ID < 0 || !live[q.ID] {
				continue
			}
			if err := a.Free(addrs[q.ID]); err != nil {
				return nil, fmt.Errorf("request %d: %v", i, err)
			}
			live[q.ID] = false
			continue
		}
		addr, err := a.Malloc(max(q.Size, 1), q.Stream)
		if err != nil {
			var oom *OOMError
			if !errors.As(err, &oom) {
				return nil, fmt.Errorf("request %d: %v", i, err)
			}
			r.OOMs++
			if r.FirstOOM < 0 {
				r.FirstOOM = i
			}
			if q.Failed {
				r.FailedOOM = true
			}
			continue
		}
		if q.ID >= 0 {
			addrs[q.ID], live[q.ID] = addr, true
		}
	}
	st := a.Stats()
	r.PeakAllocated, r.PeakReserved = uint64(st.AllocatedBytes[PoolAll].Peak), uint64(st.ReservedBytes[PoolAll].Peak)
	return r, nil
}
