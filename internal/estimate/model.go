// Package estimate predicts the GPU memory of a training or inference job
// from a model's architecture, before any snapshot exists.
package estimate

import "fmt"

// Norm is the kind of normalisation layer, which decides its parameters.
type Norm int

const (
	// RMSNorm has a weight only (T5's LayerNorm is one too).
	RMSNorm Norm = iota
	// LayerNorm has a weight and a bias.
	LayerNorm
)

// Kind is the transformer's stack layout.
type Kind int

const (
	// Decoder is a decoder-only (causal LM) stack.
	Decoder Kind = iota
	// Encoder is a bidirectional encoder (BERT).
	Encoder
	// EncoderDecoder is an encoder stack and a decoder stack with cross-attention (T5).
	EncoderDecoder
)

// Model is a transformer's shape: enough to count its parameters exactly
// and the tensors its layers keep for backward.
type Model struct {
	Family        string // Hugging Face model_type, or "arch" for --arch flags
	Kind          Kind
	Layers        int // blocks (the encoder's in an encoder-decoder)
	DecoderLayers int // an encoder-decoder's decoder blocks: self-attention, cross-attention, MLP
	Hidden        int
	Heads         int
	KVHeads       int // Heads for multi-head, 1 for multi-query, between for GQA
	HeadDim       int
	Intermediate  int // dense MLP width (the MoE layers' experts: ExpertIntermediate)
	Vocab         int
	Tied          bool // the LM head shares the embedding matrix
	Gated         bool // gate*up MLP (SwiGLU/GeGLU): three matrices instead of two

	// Mixture of experts.
	Experts            int // routed experts per MoE layer; 0 for a dense model
	ExpertsPerTok      int
	ExpertIntermediate int  // moe_intermediate_size; 0: Intermediate
	SharedExperts      int  // always-on experts beside the routed ones, each ExpertIntermediate wide
	SharedIntermediate int  // or one shared expert of this width (qwen2_moe)
	SharedGate         bool // a sigmoid gate Linear(hidden, 1) on the shared expert (qwen2_moe)
	DenseLayers        int  // layers of an MoE model with a dense MLP (first_k_dense_replace, mlp_only_layers)

	// Multi-head latent attention (DeepSeek-V2/V3).
	QLoRARank, KVLoRARank, QKNopeDim, QKRopeDim, VHeadDim int

	Positions       int  // rows of a learned position embedding (0 with RoPE/ALiBi/relative bias)
	EmbedDim        int  // width of the token embedding when it differs from Hidden (OPT-350m)
	TokenTypes      int  // BERT's token type embedding rows
	EmbedNorm       bool // a LayerNorm on the embeddings (BERT)
	QKVBias         bool // q, k, v projections have biases
	OutBias         bool // attention output projection has a bias
	MLPBias         bool
	HeadBias        bool // the LM head has a bias (phi)
	Norm            Norm
	NormsPerLayer   int  // 1 when attention and MLP share one (parallel blocks), 2 usually, 4 in gemma2/3
	FinalNorm       bool // a norm after the last layer (each stack's, in an encoder-decoder)
	QKNorm          bool // per-head norms on q and k (qwen3, gemma3, phi's qk_layernorm)
	Parallel        bool // attention and MLP read the same normalised input (falcon, phi, gpt-j)
	RelativeBuckets int  // T5: relative attention bias, buckets × heads in each stack's first layer

	// Heads of encoders, as the config's "architectures" entry says.
	Pooler     bool // BERT's pooler: dense hidden×hidden + bias
	MLMHead    bool // BERT's MLM head: transform dense + LayerNorm, decoder bias (weight tied unless untied)
	Classifier int  // labels of a sequence-classification head on the pooler (0: none)
	BaseOnly   bool // the bare model (AutoModel): no LM head at all

	SlidingWindow int // tokens a sliding-window layer keeps in its KV cache
	SlidingLayers int // how many layers use the sliding window

	AttnDropout   bool // dropout on the attention probabilities
	HiddenDropout bool // dropout after attention and after the MLP
}

