package web

import "github.com/gpumem/gpumem/snapshot"

// vizSteps returns, for each memory_viz event of a device, the timestep at
// which it happens on the Active Memory (or, with segments, the Active
// Cached Segment) timeline, and the number of timesteps. It follows
// process_alloc_data's clock: an alloc or free takes one timestep, and a
// free with live elements above it three more while they slide down.
//
// replay.Timeline has each element's start and end, but reading them means
// formatting every element's stack (seconds on large traces); this walk is
// O(n) and TestAxes checks it against replay on every real snapshot.
func vizSteps(s *snapshot.Snapshot, device int, segmentsView bool) (steps []int32, total int32, ok bool) {
	if device < 0 || device >= len(s.Traces) {
		return nil, 0, true
	}
	events, viz := s.Traces[device].Events, s.Traces[device].Viz
	if len(viz) == 0 && len(events) > 0 {
		return nil, 0, false // the decoder left memory_viz's order to replay
	}
	allocAct, freeAct, freeAct2 := snapshot.ActionAlloc, snapshot.ActionFree, snapshot.ActionFreeCompleted
	if segmentsView {
		allocAct, freeAct, freeAct2 = snapshot.ActionSegmentAlloc, snapshot.ActionSegmentFree, snapshot.ActionSegmentFree
	}
	// Pass 1: elements (as process_alloc_data pairs allocs and frees by
	// address) and the element each event acts on.
	act := make([]int32, len(viz)) // element id, -1 for no action
	var initial []int32            // frees whose alloc is not in the trace
	open := map[uint64]int32{}
	n := int32(0)
	for i, raw := range viz {
		e := &events[raw]
		act[i] = -1
		switch e.VizAction() {
		case allocAct:
			act[i] = n
			open[e.Addr] = n
			n++
		case freeAct, freeAct2:
			if id, found := open[e.Addr]; found {
				act[i] = id
				delete(open, e.Addr)
			} else {
				act[i] = n
				initial = append(initial, n)
				n++
			}
		}
	}
	// Pass 2: the stack. Initial elements are pushed in reverse (the first
	// pre-trace free ends on top); live elements above a freed one are
	// found by dropping dead entries off the top of the stack.
	pushed := make([]bool, n)
	dead := make([]bool, n)
	stack := make([]int32, 0, n)
	for k := len(initial) - 1; k >= 0; k-- {
		stack = append(stack, initial[k])
		pushed[initial[k]] = true
	}
	steps = make([]int32, len(viz))
	for i, id := range act {
		steps[i] = total
		if id < 0 {
			continue
		}
		total++
		if !pushed[id] {
			pushed[id] = true
			stack = append(stack, id)
			continue
		}
		for len(stack) > 0 && dead[stack[len(stack)-1]] {
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1] == id {
			stack = stack[:len(stack)-1]
		} else {
			dead[id] = true
			total += 3
		}
	}
	return steps, total, true
}
