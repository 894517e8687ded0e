package synth

import (
	"github.com/gpumem/gpumem/snapshot"
)

// transformer is a GPT-style decoder (pre-LayerNorm blocks of fused-QKV
// attention with scaled_dot_product_attention and a 4x GELU MLP, untied LM
// head) trained with cross-entropy and AdamW.
type transformer struct {
	*program
	opt optimSites
	trainSites
	s tSites

	B, S, D, H, V uint64
}

// tSites are the interned stacks of every allocation site.
type tSites struct {
	emb, ln1, qkv, attn, proj, add1                  snapshot.StackID
	ln2, fc1, gelu, fc2, add2, lnf, head, lossCast   snapshot.StackID
	bHead, bLnf, bFc2, bGelu                         snapshot.StackID
	bFc1, bLn2, bAdd, bProj, bAttn, bQkv, bLn1, bEmb snapshot.StackID
	bCast                                            snapshot.StackID
}

func newTransformer(p *program) *transformer {
	w := p.w
	t := &transformer{program: p, opt: newOptimSites(p.st), trainSites: newTrainSites(p.st),
		B: uint64(w.Batch), S: uint64(w.Seq), D: uint64(w.DModel), H: uint64(w.Heads), V: uint64(w.Vocab)}
	st := p.st
	linear := frame{torchDir + "nn/modules/linear.py", 125, "forward"}
	norm := frame{torchDir + "nn/modules/normalization.py", 217, "forward"}
	fwd := cat(nn(frame{userModel, 171, "forward"}), trainStep(154)) // Transformer.forward
	block := func(line int64) []frame { return cat(nn(frame{userModel, line, "forward"}), fwd) }
	attn := func(line int64) []frame { return cat(nn(frame{userModel, line, "forward"}), block(119)) }
	mlp := func(line int64) []frame { return cat(nn(frame{userModel, line, "forward"}), block(120)) }
	top := func(line int64) []frame { return cat(nn(frame{userModel, line, "forward"}), trainStep(154)) }
	t.s = tSites{
		emb:      st.intern(cat(nn(frame{torchDir + "nn/modules/sparse.py", 190, "forward"}), top(165))),
		ln1:      st.intern(cat(nn(norm), block(119))),
		qkv:      st.intern(cat(nn(linear), attn(71))),
		attn:     st.intern(attn(74)),
		proj:     st.intern(cat(nn(linear), attn(76))),
		add1:     st.intern(block(119)),
		ln2:      st.intern(cat(nn(norm), block(120))),
		fc1:      st.intern(cat(nn(linear), mlp(92))),
		gelu:     st.intern(cat(nn(frame{torchDir + "nn/modules/activation.py", 734, "forward"}), mlp(93))),
		fc2:      st.intern(cat(nn(linear), mlp(94))),
		add2:     st.intern(block(120)),
		lnf:      st.intern(cat(nn(norm), top(168))),
		head:     st.intern(cat(nn(linear), top(169))),
		lossCast: st.intern(cat([]frame{{userTrain, 130, "compute_loss"}}, trainStep(155))),

		bCast: st.backward("ToCopyBackward0"),
		bHead: st.backward("MmBackward0"),
		bLnf:  st.backward("NativeLayerNormBackward0"),
		bFc2:  st.backward("AddmmBackward0"),
		bGelu: st.backward("GeluBackward0"),
		bFc1:  st.backward("AddmmBackward0"),
		bLn2:  st.backward("NativeLayerNormBackward0"),
		bAdd:  st.backward("AddBackward0"),
		bProj: st.backward("AddmmBackward0"),
		bAttn: st.backward("ScaledDotProductFlashAttentionBackward0"),
		bQkv:  st.backward("AddmmBackward0"),
		bLn1:  st.backward("NativeLayerNormBackward0"),
		bEmb:  st.backward("EmbeddingBackward0"),
	}
	return t
}

// Parameter indices inside one block, in nn.Module registration order.
const (
	pLn1W = iota
	pLn1B
	pQkvW
	pQkvB
	pProjW
	pProjB
	pLn2W
	pLn2B
	pFc1W
	pFc1B
	pFc2W
	pFc2B
	paramsPerBlock
)

func (t *transformer) blockParam(layer, i int) int { return 1 + layer*paramsPerBlock + i }

func (t *transformer) run() {
	e, D, V := t.e, t.D, t.V
	// model = Transformer(...).to("cuda"): parameters in registration order.
	t.addParam(V*D*e, t.opt.toDevice)
	for l := 0; l < t.w.Layers; l++ {
		for _, sz := range []uint64{D, D, 3 * D * D, 3 * D, D * D, D, D, D, 4 * D * D, 4 * D, 4 * D * D, D} {
			t.addParam(sz*e, t.opt.toDevice)
		}
	}
	t.addParam(D*e, t.opt.toDevice)
	t.addParam(D*e, t.opt.toDevice)
	t.addParam(V*D*e, t.opt.toDevice)

	t.trainLoop(&t.trainSites, &t.opt, t.B*t.S*8, t.B*t.S*8, 200, t.forwardBackward)
}

// tLayer holds one block's activations saved for backward.
type tLayer struct {
	x, h1, st1, qkv, att, lse, x2, h2, st2, u, g tensorID
}