// Breakdown is a model's parameter count by part.
type Breakdown struct {
	Embedding int64 // token, position and type embeddings, their norm, embedding projections
	Attention int64 // all layers (cross-attention and relative bias included)
	MLP       int64 // all layers (all experts, shared experts and routers for MoE)
	Norms     int64 // all layers and the final norms
	Head      int64 // LM head when not tied, pooler, MLM head, classifier
}

// Total is the exact parameter count.
func (b Breakdown) Total() int64 {
	return b.Embedding + b.Attention + b.MLP + b.Norms + b.Head
}

func (m *Model) embedDim() int64 {
	if m.EmbedDim > 0 {
		return int64(m.EmbedDim)
	}
	return int64(m.Hidden)
}

func (m *Model) normParams(width int64) int64 {
	if m.Norm == LayerNorm {
		return 2 * width
	}
	return width
}

// MLA reports multi-head latent attention.
func (m *Model) MLA() bool { return m.KVLoRARank > 0 }

// qkDim and vDim are one head's query/key and value widths.
func (m *Model) qkDim() int64 {
	if m.MLA() {
		return int64(m.QKNopeDim + m.QKRopeDim)
	}
	return int64(m.HeadDim)
}

func (m *Model) vDim() int64 {
	if m.MLA() {
		return int64(m.VHeadDim)
	}
	return int64(m.HeadDim)
}

// attnParams is one attention block's parameters.
func (m *Model) attnParams() int64 {
	d, H := int64(m.Hidden), int64(m.Heads)
	if m.MLA() {
		qr, kvr, rope := int64(m.QLoRARank), int64(m.KVLoRARank), int64(m.QKRopeDim)
		var n int64
		if qr > 0 {
			n += d*qr + m.normParams(qr) + qr*H*m.qkDim() // q_a_proj, q_a_layernorm, q_b_proj
		} else {
			n += d * H * m.qkDim() // q_proj
		}
		n += d*(kvr+rope) + m.normParams(kvr) + kvr*H*(int64(m.QKNopeDim)+m.vDim()) // kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
		n += H * m.vDim() * d                                                       // o_proj
		return n
	}
	hd := int64(m.HeadDim)
	q, kv := H*hd, int64(m.KVHeads)*hd
	n := d*(q+2*kv) + q*d
	if m.QKVBias {
		n += q + 2*kv
	}
	if m.OutBias {
		n += d
	}
	if m.QKNorm {
		n += 2 * m.normParams(hd)
	}
	return n
}

// mlpOf is one MLP of width in.
func (m *Model) mlpOf(in int64) int64 {
	d := int64(m.Hidden)
	if m.Gated {
		n := 3 * d * in
		if m.MLPBias {
			n += 2*in + d
		}
		return n
	}
	n := 2 * d * in
	if m.MLPBias {
		n += in + d
	}
	return n
}

func (m *Model) expertWidth() int64 {
	if m.ExpertIntermediate > 0 {
		return int64(m.ExpertIntermediate)
	}
	return int64(m.Intermediate)
}

// moeParams is one MoE layer's MLP: routed experts, router, shared experts.
func (m *Model) moeParams() int64 {
	d := int64(m.Hidden)
	n := int64(m.Experts)*m.mlpOf(m.expertWidth()) + d*int64(m.Experts)
	n += m.sharedParams()
	return n
}

func (m *Model) sharedParams() int64 {
	var n int64
	if m.SharedExperts > 0 {
		n += m.mlpOf(int64(m.SharedExperts) * m.expertWidth())
	}
	if m.SharedIntermediate > 0 {
		n += m.mlpOf(int64(m.SharedIntermediate))
	}
	if m.SharedGate {
		n += int64(m.Hidden)
	}
	return n
}

