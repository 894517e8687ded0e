package synth

import (
	"encoding/binary"

	"github.com/gpumem/gpumem/snapshot"
)

// frame is one Python or C++ stack frame as PyTorch records it.
type frame struct {
	file string
	line int64
	name string
}

// stackTable interns frames and stacks into the snapshot model's tables, so
// that every identical stack is one StackID (PyTorch shares one frames list
// per captured traceback, which is what keeps real files small).
type stackTable struct {
	frames  []snapshot.Frame
	frameID map[frame]snapshot.FrameID
	table   snapshot.StackTable
	byKey   map[string]snapshot.StackID
	key     []byte
}

func newStackTable() *stackTable {
	return &stackTable{
		frameID: map[frame]snapshot.FrameID{},
		table:   snapshot.StackTable{Offsets: []int32{0, 0}}, // stack 0: empty
		byKey:   map[string]snapshot.StackID{"": snapshot.NoStack},
	}
}

// intern returns the id of the stack made of fs (innermost first).
func (t *stackTable) intern(fs []frame) snapshot.StackID {
	t.key = t.key[:0]
	ids := make([]snapshot.FrameID, len(fs))
	for i, f := range fs {
		id, ok := t.frameID[f]
		if !ok {
			id = snapshot.FrameID(len(t.frames))
			t.frames = append(t.frames, snapshot.Frame{Filename: f.file, Name: f.name, Line: f.line})
			t.frameID[f] = id
		}
		ids[i] = id
		t.key = binary.LittleEndian.AppendUint32(t.key, uint32(id))
	}
	if id, ok := t.byKey[string(t.key)]; ok {
		return id
	}
	id := snapshot.StackID(t.table.Len())
	t.table.FrameIDs = append(t.table.FrameIDs, ids...)
	t.table.Offsets = append(t.table.Offsets, int32(len(t.table.FrameIDs)))
	t.byKey[string(t.key)] = id
	return id
}

// File names as a pip-installed PyTorch and a user script record them.
const (
	torchDir  = "/usr/local/lib/python3.11/site-packages/torch/"
	userTrain = "/workspace/train.py"
	userModel = "/workspace/model.py"
)

var (
	callImpl    = frame{torchDir + "nn/modules/module.py", 1762, "_call_impl"}
	wrappedCall = frame{torchDir + "nn/modules/module.py", 1751, "_wrapped_call_impl"}
	moduleFrame = frame{userTrain, 214, "<module>"}
	mainFrame   = frame{userTrain, 201, "main"}
)

// nn returns the frames of code at f running inside an nn.Module call, as
// module(...) records them: f, then Module._call_impl and _wrapped_call_impl.
func nn(f frame) []frame { return []frame{f, callImpl, wrappedCall} }

// cat concatenates frame lists (innermost first).
func cat(parts ...[]frame) []frame {
	var out []frame
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// trainStep is the outer part of every stack inside train_step at line.
func trainStep(line int64) []frame {
	return []frame{{userTrain, line, "train_step"}, mainFrame, moduleFrame}
}

// cpp returns C++ frames as PyTorch's unwinder prints them (no file/line).
func cpp(names ...string) []frame {
	out := make([]frame, len(names))
	for i, n := range names {
		out[i] = frame{"??", 0, n}
	}
	return out
}

// backward interns the stack of autograd node's apply, run by loss.backward().
func (t *stackTable) backward(node string) snapshot.StackID {
	return t.intern(backwardFrames(node))
}

// accumulateFrames is AccumulateGrad's apply, run by loss.backward() for
// a leaf (a parameter) once its incoming gradient is computed.
func accumulateFrames() []frame {
	return engineFrames("torch::autograd::AccumulateGrad::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)")
}

// backwardFrames is what loss.backward() adds below an autograd node.
func backwardFrames(node string) []frame {
	return engineFrames("torch::autograd::generated::" + node + "::apply(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)")
}

// engineFrames is the autograd engine running a node's apply, called
// from loss.backward() in the training step.
func engineFrames(apply string) []frame {
	return cat(
		cpp(apply,
			"torch::autograd::Node::operator()(std::vector<at::Tensor, std::allocator<at::Tensor> >&&)",
			"torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&, torch::autograd::Node*, torch::autograd::InputBuffer&, std::shared_ptr<torch::autograd::ReadyQueue> const&)",
			"torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)"),
		[]frame{
			{torchDir + "autograd/graph.py", 829, "_engine_run_backward"},
			{torchDir + "autograd/__init__.py", 353, "backward"},
			{torchDir + "_tensor.py", 648, "backward"},
		},
		trainStep(157))
}
