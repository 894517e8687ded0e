package synth

import (
	"fmt"

	"github.com/gpumem/gpumem/snapshot"
)

// mlpClasses is the output width of the mlp's classifier head.
const mlpClasses = 1000

// mlp is a stack of Linear(hidden, hidden)+ReLU layers with a 1000-class
// head, trained with cross-entropy and AdamW.
type mlp struct {
	*program
	opt optimSites

	batchX, batchY, freeBatch, linear, relu, head    snapshot.StackID
	logSoftmax, nll, lossFree                        snapshot.StackID
	bNll, bLogSoftmax, bHead, bRelu, bLinear, bFirst snapshot.StackID
}

func newMLP(p *program) *mlp {
	st := p.st
	fwd := cat(nn(frame{userModel, 42, "forward"}), trainStep(154)) // MLP.forward
	seq := func(f frame) []frame {
		return cat(nn(f), nn(frame{torchDir + "nn/modules/container.py", 250, "forward"}), fwd)
	}
	ce := cat([]frame{{torchDir + "nn/functional.py", 3494, "cross_entropy"}, {userTrain, 131, "compute_loss"}}, trainStep(155))
	batch := func(line int64) []frame { return cat([]frame{{userTrain, line, "get_batch"}}, trainStep(152)) }
	return &mlp{program: p, opt: newOptimSites(st),
		batchX:      st.intern(batch(97)),
		batchY:      st.intern(batch(98)),
		freeBatch:   st.intern(trainStep(152)),
		linear:      st.intern(seq(frame{torchDir + "nn/modules/linear.py", 125, "forward"})),
		relu:        st.intern(seq(frame{torchDir + "nn/modules/activation.py", 133, "forward"})),
		head:        st.intern(cat(nn(frame{torchDir + "nn/modules/linear.py", 125, "forward"}), nn(frame{userModel, 43, "forward"}), trainStep(154))),
		logSoftmax:  st.intern(ce),
		nll:         st.intern(ce),
		lossFree:    st.intern(trainStep(160)),
		bNll:        st.intern(backwardFrames("NllLossBackward0")),
		bLogSoftmax: st.intern(backwardFrames("LogSoftmaxBackward0")),
		bHead:       st.intern(backwardFrames("AddmmBackward0")),
		bRelu:       st.intern(backwardFrames("ReluBackward0")),
		bLinear:     st.intern(backwardFrames("AddmmBackward0")),
		bFirst:      st.intern(backwardFrames("AddmmBackward0")),
	}
}

func (m *mlp) run() {
	e, H := m.e, uint64(m.w.Hidden)
	for l := 0; l < m.w.Layers; l++ {
		m.addParam(H*H*e, m.opt.toDevice)
		m.addParam(H*e, m.opt.toDevice)
	}
	m.addParam(mlpClasses*H*e, m.opt.toDevice)
	m.addParam(mlpClasses*e, m.opt.toDevice)

	x, y := none, none
	for step := 0; step < m.w.Steps && m.err == nil; step++ {
		name := fmt.Sprintf("ProfilerStep#%d", step)
		m.annotate(name, "START")
		m.zeroGrad(&m.opt)
		nx := m.alloc(uint64(m.w.Batch)*H*e, kindInput, m.batchX)
		ny := m.alloc(uint64(m.w.Batch)*8, kindInput, m.batchY)
		m.free(x, m.freeBatch)
		m.free(y, m.freeBatch)
		x, y = nx, ny
		loss := m.forwardBackward()
		m.optimizerStep(&m.opt)
		m.free(loss, m.lossFree)
		m.annotate(name, "END")
		if m.err == nil {
			m.stepsDone++
		}
		m.now += 100 + int64(m.rng.IntN(200))
	}
}

func (m *mlp) forwardBackward() tensorID {
	e, B, H, C := m.e, uint64(m.w.Batch), uint64(m.w.Hidden), uint64(mlpClasses)
	L := m.w.Layers
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

	gl := m.alloc(4, kindTemp, m.bNll)
	g := m.alloc(B*C*4, kindTemp, m.bNll)
	m.free(gl, m.bNll)
	g2 := m.alloc(B*C*e, kindTemp, m.bLogSoftmax)
	m.free(g, m.bLogSoftmax)
	m.free(lsm, m.bLogSoftmax)
	n := len(m.params)
	m.flops(4 * B * H * C)
	m.grad(n-2, m.bHead)
	m.grad(n-1, m.bHead)
	gx := m.alloc(B*H*e, kindTemp, m.bHead)
	m.free(g2, m.bHead)
	for l := L - 1; l >= 0 && m.err == nil; l-- {
		gz := m.alloc(B*H*e, kindTemp, m.bRelu)
		m.free(gx, m.bRelu)
		m.free(acts[l], m.bRelu)
		m.flops(4 * B * H * H)
		m.grad(2*l, m.bLinear)
		m.grad(2*l+1, m.bLinear)
		gx = none
		if l > 0 { // the input batch needs no gradient
			gx = m.alloc(B*H*e, kindTemp, m.bLinear)
		}
		m.free(gz, m.bLinear)
	}
	return loss
}
