package synth

import (
	"fmt"

	"github.com/gpumem/gpumem/snapshot"
)

// trainSites are the allocation sites of the training loop that both
// models share: the batch from get_batch, the cross-entropy loss and the
// first two nodes of its backward.
type trainSites struct {
	batchX, batchY, freeBatch snapshot.StackID
	logSoftmax, nll, lossFree snapshot.StackID
	bNll, bLogSoftmax         snapshot.StackID
	leak                      snapshot.StackID // log_metrics keeping a tensor
}

func newTrainSites(st *stackTable) trainSites {
	ce := cat([]frame{{torchDir + "nn/functional.py", 3494, "cross_entropy"}, {userTrain, 131, "compute_loss"}}, trainStep(155))
	batch := func(line int64) []frame { return cat([]frame{{userTrain, line, "get_batch"}}, trainStep(152)) }
	return trainSites{
		batchX:      st.intern(batch(97)),
		batchY:      st.intern(batch(98)),
		freeBatch:   st.intern(trainStep(152)),
		logSoftmax:  st.intern(ce),
		nll:         st.intern(ce),
		lossFree:    st.intern(trainStep(160)),
		bNll:        st.backward("NllLossBackward0"),
		bLogSoftmax: st.backward("LogSoftmaxBackward0"),
		leak:        st.intern(cat([]frame{{userTrain, 141, "log_metrics"}}, trainStep(158))),
	}
}

// trainLoop runs the training steps: zero_grad, x, y = get_batch() (of
// xSize and ySize bytes; the previous batch dies when the names rebind),
// loss = forwardBackward(), with Workload.Leak a tensor of that many bytes
// kept by log_metrics, optimizer.step(), the loss freed when its name
// is rebound (after loss.item() is logged), then a pause of pause to
// 3*pause µs for the dataloader and logging.
func (p *program) trainLoop(s *trainSites, opt *optimSites, xSize, ySize uint64, pause int, forwardBackward func() tensorID) {
	x, y := none, none
	for step := 0; step < p.w.Steps && p.err == nil; step++ {
		name := fmt.Sprintf("ProfilerStep#%d", step)
		p.annotate(name, "START")
		p.zeroGrad(opt)
		nx := p.alloc(xSize, kindInput, s.batchX)
		ny := p.alloc(ySize, kindInput, s.batchY)
		p.free(x, s.freeBatch)
		p.free(y, s.freeBatch)
		x, y = nx, ny
		loss := forwardBackward()
		if p.w.Leak > 0 {
			// metrics.append(logits.detach()): kept for good.
			p.alloc(p.w.Leak, kindLeak, s.leak)
		}
		p.optimizerStep(opt)
		p.free(loss, s.lossFree)
		p.annotate(name, "END")
		if p.err == nil {
			p.stepsDone++
		}
		p.now += int64(pause) + int64(p.rng.IntN(2*pause))
	}
}

// lossBackward starts backward from a loss over n logits: the gradient of
// nll_loss, then of log_softmax (gradSize bytes, returned), which frees
// the log_softmax output lsm it saved.
func (p *program) lossBackward(s *trainSites, n, gradSize uint64, lsm tensorID) tensorID {
	p.endForward()
	gl := p.alloc(4, kindAutograd, s.bNll) // grad of loss: ones_like
	g := p.alloc(n*4, kindAutograd, s.bNll)
	p.free(gl, s.bNll)
	g2 := p.alloc(gradSize, kindAutograd, s.bLogSoftmax)
	p.free(g, s.bLogSoftmax)
	p.free(lsm, s.bLogSoftmax)
	return g2
}