// moeLayers is how many layers have an MoE MLP.
func (m *Model) moeLayers() int64 {
	if m.Experts == 0 {
		return 0
	}
	return int64(m.Layers - m.DenseLayers)
}

func (m *Model) layerNorms() int64 {
	return int64(m.NormsPerLayer) * m.normParams(int64(m.Hidden))
}

// denseLayerParams and moeLayerParams are one block of each kind;
// decoderLayerParams is an encoder-decoder's decoder block.
func (m *Model) denseLayerParams() int64 {
	return m.attnParams() + m.mlpOf(int64(m.Intermediate)) + m.layerNorms()
}

func (m *Model) moeLayerParams() int64 {
	return m.attnParams() + m.moeParams() + m.layerNorms()
}

func (m *Model) decoderLayerParams() int64 {
	return 2*m.attnParams() + m.mlpOf(int64(m.Intermediate)) + 3*m.normParams(int64(m.Hidden))
}

// LayerParams is the parameter count of the largest transformer block.
func (m *Model) LayerParams() int64 {
	n := int64(0)
	if m.Experts == 0 || m.DenseLayers > 0 {
		n = m.denseLayerParams()
	}
	if m.Experts > 0 {
		n = max(n, m.moeLayerParams())
	}
	if m.Kind == EncoderDecoder {
		n = max(n, m.decoderLayerParams())
	}
	return n
}

// Params counts the model's parameters by part.
func (m *Model) Params() Breakdown {
	d, v, L := int64(m.Hidden), int64(m.Vocab), int64(m.Layers)
	var b Breakdown
	b.Embedding = v*m.embedDim() + int64(m.Positions)*d + int64(m.TokenTypes)*d
	if m.EmbedDim > 0 && m.EmbedDim != m.Hidden {
		b.Embedding += 2 * m.embedDim() * d // project_in and project_out, no bias
	}
	if m.EmbedNorm {
		b.Embedding += m.normParams(d)
	}
	ml := m.moeLayers()
	b.Attention = L * m.attnParams()
	b.MLP = (L-ml)*m.mlpOf(int64(m.Intermediate)) + ml*m.moeParams()
	b.Norms = L * m.layerNorms()
	stacks := int64(1)
	if m.Kind == EncoderDecoder {
		Ld := int64(m.DecoderLayers)
		b.Attention += 2 * Ld * m.attnParams()
		b.MLP += Ld * m.mlpOf(int64(m.Intermediate))
		b.Norms += 3 * Ld * m.normParams(d)
		stacks = 2
	}
	b.Attention += stacks * int64(m.RelativeBuckets) * int64(m.Heads)
	if m.FinalNorm {
		b.Norms += stacks * m.normParams(d)
	}
	b.Head = m.headParams()
	return b
}

// headParams is what sits on top of the last block.
func (m *Model) headParams() int64 {
	d, v := int64(m.Hidden), int64(m.Vocab)
	var n int64
	if m.Pooler {
		n += d*d + d
	}
	if m.Classifier > 0 {
		n += d*int64(m.Classifier) + int64(m.Classifier)
	}
	if m.BaseOnly {
		return n
	}
	if m.MLMHead {
		n += d*d + d + m.normParams(d) + v // transform dense, LayerNorm, decoder bias
		if !m.Tied {
			n += v * d
		}
		return n
	}
	if m.Kind == Encoder {
		return n
	}
	if !m.Tied {
		n += v * m.embedDim()
		if m.HeadBias {
			n += v
		}
	}
	return n
}

// LargestUnit is the parameter count of the largest unit ZeRO-3 or FSDP
// gathers at once when each block is wrapped: a block, or the root's
// embedding (token, position and type rows), or the untied head with the
// final norm, whichever is largest; and its name.
func (m *Model) LargestUnit() (int64, string) {
	b := m.Params()
	best, name := m.LayerParams(), "one block"
	if b.Embedding > best {
		best, name = b.Embedding, "the embedding"
	}
	if b.Head > best {
		best, name = b.Head, "the head"
	}
	return best, name
}