// forwardBackward runs loss = model(x); loss.backward() and returns the
// loss tensor, still alive.
func (t *transformer) forwardBackward() tensorID {
	e, B, S, D, H, V := t.e, t.B, t.S, t.D, t.H, t.V
	act := B * S * D * e
	stats := 2 * B * S * 4 // LayerNorm mean and rstd (fp32)
	s := &t.s
	L := t.w.Layers
	layers := make([]tLayer, L)

	// Forward.
	x := t.alloc(act, kindActivation, s.emb)
	for l := 0; l < L; l++ {
		ly := &layers[l]
		ly.x = x
		ly.h1 = t.alloc(act, kindActivation, s.ln1)
		ly.st1 = t.alloc(stats, kindActivation, s.ln1)
		t.flops(2 * B * S * D * 3 * D)
		ly.qkv = t.alloc(3*act, kindActivation, s.qkv)
		t.flops(4 * B * S * S * D)
		ly.att = t.alloc(act, kindActivation, s.attn)
		ly.lse = t.alloc(B*H*S*4, kindActivation, s.attn)
		t.flops(2 * B * S * D * D)
		o := t.alloc(act, kindTemp, s.proj)
		ly.x2 = t.alloc(act, kindActivation, s.add1)
		t.free(o, s.add1)
		ly.h2 = t.alloc(act, kindActivation, s.ln2)
		ly.st2 = t.alloc(stats, kindActivation, s.ln2)
		t.flops(8 * B * S * D * D)
		ly.u = t.alloc(4*act, kindActivation, s.fc1)
		ly.g = t.alloc(4*act, kindActivation, s.gelu)
		t.flops(8 * B * S * D * D)
		m := t.alloc(act, kindTemp, s.fc2)
		x = t.alloc(act, kindActivation, s.add2)
		t.free(m, s.add2)
	}
	hf := t.alloc(act, kindActivation, s.lnf)
	stf := t.alloc(stats, kindActivation, s.lnf)
	t.flops(2 * B * S * D * V)
	logits := t.alloc(B*S*V*e, kindActivation, s.head)
	cast := none
	if t.e != 4 {
		cast = t.alloc(B*S*V*4, kindActivation, s.lossCast) // logits.float()
	}
	lsm := t.alloc(B*S*V*4, kindActivation, t.logSoftmax)
	loss := t.alloc(4, kindActivation, t.nll)
	t.free(cast, t.nll) // log_softmax saved its output, not its input
	if t.err != nil {
		return loss
	}

	// Backward, in reverse.
	g := t.lossBackward(&t.trainSites, B*S*V, B*S*V*4, lsm)
	if t.e != 4 {
		g2 := t.alloc(B*S*V*e, kindTemp, s.bCast)
		t.free(g, s.bCast)
		g = g2
	}
	head := len(t.params) - 1
	t.flops(4 * B * S * D * V)
	t.grad(head, s.bHead)
	gh := t.alloc(act, kindTemp, s.bHead)
	t.free(g, s.bHead)
	t.free(logits, s.bHead)
	gx := t.layerNormBackward(act, head-2, gh, hf, stf, x, s.bLnf)
	for l := L - 1; l >= 0 && t.err == nil; l-- {
		ly := &layers[l]
		block := t.blockParam(l, 0)
		// MLP branch.
		t.flops(16 * B * S * D * D)
		t.weightGrads(block+pFc2W, s.bFc2)
		gg := t.alloc(4*act, kindTemp, s.bFc2)
		t.free(ly.g, s.bFc2)
		gu := t.alloc(4*act, kindTemp, s.bGelu)
		t.free(gg, s.bGelu)
		t.free(ly.u, s.bGelu)
		t.flops(16 * B * S * D * D)
		t.weightGrads(block+pFc1W, s.bFc1)
		gh2 := t.alloc(act, kindTemp, s.bFc1)
		t.free(gu, s.bFc1)
		gx2 := t.layerNormBackward(act, block+pLn2W, gh2, ly.h2, ly.st2, ly.x2, s.bLn2)
		gx = t.residualBackward(act, gx, gx2)
		// Attention branch.
		t.flops(4 * B * S * D * D)
		t.weightGrads(block+pProjW, s.bProj)
		ga := t.alloc(act, kindTemp, s.bProj)
		t.flops(8 * B * S * S * D)
		gqkv := t.alloc(3*act, kindTemp, s.bAttn)
		t.free(ga, s.bAttn)
		t.free(ly.att, s.bAttn)
		t.free(ly.lse, s.bAttn)
		t.free(ly.qkv, s.bAttn)
		t.flops(12 * B * S * D * D)
		t.weightGrads(block+pQkvW, s.bQkv)
		gh1 := t.alloc(act, kindTemp, s.bQkv)
		t.free(gqkv, s.bQkv)
		gx1 := t.layerNormBackward(act, block+pLn1W, gh1, ly.h1, ly.st1, ly.x, s.bLn1)
		gx = t.residualBackward(act, gx, gx1)
	}
	t.grad(0, s.bEmb)
	t.free(gx, s.bEmb)
	return loss
}

// weightGrads makes the gradients of parameter w and the bias after it.
func (t *transformer) weightGrads(w int, site snapshot.StackID) {
	t.grad(w, site)
	t.grad(w+1, site)
}

// layerNormBackward returns the input gradient (act bytes) of the
// LayerNorm with weight w, given its output gradient gh, after making the
// weight and bias gradients and freeing gh and what the LayerNorm saved:
// its output h, its statistics st and its input in.
func (t *transformer) layerNormBackward(act uint64, w int, gh, h, st, in tensorID, site snapshot.StackID) tensorID {
	gx := t.alloc(act, kindTemp, site)
	t.weightGrads(w, site)
	t.free(gh, site)
	t.free(h, site)
	t.free(st, site)
	t.free(in, site)
	return gx
}

// residualBackward sums the gradients a and b of a residual connection.
func (t *transformer) residualBackward(act uint64, a, b tensorID) tensorID {
	sum := t.alloc(act, kindTemp, t.s.bAdd)
	t.free(a, t.s.bAdd)
	t.free(b, t.s.bAdd)
	return sum
}
