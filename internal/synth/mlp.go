package synth

import (
	"github.com/gpumem/gpumem/snapshot"
)

// mlpClasses is the output width of the mlp's classifier head.
const mlpClasses = 1000

// mlp is a stack of Linear(hidden, hidden)+ReLU layers with a 1000-class
// head, trained with cross-entropy and AdamW.
type mlp struct {
	*program
	opt optimSites
	trainSites

	linear, relu, head            snapshot.StackID
	bHead, bRelu, bLinear, bFirst snapshot.StackID
	ps                            patternSites
	fsdpFull                      []uint64 // FSDP: each unit's full flat parameter
}

func newMLP(p *program) *mlp {
	st := p.st
	fwd := cat(nn(frame{userModel, 42, "forward"}), trainStep(154)) // MLP.forward
	seq := func(f frame) []frame {
		return cat(nn(f), nn(frame{torchDir + "nn/modules/container.py", 250, "forward"}), fwd)
	}
	return &mlp{program: p, opt: newOptimSites(st), trainSites: newTrainSites(st),
		linear:  st.intern(seq(frame{torchDir + "nn/modules/linear.py", 125, "forward"})),
		relu:    st.intern(seq(frame{torchDir + "nn/modules/activation.py", 133, "forward"})),
		head:    st.intern(cat(nn(frame{torchDir + "nn/modules/linear.py", 125, "forward"}), nn(frame{userModel, 43, "forward"}), trainStep(154))),
		bHead:   st.backward("AddmmBackward0"),
		bRelu:   st.backward("ReluBackward0"),
		bLinear: st.backward("AddmmBackward0"),
		bFirst:  st.backward("AddmmBackward0"),
	}
}

func (m *mlp) run() {
	if m.w.Compile {
		m.compileSites()
	}
	if m.w.LoRA {
		m.loraRun()
		return
	}
	if m.w.FSDP {
		m.fsdpRun()
		return
	}
	e, H := m.e, uint64(m.w.Hidden)
	for l := 0; l < m.w.Layers; l++ {
		m.addParam(H*H*e, m.opt.toDevice)
		m.addParam(H*e, m.opt.toDevice)
	}
	m.addParam(mlpClasses*H*e, m.opt.toDevice)
	m.addParam(mlpClasses*e, m.opt.toDevice)
	if m.runPattern() {
		return
	}

	m.trainLoop(&m.trainSites, &m.opt, uint64(m.w.Batch)*H*e, uint64(m.w.Batch)*8, 100, m.forwardBackward)
}

func (m *mlp) forwardBackward() tensorID {
	e, B, H, C := m.e, uint64(m.w.Batch), uint64(m.w.Hidden), uint64(mlpClasses)
	L := m.w.Layers
	if m.w.LoRA || m.w.Checkpointing {
		return m.patternForwardBackward()
	}
	m.beginForward()
	acts := make([]tensorID, L) // ReLU outputs, saved by ReLU and the next Linear
	for l := 0; l < L; l++ {
		m.flops(2 * B * H * H)
		z := m.alloc(B*H*e, kindTemp, m.linear)
		acts[l] = m.alloc(B*H*e, kindActivation, m.relu)
		m.free(z, m.relu)
	}
	m.flops(2 * B * H * C)
	logits := m.alloc(B*C*e, kindTemp, m.head)
	lsm := m.alloc(B*C*4, kindActivation, m.logSoftmax)
	m.free(logits, m.logSoftmax)
	loss := m.alloc(4, kindActivation, m.nll)
	if m.err != nil {
		return loss
	}

	g2 := m.lossBackward(&m.trainSites, B*C, B*C*e, lsm)
	n := len(m.params)
	m.flops(4 * B * H * C)
	m.grad(n-2, m.bHead)
	m.grad(n-1, m.bHead)
	gx := m.alloc(B*H*e, kindAutograd, m.bHead)
	m.free(g2, m.bHead)
	for l := L - 1; l >= 0 && m.err == nil; l-- {
		gz := m.alloc(B*H*e, kindAutograd, m.bRelu)
		m.free(gx, m.bRelu)
		m.free(acts[l], m.bRelu)
		m.flops(4 * B * H * H)
		m.grad(2*l, m.bLinear)
		m.grad(2*l+1, m.bLinear)
		gx = none
		if l > 0 { // the input batch needs no gradient
			gx = m.alloc(B*H*e, kindAutograd, m.bLinear)
		}
		m.free(gz, m.bLinear)
	}
	return loss
}