// Matrix is one weight shape, for the optimizers and adapters whose memory
// depends on shapes rather than counts (Adafactor, LoRA).
type Matrix struct {
	Rows, Cols int64
	Count      int64  // how many of this shape in the model
	Part       string // "attention", "mlp", "router", "pooler" (an encoder head's dense), "embedding", "head"
}

// Linear reports a weight of a block's nn.Linear: what bitsandbytes
// quantizes (the embedding and the LM head stay in 16 bits).
func (mt Matrix) Linear() bool {
	return mt.Part == "attention" || mt.Part == "mlp" || mt.Part == "router"
}

// Matrices lists the model's 2-D weights: the block projections (the ones
// LoRA adapts), routers and, with embeddings, the embedding and head.
func (m *Model) Matrices(embeddings bool) []Matrix {
	d, L := int64(m.Hidden), int64(m.Layers)
	H := int64(m.Heads)
	attnBlocks := L
	if m.Kind == EncoderDecoder {
		attnBlocks += 2 * int64(m.DecoderLayers)
	}
	var mats []Matrix
	add := func(rows, cols, count int64, part string) {
		if count > 0 && rows > 0 && cols > 0 {
			mats = append(mats, Matrix{rows, cols, count, part})
		}
	}
	if m.MLA() {
		qr, kvr, rope := int64(m.QLoRARank), int64(m.KVLoRARank), int64(m.QKRopeDim)
		if qr > 0 {
			add(qr, d, attnBlocks, "attention")
			add(H*m.qkDim(), qr, attnBlocks, "attention")
		} else {
			add(H*m.qkDim(), d, attnBlocks, "attention")
		}
		add(kvr+rope, d, attnBlocks, "attention")
		add(H*(int64(m.QKNopeDim)+m.vDim()), kvr, attnBlocks, "attention")
		add(d, H*m.vDim(), attnBlocks, "attention")
	} else {
		hd := int64(m.HeadDim)
		add(H*hd, d, attnBlocks, "attention")
		add(int64(m.KVHeads)*hd, d, 2*attnBlocks, "attention")
		add(d, H*hd, attnBlocks, "attention")
	}
	up := int64(1)
	if m.Gated {
		up = 2
	}
	denseMLPs := L - m.moeLayers()
	if m.Kind == EncoderDecoder {
		denseMLPs += int64(m.DecoderLayers)
	}
	in := int64(m.Intermediate)
	add(in, d, up*denseMLPs, "mlp")
	add(d, in, denseMLPs, "mlp")
	if ml := m.moeLayers(); ml > 0 {
		e := m.expertWidth()
		add(int64(m.Experts), d, ml, "router")
		add(e, d, up*int64(m.Experts)*ml, "mlp")
		add(d, e, int64(m.Experts)*ml, "mlp")
		if w := int64(m.SharedExperts)*e + int64(m.SharedIntermediate); w > 0 {
			add(w, d, up*ml, "mlp")
			add(d, w, ml, "mlp")
		}
	}
	// The encoder heads' dense layers are nn.Linear too (bitsandbytes
	// quantizes them; LoRA's usual targets leave them).
	if m.Pooler {
		add(d, d, 1, "pooler")
	}
	if m.MLMHead && !m.BaseOnly {
		add(d, d, 1, "pooler")
	}
	if embeddings {
		add(int64(m.Vocab), m.embedDim(), 1, "embedding")
		if b := m.Params(); b.Head >= int64(m.Vocab)*m.embedDim() {
			add(int64(m.Vocab), m.embedDim(), 1, "head")
		}
		add(int64(m.Positions), d, 1, "embedding")
	}
	return mats
}

// LargestTensor is the element count of the model's largest single weight.
func (m *Model) LargestTensor() int64 {
	var best int64
	for _, mt := range m.Matrices(true) {
		best = max(best, mt.Rows*mt.Cols)
	}
	return best
}

