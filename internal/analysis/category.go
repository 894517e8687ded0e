package analysis

import (
	"fmt"
	"strings"

	"github.com/gpumem/gpumem/snapshot"
)

// Category is one of PyTorch's memory categories, those torch.profiler's
// memory timeline uses, plus Unknown.
type Category uint8

// The categories, in the order outputs list them.
const (
	Unknown Category = iota
	Parameter
	OptimizerState
	Gradient
	Activation
	Temporary
	Input
	AutogradDetail
	numCategories
)

var categoryNames = [numCategories]string{
	Unknown:        "unknown",
	Parameter:      "parameter",
	OptimizerState: "optimizer_state",
	Gradient:       "gradient",
	Activation:     "activation",
	Temporary:      "temporary",
	Input:          "input",
	AutogradDetail: "autograd_detail",
}

// String returns the category's name as torch.profiler spells it.
func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	return "unknown"
}

// Categories lists every category in output order (Unknown last).
func Categories() []Category {
	return []Category{Parameter, OptimizerState, Gradient, Activation, Temporary, Input, AutogradDetail, Unknown}
}

// Category returns the category of item i of d.Active (see classify).
// The first call classifies every allocation; it is safe for concurrent
// use (the viewer asks from several requests).
func (d *Device) Category(i int) Category {
	d.catsOnce.Do(func() {
		if cats, ok := profilerCategories(d); ok {
			d.cats = cats
			return
		}
		d.cats = classify(d)
	})
	return d.cats[i]
}

// Evidence a stack can carry, one bit per kind of frame found in it.
type evidence uint16

const (
	evStack       evidence = 1 << iota // the stack has frames
	evPython                           // ... and Python frames among them
	evWorkspace                        // a cuBLAS/cuDNN workspace, not a tensor
	evAccumulate                       // autograd's AccumulateGrad
	evEngine                           // the C++ autograd engine (backward thread)
	evPyBackward                       // Tensor.backward / torch.autograd.backward
	evOptimInit                        // torch/optim/* _init_group (lazy state)
	evOptim                            // any torch/optim frame (Optimizer.step's wrapper)
	evZeroGrad                         // zero_grad
	evModuleApply                      // nn.Module._apply / to / cuda / to_empty
	evDataLoader                       // torch/utils/data
	evForward                          // a module's forward or _call_impl
	evInit                             // an __init__ (model construction)
)

