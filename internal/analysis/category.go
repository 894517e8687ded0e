package analysis

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpumem/gpumem/internal/replay"
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

// String returns the category's name as torch.profiler spells it, or
// the name a --categories file gave it.
func (c Category) String() string {
	if c < numCategories {
		return categoryNames[c]
	}
	if p := userCategoryNames.Load(); p != nil && int(c-numCategories) < len(*p) {
		return (*p)[c-numCategories]
	}
	return "unknown"
}

// Categories lists the built-in categories in output order (Unknown
// last); Device.Categories adds those of its --categories rules.
func Categories() []Category {
	return []Category{Parameter, OptimizerState, Gradient, Activation, Temporary, Input, AutogradDetail, Unknown}
}

// Categories lists the device's categories in output order: the built-in
// ones, then those its --categories rules name (in rule order), then
// Unknown.
func (d *Device) Categories() []Category {
	out := []Category{Parameter, OptimizerState, Gradient, Activation, Temporary, Input, AutogradDetail}
	if d.user != nil {
		seen := map[Category]bool{}
		for _, r := range d.user.rules {
			if r.cat >= numCategories && !seen[r.cat] {
				seen[r.cat] = true
				out = append(out, r.cat)
			}
		}
	}
	return append(out, Unknown)
}

// CategoryOrder lists the names of a categories map in output order: the
// built-in ones, then the others (a --categories file's) sorted, then
// unknown.
func CategoryOrder(m map[string]uint64) []string {
	var out, extra []string
	builtin := map[string]bool{}
	for _, c := range Categories() {
		builtin[c.String()] = true
		if c != Unknown {
			out = append(out, c.String())
		}
	}
	for name := range m {
		if !builtin[name] {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	return append(append(out, extra...), Unknown.String())
}

// Category returns the category of item i of d.Active (see classify).
// The first call classifies every allocation; it is safe for concurrent
// use (the viewer asks from several requests).
func (d *Device) Category(i int) Category {
	d.catsOnce.Do(d.classifyAll)
	return d.cats[i]
}

// CategoryRule returns the built-in rule that classified item i (what
// decides whether it scales with the batch), even where a --categories
// rule set its category (see EffectiveRule).
func (d *Device) CategoryRule(i int) Rule {
	d.catsOnce.Do(d.classifyAll)
	return d.rules[i]
}

// EffectiveRule is the rule that set item i's category: a user rule
// (RuleUser + k) or the built-in one.
func (d *Device) EffectiveRule(i int) Rule {
	d.catsOnce.Do(d.classifyAll)
	if d.userIdx != nil && d.userIdx[i] >= 0 {
		return RuleUser + Rule(d.userIdx[i])
	}
	return d.rules[i]
}

// CategoryReason is item i's category with its rule and evidence, as the
// answers print it ("category_reason").
func (d *Device) CategoryReason(i int) string {
	return d.RuleReason(d.EffectiveRule(i))
}

// RuleReason spells rule r as category_reason does: "name: evidence".
func (d *Device) RuleReason(r Rule) string {
	if r >= RuleUser {
		return fmt.Sprintf("user-rule-%d: %s", int(r-RuleUser), d.user.reason(int(r-RuleUser)))
	}
	return r.String() + ": " + r.Reason()
}

// Classified says whether the categories are made (a caller that must
// not wait for them asks first).
func (d *Device) Classified() bool { return d.classified.Load() }

func (d *Device) classifyAll() {
	if cats, ok := profilerCategories(d); ok {
		d.cats, d.rules = cats, make([]Rule, len(cats))
		for i := range d.rules {
			d.rules[i] = RuleProfiler
		}
	} else {
		d.cats, d.rules = classify(d)
	}
	if d.user.Len() > 0 {
		d.userIdx = applyUserRules(d, d.user)
		for i, k := range d.userIdx {
			if k >= 0 {
				d.cats[i] = d.user.rules[k].cat
			}
		}
	}
	d.classified.Store(true)
}

// Rule is the rule that set an allocation's category: each has one
// category and one piece of evidence (docs/categories.md has the table).
type Rule uint8

// The rules, in the order classify tries them.
const (
	RuleNone              Rule = iota // no rule applies
	RuleWorkspace                     // a cuBLAS/cuDNN workspace
	RuleAccumulateGrad                // AccumulateGrad
	RuleZeroGrad                      // made or freed by zero_grad
	RuleDDPBucket                     // DDP's Reducer buckets
	RuleOptimInit                     // torch/optim _init_group
	RuleModuleApply                   // nn.Module._apply / to / cuda
	RuleLoadWeights                   // load_state_dict / from_pretrained
	RuleQuantized                     // bitsandbytes quantized weights
	RuleFSDPFlat                      // FSDP flat parameters
	RuleFSDPGather                    // FSDP all-gather buffers
	RuleDataLoader                    // torch/utils/data
	RuleRecompute                     // activation checkpointing's recomputation
	RuleOptimKept                     // optimizer step, outlived it
	RuleOptimTemp                     // optimizer step, died in it
	RuleBackwardGrad                  // backward, outlived the pass
	RuleBackwardDetail                // backward, died in it
	RuleForwardSaved                  // forward, outlived the pass
	RuleForwardTemp                   // forward, died in it
	RuleForwardOOM                    // forward, live at an OOM
	RuleInput                         // made before the first module forward, outlived the pass
	RuleInputOOM                      // the same, live at an OOM
	RuleInputTemp                     // made before the first module forward, died in the pass
	RuleLoss                          // made after the module forwards, outlived the pass
	RuleModuleInit                    // made in an __init__ before any forward, alive to the end
	RuleWeightsNoBackward             // before the trace to its end, no backward in the trace
	RuleWeightsPaired                 // before the trace to its end, pairs with a gradient/state by size
	RuleWeightsFrozen                 // before the trace to its end, no gradient of its size
	RuleWeightsCounted                // parameter: counted by the optimizer among same-size blocks that are also gradients
	RuleGradsCounted                  // gradient: counted by AccumulateGrad's in-place adds among same-size blocks
	RuleUnpaired                      // unknown: more same-size blocks than parameters
	RuleCutByOOM                      // unknown: an OOM cut the pass it was made in
	RuleParamOrGrad                   // unknown: backward in the trace, no lasting gradient made in it
	RuleWorkspaceSize                 // unknown: stackless, the size of a cuBLAS workspace
	RuleProfiler                      // the category torch.profiler gave (a memory timeline export)
	numRules
)

var ruleText = [numRules]struct {
	name, reason string
}{
	RuleNone:              {"none", "no rule applies: no stack evidence and no lifetime evidence"},
	RuleWorkspace:         {"workspace", "a cuBLAS/cuDNN workspace (at::cuda::getNewWorkspace): cached by the library, not a tensor"},
	RuleAccumulateGrad:    {"accumulate-grad", "made by autograd's AccumulateGrad → gradient"},
	RuleZeroGrad:          {"zero-grad", "made or freed by zero_grad → gradient"},
	RuleDDPBucket:         {"ddp-bucket", "made by DDP's Reducer (gradient buckets; the gradients are views into them) → gradient"},
	RuleOptimInit:         {"optimizer-init", "made by torch/optim's _init_group (the optimizer's lazily created state) → optimizer state"},
	RuleModuleApply:       {"module-apply", "made by nn.Module._apply/to/cuda (weights moved to the device) → parameter"},
	RuleLoadWeights:       {"load-weights", "made by load_state_dict/from_pretrained outside any forward → parameter (loaded weights)"},
	RuleQuantized:         {"quantized", "made by bitsandbytes outside any forward (quantized weights and their quantization state) → parameter"},
	RuleFSDPFlat:          {"fsdp-flat", "made by FSDP's flat-parameter set-up → parameter (the local shard)"},
	RuleFSDPGather:        {"fsdp-gather", "made by FSDP's unshard (all-gather of the full parameter for one module) → temporary"},
	RuleDataLoader:        {"dataloader", "made in torch/utils/data → input"},
	RuleRecompute:         {"recompute", "made by activation checkpointing's recomputation in backward → activation (the segment's activations, rebuilt)"},
	RuleOptimKept:         {"optimizer-kept", "made in the optimizer step and outlived it → optimizer state"},
	RuleOptimTemp:         {"optimizer-temp", "made in the optimizer step and died in it → temporary"},
	RuleBackwardGrad:      {"backward-kept", "made in backward and still live when the next phase began (or freed by zero_grad) → gradient"},
	RuleBackwardDetail:    {"backward-temp", "made in backward and died in the pass → autograd detail"},
	RuleForwardSaved:      {"forward-kept", "made in a module's forward and outlived the forward pass (saved for backward, or an output) → activation"},
	RuleForwardTemp:       {"forward-temp", "made in the forward pass and died before the next phase began → temporary"},
	RuleForwardOOM:        {"forward-oom", "made in the forward pass and live at the out-of-memory, which ended the pass (what the unwind freed afterwards is no evidence) → activation: it scales with the batch"},
	RuleInput:             {"input", "made outside any module's forward and live when the next module forward ran, or, before the pass's modules ran, outlived the pass (the batch) → input"},
	RuleInputOOM:          {"input-oom", "made outside any module's forward, live when the next module forward ran and at the out-of-memory that ended the pass → input"},
	RuleInputTemp:         {"input-temp", "made outside any module's forward before the pass's modules ran, and died in the pass before the next one ran → temporary"},
	RuleLoss:              {"loss", "made in the forward pass after the module forwards (the loss and friends) and outlived the pass → activation"},
	RuleModuleInit:        {"module-init", "made in an __init__ before any forward and alive to the end (a module built on the device) → parameter"},
	RuleWeightsNoBackward: {"weights-no-backward", "alive from before the trace (or model set-up) to its end, with a forward and no backward in the trace → parameter (weights)"},
	RuleWeightsPaired:     {"weights-paired", "alive from before the trace to its end, no stack, and the size of a gradient or optimizer state made per parameter → parameter"},
	RuleWeightsFrozen:     {"weights-frozen", "alive from before the trace to its end, no stack, no gradient or optimizer state of its size, in a fine-tune whose trace trains adapters (peft / LoRA frames) → parameter (frozen: it never gets a gradient)"},
	RuleWeightsCounted: {"weights-counted", "one of the same-size blocks alive from before the trace to its end without a stack: " + countedEvidence +
		" — this block is counted a parameter; the bytes per category are exact, which block is which is not recorded"},
	RuleGradsCounted: {"grads-counted", "one of the same-size blocks alive from before the trace to its end without a stack: " + countedEvidence +
		" — this block is counted a gradient; the bytes per category are exact, which block is which is not recorded"},
	RuleUnpaired:      {"unpaired", "alive from before the trace to its end, no stack, its size that of a parameter but more such blocks than parameters: a gradient or state made before the trace cannot be told from a parameter"},
	RuleParamOrGrad:   {"param-or-grad", "alive from before the trace to its end, no stack, in a trace whose backward makes no lasting gradient (gradients kept from before it and accumulated in place) and with no optimizer state to count parameters by: a parameter or a gradient, which the snapshot cannot tell apart"},
	RuleWorkspaceSize: {"workspace-size", "alive from before the trace to its end, no stack, and the size of a cuBLAS workspace (one this snapshot records with its frames, or cuBLAS's default 8519680 or 33554432 B): a workspace, not a tensor"},
	RuleProfiler:      {"profiler", ProfilerReason + ": the profiler follows each tensor's data flow, so its category is used as given"},
	RuleCutByOOM:      {"cut-by-oom", "made in a backward pass or optimizer step that an out-of-memory ended: whether it would have outlived the pass is not known"},
}

// countedEvidence is what weights-counted and grads-counted read.
const countedEvidence = "in the trace's first backward pass that adds into kept gradients, AccumulateGrad freed as many incoming gradients of this size " +
	"as it added into existing ones in place (it made none): that many of these blocks are gradients kept from before the trace " +
	"(less the gradients the trace made before that pass, and the blocks from before it that it frees as gradients or unknown); " +
	"of the rest, as many are parameters as the optimizer keeps states of one kind of this size (one per parameter)"

// String is the rule's short name.
func (r Rule) String() string {
	if r < numRules {
		return ruleText[r].name
	}
	return "none"
}

// Reason is the rule's evidence and conclusion in words.
func (r Rule) Reason() string {
	if r < numRules {
		return ruleText[r].reason
	}
	return ruleText[RuleNone].reason
}

// Rules lists every rule in the order classify tries them.
func Rules() []Rule {
	out := make([]Rule, numRules)
	for i := range out {
		out[i] = Rule(i)
	}
	return out
}

// Evidence a stack can carry, one bit per kind of frame found in it.
type evidence uint32

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
	evForward                          // a module's forward or _call_impl, or Inductor's generated code
	evInit                             // an __init__ (model construction)
	evLoad                             // load_state_dict / from_pretrained
	evQuant                            // bitsandbytes
	evDDP                              // DDP's Reducer (gradient buckets)
	evFSDPFlat                         // FSDP's flat parameter set-up
	evFSDPGather                       // FSDP's unshard (all-gather)
	evCheckpoint                       // torch/utils/checkpoint.py
	evAdapter                          // peft, or a LoRA layer (a fine-tune training adapters)
	evComputed                         // (cache marker, not evidence)
)

// evBackward is the evidence of the autograd engine at work.
const evBackward = evEngine | evPyBackward | evAccumulate

// frameEvidence classifies one frame.
func frameEvidence(f *snapshot.Frame) evidence {
	fn := strings.ReplaceAll(f.Filename, `\`, "/")
	name := f.Name
	var e evidence
	if strings.HasSuffix(fn, ".py") {
		e |= evPython
		if strings.Contains(fn, "/peft/") || strings.Contains(strings.ToLower(fn), "lora") || strings.Contains(strings.ToLower(name), "lora") {
			e |= evAdapter
		}
		switch {
		case strings.Contains(fn, "bitsandbytes/"):
			e |= evQuant
		case strings.Contains(fn, "torch/utils/checkpoint.py"):
			e |= evCheckpoint
		case strings.Contains(fn, "torch/nn/parallel/distributed.py") && (name == "_ddp_init_helper" || name == "_build_reducer"):
			e |= evDDP
		case strings.Contains(fn, "torch/distributed/fsdp/"):
			switch {
			case strings.Contains(name, "unshard") || strings.Contains(name, "all_gather") || strings.Contains(name, "alloc_storage") || strings.Contains(name, "_alloc_padded_unsharded"):
				e |= evFSDPGather
			case strings.Contains(name, "flat_param") || strings.Contains(name, "flatten") || name == "__init__":
				e |= evFSDPFlat
			}
		}
		switch {
		case name == "backward" && (strings.Contains(fn, "torch/_tensor.py") || strings.Contains(fn, "torch/autograd/")):
			e |= evPyBackward
		case name == "_make_grads" && strings.Contains(fn, "torch/autograd/"):
			e |= evPyBackward
		case name == "_init_group" && strings.Contains(fn, "torch/optim/"):
			e |= evOptimInit | evOptim
		case name == "zero_grad":
			e |= evZeroGrad
		case strings.Contains(fn, "torch/optim/") || optimizerFile(fn):
			e |= evOptim
		case strings.Contains(fn, "torch/nn/modules/module.py") && (name == "_apply" || name == "to" || name == "cuda" || name == "to_empty"):
			e |= evModuleApply
		case strings.Contains(fn, "torch/nn/modules/module.py") && (name == "load_state_dict" || name == "_load_from_state_dict"),
			name == "from_pretrained", name == "load_state_dict":
			e |= evLoad
		case strings.Contains(fn, "torch/utils/data/"):
			e |= evDataLoader
		case name == "forward" || strings.Contains(fn, "torch/nn/modules/module.py") && strings.HasSuffix(name, "call_impl"),
			strings.Contains(fn, "torchinductor_") && name == "call":
			e |= evForward
		case name == "__init__":
			e |= evInit
		}
		return e
	}
	switch {
	case strings.Contains(name, "AccumulateGrad"):
		e |= evAccumulate
	case strings.Contains(name, "autograd::Engine::") || strings.Contains(name, "autograd::engine"),
		strings.Contains(name, "autograd::generated::") && strings.Contains(strings.ToLower(name), "backward"):
		// The engine, or an autograd node's backward (*Backward0::apply,
		// its details::*_backward) when the stack is cut short.
		e |= evEngine
	case strings.Contains(name, "Workspace") && strings.Contains(name, "at::cuda"):
		e |= evWorkspace
	case strings.Contains(name, "c10d::Reducer::initialize_bucket"):
		e |= evDDP
	}
	return e
}

// optimizerFile says whether a Python file belongs to an optimizer: a
// component of its path names one ("optim": torch/optim, apex/optimizers,
// megatron/core/optimizer, a user's optimizers.py). What such code makes
// and keeps is the optimizer's (moments, fp32 master copies).
func optimizerFile(fn string) bool {
	for _, part := range strings.Split(strings.ToLower(fn), "/") {
		if strings.Contains(part, "optim") {
			return true
		}
	}
	return false
}

// phase is the part of a training step an allocation was made in.
type phase uint8

const (
	phaseNone      phase = iota // no evidence
	phaseForward                // a module's forward, or user code around it
	phaseBackward               // the autograd engine
	phaseOptimizer              // Optimizer.step
)

// phaseCursors answers classify's runEnd and nextFwd for items in
// increasing order, each from the next item that decides it: what a
// backward scan over the items would keep for each in a column.
type phaseCursors struct {
	items  *replay.Lifetimes
	phases []phase
	evs    []evidence
	n      int32 // the actions
	// next[q]: the first item after the last one asked about, made in
	// the trace, in phase q (Len() when none); fwd: the first such item
	// not in a forward phase or made in a module's forward.
	next [phaseOptimizer + 1]int
	fwd  int
}

func newPhaseCursors(items *replay.Lifetimes, phases []phase, evs []evidence, n int32) *phaseCursors {
	return &phaseCursors{items: items, phases: phases, evs: evs, n: n}
}

// inTrace says whether item j was made in the trace (not before it).
func (c *phaseCursors) inTrace(j int) bool {
	return c.items.Born(j) >= 0 && c.items.Item(j).Alloc >= 0
}

// birth is item j's Born, or n when j is past the last item.
func (c *phaseCursors) birth(j int) int32 {
	if j >= c.items.Len() {
		return c.n
	}
	return c.items.Born(j)
}

// nextIn moves next[q] to the first item after i made in the trace in
// phase q, and returns its birth (n when none).
func (c *phaseCursors) nextIn(q phase, i int) int32 {
	j := max(c.next[q], i+1)
	for ; j < c.items.Len() && !(c.phases[j] == q && c.inTrace(j)); j++ {
	}
	c.next[q] = j
	return c.birth(j)
}

// runEnd is the birth of the first allocation after item i (made in the
// trace) in a known phase other than i's, n when none.
func (c *phaseCursors) runEnd(i int) int32 {
	end := c.n
	for q := phaseForward; q <= phaseOptimizer; q++ {
		if b := c.nextIn(q, i); q != c.phases[i] && b < end {
			end = b
		}
	}
	return end
}

// nextFwd is, for item i in a forward phase, the birth of the next
// allocation made in a module's forward with only forward-phase
// allocations between (n when none, or when i is not in a forward phase).
func (c *phaseCursors) nextFwd(i int) int32 {
	if c.phases[i] != phaseForward {
		return c.n
	}
	j := max(c.fwd, i+1)
	for ; j < c.items.Len(); j++ {
		if c.inTrace(j) && (c.phases[j] != phaseForward || c.evs[j]&evForward != 0) {
			break
		}
	}
	c.fwd = j
	if j < c.items.Len() && c.phases[j] == phaseForward {
		return c.birth(j)
	}
	return c.n
}

// first returns the birth of each phase's first allocation made in the
// trace (n when none).
func (c *phaseCursors) first() [phaseOptimizer + 1]int32 {
	var f [phaseOptimizer + 1]int32
	for q := range f {
		f[q] = c.n
	}
	for j, left := 0, 3; j < c.items.Len() && left > 0; j++ {
		if q := c.phases[j]; q != phaseNone && f[q] == c.n && c.inTrace(j) {
			f[q] = c.items.Born(j)
			left--
		}
	}
	return f
}

// classify assigns every allocation of d.Active a category and the rule
// that set it: strong evidence in its frames first, then the phase it was
// made in and whether it outlived that phase (an out-of-memory ends the
// phase it happens in: what its unwind frees is no evidence), then, for
// blocks alive from before the trace to its end without a stack, what the
// trace shows of the run (no backward: weights; sizes of the gradients and
// optimizer states). docs/categories.md lists the rules.
func classify(d *Device) ([]Category, []Rule) {
	s := d.S
	items := d.Active
	n := int32(len(d.Active.Events))
	cats := make([]Category, items.Len())
	rules := make([]Rule, items.Len())
	set := func(i int, c Category, r Rule) { cats[i], rules[i] = c, r }
	ev := d.Events()

	frameEv := make([]evidence, len(s.Frames))
	for i := range s.Frames {
		frameEv[i] = frameEvidence(&s.Frames[i])
	}
	// Evidence per stack, computed on first use (evComputed marks it).
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

	// before: made before the trace (a dump block without an alloc
	// event; memory_viz places one at the first action when the trace is
	// empty).
	before := func(it replay.Lifetime) bool { return it.Born < 0 || it.Alloc < 0 }

	// What the trace shows of the run: a backward pass (its allocations or
	// frees), a forward pass. Blocks from before the trace do not count: a
	// forward-only recording may follow a warm-up step.
	// Each stack is looked at once: marked by the events first (1: used,
	// 2: by an alloc), an array pass over millions of events.
	used := make([]uint8, len(stackEv))
	for r := range ev {
		d.pauseAt(r)
		if st := ev[r].Stack; st >= 0 && int(st) < len(used) {
			if ev[r].Action == snapshot.ActionAlloc {
				used[st] |= 2
			} else {
				used[st] |= 1
			}
		}
	}
	hasBackward, hasForward, hasAdapters := false, false, false
	for st, u := range used {
		if u == 0 {
			continue
		}
		e := evOf(snapshot.StackID(st))
		hasAdapters = hasAdapters || e&evAdapter != 0
		hasBackward = hasBackward || e&evBackward != 0
		hasForward = hasForward || e&evForward != 0 && u&2 != 0
	}

	// Per item: its evidence and phase. Items are in element order, which
	// for trace allocations is birth order.
	evs := make([]evidence, items.Len())
	phases := make([]phase, items.Len())
	inBackward := false // between a Python backward call and the next main-thread frames
	for i := range items.Len() {
		d.pauseAt(i)
		it := items.Item(i)
		var t int64
		hasT := false
		if it.Alloc >= 0 {
			t, hasT = ev[it.Alloc].TimeUS, ev[it.Alloc].Flags&snapshot.FlagHasTime != 0
		}
		e := evOf(d.itemStack(i))
		evs[i] = e
		if e&evBackward != 0 && !before(it) {
			hasBackward = true
		}
		p := phaseNone
		switch {
		case e&evBackward != 0:
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

	// runEnd(i): the birth of the next allocation in a different known
	// phase (n when none): "outlived its phase" is Died >= runEnd.
	// nextFwd(i): the birth of the next allocation made in a module's
	// forward in the same forward run (n when none): an allocation made
	// outside the modules and still live then is the pass's input.
	// Both are read in item order, so cursors that only move forward
	// answer them (amortized O(1)): two columns of an int32 an item had
	// taken 40 MB more of a 1 GB tile's viewer while its peak answer was
	// made. first[q] is the birth of phase q's first allocation.
	cur := newPhaseCursors(items, phases, evs, n)
	first := cur.first()

	// The out-of-memory errors, as the Active Memory Timeline's actions
	// they follow. An allocation live at one, made in the run (phase) the
	// error ended, did not die by that run's flow: the exception's unwind
	// (or the end of the trace) freed it.
	var ooms []int32
	for r := range ev {
		if ev[r].Action == snapshot.ActionOOM {
			ooms = append(ooms, int32(d.Active.ActionAtEvent(r)))
		}
	}
	cutAt := func(born, died, end int32) bool {
		for _, a := range ooms {
			if born <= a && a < died && end > a {
				return true
			}
		}
		return false
	}

	// Allocations of a forward run made before its first module forward
	// (the batch put on the device) are inputs when they outlive the run.
	seenForward := false
	for i := range items.Len() {
		it := items.Item(i)
		e, p := evs[i], phases[i]
		switch {
		case e&evWorkspace != 0:
			set(i, Unknown, RuleWorkspace)
			continue
		case e&evAccumulate != 0:
			set(i, Gradient, RuleAccumulateGrad)
			continue
		case e&evZeroGrad != 0 && e&evOptimInit == 0:
			set(i, Gradient, RuleZeroGrad)
			continue
		case e&evDDP != 0:
			set(i, Gradient, RuleDDPBucket)
			continue
		case e&evOptimInit != 0:
			set(i, OptimizerState, RuleOptimInit)
			continue
		case e&evFSDPGather != 0:
			set(i, Temporary, RuleFSDPGather)
			continue
		case e&evCheckpoint != 0 && e&evBackward != 0:
			set(i, Activation, RuleRecompute)
			continue
		case e&evForward == 0 && e&evBackward == 0 && e&evFSDPFlat != 0:
			set(i, Parameter, RuleFSDPFlat)
			continue
		case e&evForward == 0 && e&evBackward == 0 && e&evQuant != 0:
			set(i, Parameter, RuleQuantized)
			continue
		case e&evModuleApply != 0 && e&evForward == 0:
			set(i, Parameter, RuleModuleApply)
			continue
		case e&evLoad != 0 && e&evForward == 0:
			set(i, Parameter, RuleLoadWeights)
			continue
		case e&evDataLoader != 0:
			set(i, Input, RuleDataLoader)
			continue
		}
		if p != phaseForward {
			seenForward = false
		}
		if before(it) {
			// Made before the trace: it outlived the phase it was made in
			// when it is freed after the trace's first allocation of
			// another phase.
			end := n
			for q := phaseForward; q <= phaseOptimizer; q++ {
				if q != p && first[q] < end {
					end = first[q]
				}
			}
			outlived := it.Died >= end
			cut := cutAt(it.Born, it.Died, end)
			switch {
			case p == phaseOptimizer && cut, p == phaseBackward && cut:
				set(i, Unknown, RuleCutByOOM)
			case p == phaseOptimizer:
				set(i, pick(outlived, OptimizerState, Temporary), pickRule(outlived, RuleOptimKept, RuleOptimTemp))
			case p == phaseBackward:
				set(i, pick(outlived, Gradient, AutogradDetail), pickRule(outlived, RuleBackwardGrad, RuleBackwardDetail))
			case e&evInit != 0 && e&evForward == 0 && it.Died == n:
				set(i, Parameter, RuleModuleInit)
			case p == phaseForward && e&evForward != 0 && cut:
				set(i, Activation, RuleForwardOOM)
			case p == phaseForward && e&evForward != 0:
				set(i, pick(outlived, Activation, Temporary), pickRule(outlived, RuleForwardSaved, RuleForwardTemp))
			case it.Died == n && hasForward && !hasBackward && e&evForward == 0:
				set(i, Parameter, RuleWeightsNoBackward)
			}
			continue
		}
		runEnd, nextFwd := cur.runEnd(i), cur.nextFwd(i)
		outlived := it.Died >= runEnd
		if cutAt(it.Born, it.Died, runEnd) {
			switch {
			case p == phaseBackward || p == phaseOptimizer:
				set(i, Unknown, RuleCutByOOM)
			case p == phaseForward && e&evForward == 0 && it.Died > nextFwd && nextFwd < n:
				set(i, Input, RuleInputOOM)
			case p == phaseForward:
				if e&evForward != 0 {
					seenForward = true
				}
				set(i, Activation, RuleForwardOOM)
			}
			continue
		}
		switch p {
		case phaseOptimizer:
			set(i, pick(outlived, OptimizerState, Temporary), pickRule(outlived, RuleOptimKept, RuleOptimTemp))
		case phaseBackward:
			// A gradient outlives the backward pass: it is still live
			// when the next phase begins, or zero_grad frees it.
			grad := it.Died >= runEnd || it.Free >= 0 && evOf(ev[it.Free].Stack)&evZeroGrad != 0
			set(i, pick(grad, Gradient, AutogradDetail), pickRule(grad, RuleBackwardGrad, RuleBackwardDetail))
		case phaseForward:
			switch {
			case e&evForward != 0:
				seenForward = true
				set(i, pick(outlived, Activation, Temporary), pickRule(outlived, RuleForwardSaved, RuleForwardTemp))
			case e&evInit != 0 && it.Died == n && !seenForward:
				set(i, Parameter, RuleModuleInit) // a module built on the device
			case nextFwd < n && it.Died > nextFwd:
				set(i, Input, RuleInput)
			case !seenForward:
				set(i, pick(outlived, Input, Temporary), pickRule(outlived, RuleInput, RuleInputTemp))
			default:
				set(i, pick(outlived, Activation, Temporary), pickRule(outlived, RuleLoss, RuleForwardTemp)) // loss and friends
			}
		}
	}

	// A block without a stack, made before the trace and alive to its end:
	// with no backward in the trace (and a forward), weights. With one, a
	// block whose size is that of a gradient or optimizer state recognised
	// by its frames is a parameter (both are made per parameter with its
	// size). An optimizer keeps as many states of one kind (one site) as
	// it has parameters, so per size at most that many such blocks are
	// parameters; the rest (gradients or state made before the trace,
	// which the snapshot cannot tell apart) stay unknown. A block whose
	// size no gradient or state has, in a trace with both, never gets a
	// gradient: a frozen weight.
	paired := map[uint64]bool{}
	sawGrad, sawState := false, false
	type stackSize struct {
		st   snapshot.StackID
		size uint64
	}
	perSite := map[stackSize]int{}
	for i := range items.Len() {
		it := items.Item(i)
		c := cats[i]
		if (c == Gradient || c == OptimizerState) && evs[i]&evStack != 0 {
			paired[it.Size] = true
		}
		sawGrad = sawGrad || c == Gradient && !before(it)
		sawState = sawState || c == OptimizerState
		if c == OptimizerState && it.Died == n {
			perSite[stackSize{d.itemStack(i), it.Size}]++
		}
	}
	// The sizes of cuBLAS workspaces: PyTorch's defaults (":4096:2:16:8"
	// on Hopper, ":4096:8" before) and those recognised by their frames.
	workspace := map[uint64]bool{8519680: true, 33554432: true}
	for i := range items.Len() {
		if evs[i]&evWorkspace != 0 {
			workspace[items.Size(i)] = true
		}
	}
	limit := map[uint64]int{}
	for k, v := range perSite {
		limit[k.size] = max(limit[k.size], v)
	}
	// Gradients kept from before the trace: backward's AccumulateGrad
	// frees the incoming gradient (made in the trace) after adding it into
	// the parameter's existing .grad in place, and makes none; the .grad
	// it added into has the incoming one's size. Each parameter gets one
	// add per backward pass, so the first pass with such adds counts, per
	// size, the gradients that existed then. Less those the trace made
	// before that pass, and the blocks from before the trace that it frees
	// as gradients (set_to_none) or as unknown (maybe gradients), that many
	// are blocks from before the trace alive to its end. Where
	// AccumulateGrad makes a block of a size (out of place under
	// create_graph, or a clone), its frees are old gradients instead.
	accumMade := map[uint64]bool{}
	pass := make([]int32, items.Len()) // backward pass of each trace allocation (0: none)
	var passes, firstAdd int32
	prev := phaseNone
	for i := range items.Len() {
		it := items.Item(i)
		if evs[i]&evAccumulate != 0 {
			accumMade[it.Size] = true
		}
		if before(it) || phases[i] == phaseNone {
			continue
		}
		if phases[i] == phaseBackward {
			if prev != phaseBackward {
				passes++
			}
			pass[i] = passes
			if it.Free >= 0 && evOf(ev[it.Free].Stack)&evAccumulate != 0 && (firstAdd == 0 || passes < firstAdd) {
				firstAdd = passes
			}
		}
		prev = phases[i]
	}
	kept := map[uint64]int{} // per size: adds in the first pass, less the gradients they cannot be into
	if firstAdd > 0 {
		start := n
		for i := range items.Len() {
			it := items.Item(i)
			if pass[i] == firstAdd {
				start = min(start, it.Born)
				if it.Free >= 0 && evOf(ev[it.Free].Stack)&evAccumulate != 0 {
					kept[it.Size]++
				}
			}
		}
		for i := range items.Len() {
			it := items.Item(i)
			switch {
			case before(it) && it.Died < n && (cats[i] == Gradient || cats[i] == Unknown):
				// A kept gradient freed in the trace, or maybe one (what
				// its free shows to be something else is not).
				kept[it.Size]--
			case !before(it) && cats[i] == Gradient && it.Born < start:
				kept[it.Size]-- // a gradient the trace made before the pass
			}
		}
	}
	// The stackless blocks alive through the trace whose size is that of a
	// gradient or state, per size in element order.
	group := map[uint64][]int{}
	var sizes []uint64
	for i := range items.Len() {
		it := items.Item(i)
		if !before(it) || it.Died != n || evs[i]&evStack != 0 || rules[i] != RuleNone {
			continue
		}
		switch {
		case workspace[it.Size] && !paired[it.Size]:
			set(i, Unknown, RuleWorkspaceSize)
		case hasForward && !hasBackward:
			set(i, Parameter, RuleWeightsNoBackward)
		case hasBackward && !sawGrad && !sawState:
			set(i, Unknown, RuleParamOrGrad)
		case !paired[it.Size]:
			// Weights a fine-tune freezes; without adapters in the trace
			// such a block may as well be a buffer or a cache.
			if hasBackward && hasAdapters {
				set(i, Parameter, RuleWeightsFrozen)
			}
		default:
			if group[it.Size] == nil {
				sizes = append(sizes, it.Size)
			}
			group[it.Size] = append(group[it.Size], i)
		}
	}
	// Per size: as many gradients as the first pass with in-place adds
	// shows were kept from before the trace (see kept), then as many
	// parameters as the optimizer keeps states of one kind (all the rest
	// where no state site counts them); the rest stay unknown. The blocks
	// are alike in all the trace records (size, no stack, alive
	// throughout), so which of them is a parameter and which a gradient
	// is not recorded: the counts, and so the bytes per category, are what
	// the evidence gives, not each block's own category.
	for _, size := range sizes {
		g := group[size]
		l, ok := limit[size]
		if !ok {
			l = len(g) // no state site counts them: all parameters, as before
		}
		ng := 0
		if !accumMade[size] {
			ng = min(len(g), max(kept[size], 0))
		}
		np := min(len(g)-ng, l)
		for k, i := range g {
			switch {
			case k < np && ng > 0:
				set(i, Parameter, RuleWeightsCounted)
			case k < np:
				set(i, Parameter, RuleWeightsPaired)
			case k < np+ng:
				set(i, Gradient, RuleGradsCounted)
			default:
				set(i, Unknown, RuleUnpaired)
			}
		}
	}
	return cats, rules
}

func pickRule(cond bool, a, b Rule) Rule {
	if cond {
		return a
	}
	return b
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
type Totals [maxCategories]uint64

// CategoriesAt sums the live allocations' bytes per category at m.
func (d *Device) CategoriesAt(m Moment) Totals {
	var t Totals
	d.Active.Live(m.Action, func(i int) { t[d.Category(i)] += d.Active.Size(i) })
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
	for i := range lt.Len() {
		it := lt.Item(i)
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
		c.Live[c.d.Category(int(x-1))] += c.d.Active.Size(int(x - 1))
	case x < 0:
		c.Live[c.d.Category(int(-x-1))] -= c.d.Active.Size(int(-x - 1))
	}
}

// Classes assigns each allocation of the Active Memory Timeline (by
// element id) a class for colouring: by "category" (the legend is the
// category names in Categories' order) or by "stream" (the legend names
// the streams present, in memory_viz's stream numbering).
func (d *Device) Classes(by string) (legend []string, classes []uint8, err error) {
	classes = make([]uint8, d.Active.Len())
	switch by {
	case "category":
		order := map[Category]uint8{}
		for k, c := range d.Categories() {
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
