// Package estimate predicts the GPU memory of a training or inference job
// from a model's architecture, before any snapshot exists.
package estimate

import "fmt"

// Norm is the kind of normalisation layer, which decides its parameters.
type Norm int

const (
	// RMSNorm has a weight only.
	RMSNorm Norm = iota
	// LayerNorm has a weight and a bias.
	LayerNorm
)

// Model is a decoder-only transformer's shape: enough to count its
// parameters exactly and the tensors its layers keep for backward.
type Model struct {
	Family        string // Hugging Face model_type, or "arch" for --arch flags
	Layers        int
	Hidden        int
	Heads         int
	KVHeads       int // Heads for multi-head, 1 for multi-query, between for GQA
	HeadDim       int
	Intermediate  int // MLP width (per expert for MoE)
	Vocab         int
	Tied          bool // the LM head shares the embedding matrix
	Gated         bool // gate*up MLP (SwiGLU/GeGLU): three matrices instead of two
	Experts       int  // MoE experts per layer; 0 for a dense MLP
	ExpertsPerTok int
	Positions     int  // rows of a learned position embedding (0 with RoPE/ALiBi)
	EmbedDim      int  // width of the token embedding when it differs from Hidden (OPT-350m)
	QKVBias       bool // q, k, v projections have biases
	OutBias       bool // attention output projection has a bias
	MLPBias       bool
	HeadBias      bool // the LM head has a bias (phi)
	Norm          Norm
	NormsPerLayer int  // 1 when attention and MLP share one (parallel blocks), 2 usually, 4 in gemma2
	FinalNorm     bool // a norm after the last layer
	QKNorm        bool // per-head LayerNorms on q and k (phi's qk_layernorm)
	Parallel      bool // attention and MLP read the same normalised input (falcon, phi, gpt-j)
}

// Breakdown is a model's parameter count by part.
type Breakdown struct {
	Embedding int64 // token (and learned position) embeddings, embedding projections
	Attention int64 // all layers
	MLP       int64 // all layers (all experts and the router for MoE)
	Norms     int64 // all layers and the final norm
	Head      int64 // LM head when not tied
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

// attnParams is one layer's attention parameters.
func (m *Model) attnParams() int64 {
	d, hd := int64(m.Hidden), int64(m.HeadDim)
	q, kv := int64(m.Heads)*hd, int64(m.KVHeads)*hd
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

// expertParams is one MLP's parameters (one expert for MoE).
func (m *Model) expertParams() int64 {
	d, in := int64(m.Hidden), int64(m.Intermediate)
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

// mlpParams is one layer's MLP parameters, router included.
func (m *Model) mlpParams() int64 {
	if m.Experts > 0 {
		return int64(m.Experts)*m.expertParams() + int64(m.Hidden)*int64(m.Experts)
	}
	return m.expertParams()
}

// LayerParams is the parameter count of one transformer block.
func (m *Model) LayerParams() int64 {
	return m.attnParams() + m.mlpParams() + int64(m.NormsPerLayer)*m.normParams(int64(m.Hidden))
}

// Params counts the model's parameters by part.
func (m *Model) Params() Breakdown {
	d, v, L := int64(m.Hidden), int64(m.Vocab), int64(m.Layers)
	var b Breakdown
	b.Embedding = v*m.embedDim() + int64(m.Positions)*d
	if m.EmbedDim > 0 && m.EmbedDim != m.Hidden {
		b.Embedding += 2 * m.embedDim() * d // project_in and project_out, no bias
	}
	b.Attention = L * m.attnParams()
	b.MLP = L * m.mlpParams()
	b.Norms = L * int64(m.NormsPerLayer) * m.normParams(d)
	if m.FinalNorm {
		b.Norms += m.normParams(d)
	}
	if !m.Tied {
		b.Head = v * m.embedDim()
		if m.HeadBias {
			b.Head += v
		}
	}
	return b
}

// Matrix is one weight shape, for the optimizers and adapters whose memory
// depends on shapes rather than counts (Adafactor, LoRA).
type Matrix struct {
	Rows, Cols int64
	Count      int64 // how many of this shape in the model
}

// Matrices lists the model's 2-D weights inside the transformer blocks
// (the projections LoRA adapts) and, with embeddings, the embedding and head.
func (m *Model) Matrices(embeddings bool) []Matrix {
	d, hd, L := int64(m.Hidden), int64(m.HeadDim), int64(m.Layers)
	q, kv, in := int64(m.Heads)*hd, int64(m.KVHeads)*hd, int64(m.Intermediate)
	mats := []Matrix{
		{q, d, L}, {kv, d, 2 * L}, {d, q, L},
	}
	experts := int64(1)
	if m.Experts > 0 {
		experts = int64(m.Experts)
		mats = append(mats, Matrix{int64(m.Experts), d, L})
	}
	up := int64(1)
	if m.Gated {
		up = 2
	}
	mats = append(mats, Matrix{in, d, up * experts * L}, Matrix{d, in, experts * L})
	if embeddings {
		mats = append(mats, Matrix{int64(m.Vocab), m.embedDim(), 1})
		if !m.Tied {
			mats = append(mats, Matrix{int64(m.Vocab), m.embedDim(), 1})
		}
		if m.Positions > 0 {
			mats = append(mats, Matrix{int64(m.Positions), d, 1})
		}
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
	// Bound the shape so that no count overflows int64.
	approx := float64(m.Layers)*(float64(m.Hidden)*float64(m.Heads+2*m.KVHeads)*float64(m.HeadDim)+
		3*float64(m.Hidden)*float64(m.Intermediate)*float64(max(m.Experts, 1))) + 2*float64(m.Vocab)*float64(m.Hidden)
	if approx > 1e15 || m.HeadDim > 1<<20 || m.Positions > 1<<30 || m.EmbedDim > 1<<30 {
		return fmt.Errorf("too large: about %.3g parameters", approx)
	}
	if m.Heads%m.KVHeads != 0 {
		return fmt.Errorf("heads (%d) must be a multiple of kv-heads (%d)", m.Heads, m.KVHeads)
	}
	if m.Experts > 0 && (m.ExpertsPerTok <= 0 || m.ExpertsPerTok > m.Experts) {
		return fmt.Errorf("experts per token must be between 1 and %d (got %d)", m.Experts, m.ExpertsPerTok)
	}
	return nil
}