// frameEvidence classifies one frame.
func frameEvidence(f *snapshot.Frame) evidence {
	fn := strings.ReplaceAll(f.Filename, `\`, "/")
	name := f.Name
	var e evidence
	if strings.HasSuffix(fn, ".py") {
		e |= evPython
		switch {
		case name == "backward" && (strings.Contains(fn, "torch/_tensor.py") || strings.Contains(fn, "torch/autograd/")):
			e |= evPyBackward
		case name == "_make_grads" && strings.Contains(fn, "torch/autograd/"):
			e |= evPyBackward
		case name == "_init_group" && strings.Contains(fn, "torch/optim/"):
			e |= evOptimInit | evOptim
		case name == "zero_grad":
			e |= evZeroGrad
		case strings.Contains(fn, "torch/optim/"):
			e |= evOptim
		case strings.Contains(fn, "torch/nn/modules/module.py") && (name == "_apply" || name == "to" || name == "cuda" || name == "to_empty"):
			e |= evModuleApply
		case strings.Contains(fn, "torch/utils/data/"):
			e |= evDataLoader
		case name == "forward" || strings.Contains(fn, "torch/nn/modules/module.py") && strings.HasSuffix(name, "call_impl"):
			e |= evForward
		case name == "__init__":
			e |= evInit
		}
		return e
	}
	switch {
	case strings.Contains(name, "AccumulateGrad"):
		e |= evAccumulate
	case strings.Contains(name, "autograd::Engine::") || strings.Contains(name, "autograd::engine"):
		e |= evEngine
	case strings.Contains(name, "Workspace") && strings.Contains(name, "at::cuda"):
		e |= evWorkspace
	}
	return e
}

// phase is the part of a training step an allocation was made in.
type phase uint8

const (
	phaseNone      phase = iota // no evidence
	phaseForward                // a module's forward, or user code around it
	phaseBackward               // the autograd engine
	phaseOptimizer              // Optimizer.step
)

// classify assigns every allocation of d.Active a category, from strong
// evidence in its frames first, then from the phase it was made in and
// whether it outlived that phase, then, for blocks without a stack made
// before the trace, from their sizes. The README lists the rules.
func classify(d *Device) []Category {
	s := d.S
	items := d.Active.Items
	n := int32(len(d.Active.Events))
	cats := make([]Category, len(items))
	ev := d.Events()

	frameEv := make([]evidence, len(s.Frames))
	for i := range s.Frames {
		frameEv[i] = frameEvidence(&s.Frames[i])
	}
	// Evidence per stack, computed on first use (evComputed marks it).
	const evComputed evidence = 1 << 15
	stackEv := make([]evidence, s.Stacks.Len()+1)
	evOf := func(st snapshot.StackID) evidence {
		if st < 0 || int(st) >= len(stackEv) {
			return 0
		}
		if e := stackEv[st]; e&evComputed != 0 {
			return e &^ evComputed
		}
		var e evidence
		for _, f := range s.StackFrames(st) {
			if f >= 0 && int(f) < len(frameEv) {
				e |= evStack | frameEv[f]
			}
		}
		stackEv[st] = e | evComputed
		return e
	}
	steps := optimizerSteps(s, d.Index)

	// Per item: its evidence and phase. Items are in element order, which
	// for trace allocations is birth order.
	evs := make([]evidence, len(items))
	phases := make([]phase, len(items))
	inBackward := false // between a Python backward call and the next main-thread frames
	for i := range items {
		d.pauseAt(i)
		it := &items[i]
		var t int64
		hasT := false
		if it.Alloc >= 0 {
			t, hasT = ev[it.Alloc].TimeUS, ev[it.Alloc].Flags&snapshot.FlagHasTime != 0
		}
		e := evOf(d.itemStack(i))
		evs[i] = e
		p := phaseNone
		switch {
		case e&(evEngine|evPyBackward|evAccumulate) != 0:
			p = phaseBackward
		case e&evOptim != 0:
			p = phaseOptimizer
		case e&evPython != 0:
			p = phaseForward
		case e&evStack == 0 && it.Alloc >= 0 && inBackward:
			// Python-only stacks: the backward thread's allocations have
			// no frames; the main thread waits in backward meanwhile.
			p = phaseBackward
		}
		if p != phaseBackward && p != phaseNone && hasT && steps.contains(t) {
			p = phaseOptimizer
		}
		if it.Alloc >= 0 && e&evPython != 0 {
			inBackward = e&evPyBackward != 0
		}
		phases[i] = p
	}

	// runEnd[i]: the birth of the next allocation in a different known
	// phase (n when none): "outlived its phase" is Died >= runEnd.
	// runLast[i]: the birth of the last allocation of the same run.
	runEnd := make([]int32, len(items))
	runLast := make([]int32, len(items))
	next := [4]int32{n, n, n, n} // next birth of each phase, scanning backwards
	last := [4]int32{}
	prev := phaseNone
	for i := len(items) - 1; i >= 0; i-- {
		it := &items[i]
		if it.Born < 0 {
			continue
		}
		p := phases[i]
		end := n
		for q := phaseForward; q <= phaseOptimizer; q++ {
			if q != p && next[q] < end {
				end = next[q]
			}
		}
		runEnd[i] = end
		if p == phaseNone {
			continue
		}
		if p != prev {
			last[p] = it.Born
		}
		runLast[i] = last[p]
		next[p] = it.Born
		prev = p
	}

	// cut: the trace ends with an OOM that no allocation follows (synth
	// --capacity, a dump from an OOM observer): the last phase never ended.
	cut := false
	for r := len(ev) - 1; r >= 0; r-- {
		if ev[r].Action == snapshot.ActionOOM {
			last := int32(-1)
			for i := range items {
				last = max(last, items[i].Born)
			}
			cut = int(last) <= d.Active.ActionAtEvent(r)
			break
		}
	}

	// Allocations of a forward run made before its first module forward
	// (the batch put on the device) are inputs when they outlive the run.
	seenForward := false
	for i := range items {
		it := &items[i]
		e, p := evs[i], phases[i]
		switch {
		case e&evWorkspace != 0:
			cats[i] = Unknown
			continue
		case e&evAccumulate != 0 || e&evZeroGrad != 0 && e&evOptimInit == 0:
			cats[i] = Gradient
			continue
		case e&evOptimInit != 0:
			cats[i] = OptimizerState
			continue
		case e&evModuleApply != 0 && e&evForward == 0:
			cats[i] = Parameter
			continue
		case e&evDataLoader != 0:
			cats[i] = Input
			continue
		}
		if p != phaseForward {
			seenForward = false
		}
		if it.Born < 0 {
			// Made before the trace: it outlived the phase it was made in
			// when it is freed after the trace's first allocation of
			// another phase (next holds each phase's first birth now).
			end := n
			for q := phaseForward; q <= phaseOptimizer; q++ {
				if q != p && next[q] < end {
					end = next[q]
				}
			}
			outlived := it.Died >= end
			switch {
			case p == phaseOptimizer:
				cats[i] = pick(outlived, OptimizerState, Temporary)
			case p == phaseBackward:
				cats[i] = pick(outlived, Gradient, AutogradDetail)
			case e&evInit != 0 && e&evForward == 0 && it.Died == n:
				cats[i] = Parameter
			case p == phaseForward && e&evForward != 0:
				cats[i] = pick(outlived, Activation, Temporary)
			}
			continue
		}
		outlived := it.Died >= runEnd[i]
		if cut && runEnd[i] == n && it.Died == n && (p == phaseBackward || p == phaseOptimizer) {
			// The OOM ended the trace inside this backward pass or
			// optimizer step: whether what is live would have outlived
			// it is not known.
			continue
		}
		switch p {
		case phaseOptimizer:
			cats[i] = pick(outlived, OptimizerState, Temporary)
		case phaseBackward:
			// A gradient outlives the backward pass: it is still live
			// after the pass's last allocation, or zero_grad frees it.
			grad := it.Died > runLast[i] || it.Free >= 0 && evOf(ev[it.Free].Stack)&evZeroGrad != 0
			cats[i] = pick(grad, Gradient, AutogradDetail)
		case phaseForward:
			switch {
			case e&evForward != 0:
				seenForward = true
				cats[i] = pick(outlived, Activation, Temporary)
			case e&evInit != 0 && it.Died == n && !seenForward:
				cats[i] = Parameter // a module built on the device
			case !seenForward:
				cats[i] = pick(outlived, Input, Temporary)
			default:
				cats[i] = pick(outlived, Activation, Temporary) // loss and friends
			}
		}
	}

	// A block without a stack, made before the trace and alive to its end,
	// whose size is that of a gradient or optimizer state recognised by its
	// frames, is a parameter (both are made per parameter with its size).
	// An optimizer keeps as many states of one kind (one site) as it has
	// parameters, so per size at most that many such blocks are
	// parameters; the rest (gradients or state made before the trace, which
	// the snapshot cannot tell apart) stay unknown.
	paired := map[uint64]bool{}
	type stackSize struct {
		st   snapshot.StackID
		size uint64
	}
	perSite := map[stackSize]int{}
	for i := range items {
		it := &items[i]
		c := cats[i]
		if (c == Gradient || c == OptimizerState) && evs[i]&evStack != 0 {
			paired[it.Size] = true
		}
		if c == OptimizerState && it.Died == n {
			perSite[stackSize{d.itemStack(i), it.Size}]++
		}
	}
	limit := map[uint64]int{}
	for k, v := range perSite {
		limit[k.size] = max(limit[k.size], v)
	}
	taken := map[uint64]int{}
	for i := range items {
		it := &items[i]
		if it.Born >= 0 || it.Died != n || evs[i]&evStack != 0 || !paired[it.Size] {
			continue
		}
		if l, ok := limit[it.Size]; ok && taken[it.Size] >= l {
			continue
		}
		taken[it.Size]++
		cats[i] = Parameter
	}
	return cats
}

func pick(cond bool, a, b Category) Category {
	if cond {
		return a
	}
	return b
}

// timeRanges are closed [start, end] µs intervals.
type timeRanges [][2]int64

func (r timeRanges) contains(t int64) bool {
	for _, x := range r {
		if t >= x[0] && t <= x[1] {
			return true
		}
	}
	return false
}

// optimizerSteps returns the Optimizer.step#* annotation ranges of a
// device.
func optimizerSteps(s *snapshot.Snapshot, device int) timeRanges {
	var out timeRanges
	for _, sp := range s.AnnotationSpans(device, "Optimizer.step#") {
		out = append(out, [2]int64{sp.StartUS, sp.EndUS})
	}
	return out
}

// Totals are bytes per category, indexed by Category.
type Totals [numCategories]uint64

// CategoriesAt sums the live allocations' bytes per category at m.
func (d *Device) CategoriesAt(m Moment) Totals {
	var t Totals
	d.Active.Live(m.Action, func(i int) { t[d.Category(i)] += d.Active.Items[i].Size })
	return t
}

// CategorySweep follows the live bytes per category along the Active
// Memory Timeline's actions: Live starts as the total before the first
// action, and Apply(k) for k = 0, 1, ... in order adds action k's effect.
type CategorySweep struct {
	Live Totals
	d    *Device
	// act[k] is action k's allocation: i+1 when it is born then, -i-1 when
	// it dies (each action pushes or pops one element), 0 for none.
	act []int32
}

// NewCategorySweep starts a sweep before the first action. One array of
// an int32 per action (not a list per action: millions of actions).
func (d *Device) NewCategorySweep() *CategorySweep {
	lt := d.Active
	c := &CategorySweep{d: d, act: make([]int32, len(lt.Events))}
	for i := range lt.Items {
		it := &lt.Items[i]
		if it.Born < 0 {
			c.Live[d.Category(i)] += it.Size
		} else if int(it.Born) < len(c.act) {
			c.act[it.Born] = int32(i + 1)
		}
		if it.Died >= 0 && int(it.Died) < len(c.act) {
			c.act[it.Died] = int32(-i - 1)
		}
	}
	return c
}

// Apply adds the effect of action k.
func (c *CategorySweep) Apply(k int) {
	switch x := c.act[k]; {
	case x > 0:
		c.Live[c.d.Category(int(x-1))] += c.d.Active.Items[x-1].Size
	case x < 0:
		c.Live[c.d.Category(int(-x-1))] -= c.d.Active.Items[-x-1].Size
	}
}

// Classes assigns each allocation of the Active Memory Timeline (by
// element id) a class for colouring: by "category" (the legend is the
// category names in Categories' order) or by "stream" (the legend names
// the streams present, in memory_viz's stream numbering).
func (d *Device) Classes(by string) (legend []string, classes []uint8, err error) {
	classes = make([]uint8, len(d.Active.Items))
	switch by {
	case "category":
		order := map[Category]uint8{}
		for k, c := range Categories() {
			legend = append(legend, c.String())
			order[c] = uint8(k)
		}
		for i := range classes {
			classes[i] = order[d.Category(i)]
		}
	case "stream":
		index := map[snapshot.StreamID]uint8{}
		for i := range classes {
			_, st, addr := d.itemSource(i)
			if st < 0 {
				st = 0
				if si := d.segmentAt(addr); si >= 0 {
					st = d.S.Segments[si].Stream
				}
			}
			k, ok := index[st]
			if !ok {
				if len(legend) == 255 {
					return nil, nil, fmt.Errorf("more than 255 streams")
				}
				k = uint8(len(legend))
				index[st] = k
				legend = append(legend, fmt.Sprintf("stream %d (0x%x)", st, d.S.RawStream(st)))
			}
			classes[i] = k
		}
	default:
		return nil, nil, fmt.Errorf("colour by %q: want category or stream", by)
	}
	return legend, classes, nil
}