// validate checks the shape is usable and says which field is wrong.
func (m *Model) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"layers", m.Layers}, {"hidden", m.Hidden}, {"heads", m.Heads}, {"kv-heads", m.KVHeads},
		{"head-dim", m.HeadDim}, {"intermediate", m.Intermediate}, {"vocab", m.Vocab},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s must be positive (got %d)", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"decoder layers", m.DecoderLayers}, {"experts", m.Experts}, {"expert intermediate", m.ExpertIntermediate},
		{"shared experts", m.SharedExperts}, {"shared expert intermediate", m.SharedIntermediate}, {"dense layers", m.DenseLayers},
		{"q_lora_rank", m.QLoRARank}, {"kv_lora_rank", m.KVLoRARank}, {"qk_nope_head_dim", m.QKNopeDim},
		{"qk_rope_head_dim", m.QKRopeDim}, {"v_head_dim", m.VHeadDim}, {"positions", m.Positions}, {"token types", m.TokenTypes},
		{"relative buckets", m.RelativeBuckets}, {"labels", m.Classifier}, {"sliding window", m.SlidingWindow}, {"sliding layers", m.SlidingLayers},
		{"embed dim", m.EmbedDim},
	} {
		if f.v < 0 || f.v > 1<<30 {
			return fmt.Errorf("%s must be between 0 and 2^30 (got %d)", f.name, f.v)
		}
	}
	if m.Layers > 1<<20 || m.DecoderLayers > 1<<20 {
		return fmt.Errorf("too large: %d layers", m.Layers+m.DecoderLayers)
	}
	// Bound the shape so that no count overflows int64.
	width := float64(max(m.Intermediate, m.ExpertIntermediate, m.SharedIntermediate)) * float64(max(m.Experts, 1)+m.SharedExperts)
	attn := float64(m.Hidden) * float64(m.Heads+2*m.KVHeads) * float64(max(m.HeadDim, m.QKNopeDim+m.QKRopeDim, m.VHeadDim, m.KVLoRARank, m.QLoRARank))
	approx := float64(m.Layers+2*m.DecoderLayers)*(3*attn+3*float64(m.Hidden)*width) + 2*float64(m.Vocab)*float64(m.Hidden) +
		float64(m.Positions+m.TokenTypes)*float64(m.Hidden)
	if approx > 1e15 || m.HeadDim > 1<<20 || m.Positions > 1<<30 || m.EmbedDim > 1<<30 {
		return fmt.Errorf("too large: about %.3g parameters", approx)
	}
	if m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("heads (%d) must be a multiple of kv-heads (%d)", m.Heads, m.KVHeads)
	}
	if m.Experts > 0 && (m.ExpertsPerTok <= 0 || m.ExpertsPerTok > m.Experts) {
		return fmt.Errorf("experts per token must be between 1 and %d (got %d)", m.Experts, m.ExpertsPerTok)
	}
	if m.DenseLayers > m.Layers {
		return fmt.Errorf("dense layers (%d) exceed the layers (%d)", m.DenseLayers, m.Layers)
	}
	if m.SlidingLayers > m.Layers+m.DecoderLayers {
		return fmt.Errorf("sliding-window layers (%d) exceed the layers (%d)", m.SlidingLayers, m.Layers)
	}
	if m.MLA() && (m.QKNopeDim+m.QKRopeDim <= 0 || m.VHeadDim <= 0) {
		return fmt.Errorf("multi-head latent attention needs qk_nope_head_dim + qk_rope_head_dim and v_head_dim")
	}
	return nil
}

// Bare is the model as AutoModel builds it (what accelerate's
// estimate-memory and DeepSpeed's estimator examples load): BERT with its
// pooler and no task head, T5 without the LM head, a decoder without its
// LM head.
func (m *Model) Bare() *Model {
	b := *m
	b.MLMHead, b.Classifier, b.BaseOnly = false, 0, true
	b.Pooler = m.Family == "bert"
	return &b
}
