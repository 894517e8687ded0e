package estimate

import (
	"fmt"
	"strings"
)

// layerSaved is what one transformer block keeps for backward in eager
// PyTorch: elements per token, elements that grow with the square of the
// sequence length per sequence, and bytes (fp32 log-sum-exp, bool dropout
// masks).
type layerSaved struct {
	norms     int64 // each norm's input and output
	attention int64 // q, k, v after RoPE, the output-projection input (and flash's output)
	mlp       int64 // up/gate outputs, the activation and the product (or fc1 and its activation)
	perSeq    int64 // the softmax probabilities H × L × L (eager) per sequence, in elements
	lse       int64 // flash attention's fp32 log-sum-exp H × L per sequence, in bytes
	maskTok   int64 // dropout masks per token, bytes (bool)
	maskSeq   int64 // the attention-dropout mask H × L × L per sequence, bytes
}

func (s layerSaved) perToken() int64 { return s.norms + s.attention + s.mlp }

// attentionSaved is one attention block's saved tensors per token.
func (m *Model) attentionSaved(S int64, flash, dropout bool) layerSaved {
	H, KV := int64(m.Heads), int64(m.KVHeads)
	qk, v := m.qkDim(), m.vDim()
	var s layerSaved
	s.attention = H*qk + KV*qk + KV*v + H*v
	if m.MLA() {
		// The latent and the compressed query feed kv_b_proj and q_b_proj,
		// each kept with its normalised copy.
		s.attention += int64(m.KVLoRARank+m.QKRopeDim) + int64(m.KVLoRARank) + 2*int64(m.QLoRARank)
	}
	if flash {
		s.attention += H * v // the kernel keeps its output beside the projection's input copy
		s.lse = H * S * 4
	} else {
		s.perSeq = H * S * S
		if dropout && m.AttnDropout {
			s.perSeq *= 2 // the dropped probabilities beside the probabilities
			s.maskSeq = H * S * S
		}
	}
	return s
}

// mlpSaved is one MLP's saved elements per token: width in.
func (m *Model) mlpSaved(in int64) int64 {
	if m.Gated {
		return 4 * in // gate, act(gate), up, act(gate)*up
	}
	return 2 * in // fc1 output and its activation
}

// layerSaved is one block of the given kind: dense, MoE, or an
// encoder-decoder's decoder block (self- and cross-attention).
func (m *Model) layerSaved(S int64, flash, dropout bool, kind string) layerSaved {
	d := int64(m.Hidden)
	s := m.attentionSaved(S, flash, dropout)
	s.norms = int64(m.NormsPerLayer) * 2 * d
	switch kind {
	case "moe":
		k := int64(m.ExpertsPerTok)
		s.mlp = k*m.mlpSaved(m.expertWidth()) + k*d + int64(m.Experts) // each token's k experts, their gathered inputs, router logits
		if w := int64(m.SharedExperts)*m.expertWidth() + int64(m.SharedIntermediate); w > 0 {
			s.mlp += m.mlpSaved(w)
		}
	case "decoder":
		cross := m.attentionSaved(S, flash, dropout)
		s.attention += cross.attention
		s.perSeq += cross.perSeq
		s.lse += cross.lse
		s.maskSeq += cross.maskSeq
		s.norms = 3 * 2 * d
		s.mlp = m.mlpSaved(int64(m.Intermediate))
	default:
		s.mlp = m.mlpSaved(int64(m.Intermediate))
	}
	if dropout && m.HiddenDropout {
		s.maskTok = 2 * d // after attention and after the MLP
		if kind == "decoder" {
			s.maskTok = 3 * d
		}
	}
	return s
}

// layerBytes is one block's saved bytes at batch B, sequence S, P bytes
// per activation.
func (s layerSaved) bytes(B, S, P int64) int64 {
	return B*S*s.perToken()*P + B*s.perSeq*P + B*s.lse + B*S*s.maskTok + B*s.maskSeq
}

// blockCounts lists the model's blocks by kind.
func (m *Model) blockCounts() []struct {
	kind string
	n    int64
} {
	var out []struct {
		kind string
		n    int64
	}
	moe := m.moeLayers()
	if dense := int64(m.Layers) - moe; dense > 0 {
		out = append(out, struct {
			kind string
			n    int64
		}{"dense", dense})
	}
	if moe > 0 {
		out = append(out, struct {
			kind string
			n    int64
		}{"moe", moe})
	}
	if m.Kind == EncoderDecoder && m.DecoderLayers > 0 {
		out = append(out, struct {
			kind string
			n    int64
		}{"decoder", int64(m.DecoderLayers)})
	}
	return out
}

// ActOptions are the parts of the job the saved tensors depend on.
type ActOptions struct {
	B, S, P       int64
	Flash         bool
	Checkpointing bool
	Dropout       bool  // training with the config's dropout
	LogitsFP32    bool  // the loss upcasts the logits (Hugging Face's causal-LM loss)
	LoRA          int64 // elements per token the LoRA adapters keep over the whole model: each adapter's r-wide A output
}

// headSaved is the bytes after the last block: final norm in/out, the
// logits, the loss's log-softmax (in fp32 with an upcast, beside the fp32
// copy of the logits).
func (m *Model) headSaved(a ActOptions) (int64, string) {
	d, V := int64(m.Hidden), int64(m.Vocab)
	T := a.B * a.S
	if m.BaseOnly || (m.Kind == Encoder && !m.MLMHead) {
		return T * 2 * d * a.P, fmt.Sprintf("head B×L×2×%d×%d B = %s", d, a.P, count(T*2*d*a.P))
	}
	if a.LogitsFP32 && a.P < 4 {
		n := T * ((2*d+V)*a.P + 2*V*4)
		return n, fmt.Sprintf("head B×L×((2×%d + %d logits)×%d B + fp32 logits and log-softmax 2×%d×4 B) = %s", d, V, a.P, V, count(n))
	}
	n := T * (2*d + 2*V) * a.P
	return n, fmt.Sprintf("head B×L×(2×%d + 2×%d vocab)×%d B = %s", d, V, a.P, count(n))
}

// activations is the memory of the tensors saved for backward over the
// whole model, with its formula.
func (m *Model) activations(a ActOptions) (int64, string) {
	B, S, P := a.B, a.S, a.P
	var total, largest int64
	var parts string
	for _, bc := range m.blockCounts() {
		s := m.layerSaved(S, a.Flash, a.Dropout, bc.kind)
		one := s.bytes(B, S, P)
		largest = max(largest, one)
		quad := fmt.Sprintf(" + %d heads × L² softmax", m.Heads)
		if a.Flash {
			quad = " + fp32 log-sum-exp"
		}
		masks := ""
		if s.maskTok > 0 || s.maskSeq > 0 {
			masks = " + bool dropout masks"
		}
		if parts != "" {
			parts += " + "
		}
		kind := bc.kind
		if m.Kind == EncoderDecoder && kind == "dense" {
			kind = "encoder"
		}
		parts += fmt.Sprintf("%d %s layers × (B %d × L %d × (norms %d + attention %d + MLP %d) × %d B%s%s = %s)",
			bc.n, kind, B, S, s.norms, s.attention, s.mlp, P, quad, masks, count(one))
		total += bc.n * one
	}
	head, headF := m.headSaved(a)
	blocks := int64(m.Layers + m.DecoderLayers)
	lora, loraF := a.LoRA*B*S*P, ""
	if a.Checkpointing {
		lora /= blocks
	}
	if lora > 0 {
		loraF = fmt.Sprintf(" + LoRA: each adapter's rank-wide A output, %s per token × B×L×%d B = %s", count(a.LoRA), P, count(lora))
		if a.Checkpointing {
			loraF = fmt.Sprintf(" + LoRA: one block's adapters' rank-wide A outputs = %s", count(lora))
		}
	}
	if a.Checkpointing {
		inputs := blocks * B * S * int64(m.Hidden) * P
		return inputs + largest + head + lora, fmt.Sprintf("checkpointed: %d block inputs B×L×%d×%d B = %s + one recomputed block %s + %s%s",
			blocks, m.Hidden, P, count(inputs), count(largest), headF, loraF)
	}
	return total + head + lora, parts + " + " + headF + loraF
}

// forwardActivations is the working memory of one inference forward over
// B×S tokens: the residual stream, the larger of one layer's attention and
// MLP temporaries, and the logits.
func (m *Model) forwardActivations(B, S, P int64, flash bool) (int64, string) {
	d, V := int64(m.Hidden), int64(m.Vocab)
	T := B * S
	residual := 2 * d * T * P
	H := int64(m.Heads)
	attnW := H*m.qkDim() + 2*int64(m.KVHeads)*max(m.qkDim(), m.vDim()) + H*m.vDim()
	attn := attnW * T * P
	if !flash {
		attn += 2 * B * H * S * S * P // scores and probabilities
	}
	width := m.mlpSaved(int64(m.Intermediate)) * 3 / 4
	if !m.Gated {
		width = m.mlpSaved(int64(m.Intermediate))
	}
	if m.moeLayers() > 0 {
		e := 3 * m.expertWidth()
		if !m.Gated {
			e = 2 * m.expertWidth()
		}
		width = max(width, e*int64(m.ExpertsPerTok))
	}
	mlp := width * T * P
	logits := V * T * P
	if m.BaseOnly || (m.Kind == Encoder && !m.MLMHead) {
		logits = 0
	}
	total := residual + max(attn, mlp) + logits
	scores := ""
	if !flash {
		scores = fmt.Sprintf(" + scores and probabilities 2×%d heads×L²", m.Heads)
	}
	return total, fmt.Sprintf("T = B %d × L %d tokens × %d B: residual 2×%d = %s + max(attention q,k,v,o %d%s = %s, MLP %d = %s) + logits %d = %s",
		B, S, P, d, count(residual), attnW, scores, count(attn), width, count(mlp), V, count(logits))
}

// kvCache is the KV cache of B sequences of S tokens at P bytes, with its
// formula: keys and values per layer (a sliding-window layer keeps only
// its window; MLA's keys and values are cached per head after kv_b_proj,
// as Hugging Face's implementation does; an encoder-decoder's decoder
// caches its self-attention and the cross-attention over the encoder).
func (m *Model) kvCache(B, S, P int64) (int64, string) {
	if m.Kind == Encoder {
		return 0, "an encoder keeps no KV cache"
	}
	perTok := int64(m.KVHeads) * (m.qkDim() + m.vDim())
	if m.Kind == EncoderDecoder {
		Ld := int64(m.DecoderLayers)
		n := 2 * Ld * perTok * B * S * P
		return n, fmt.Sprintf("%d decoder layers × (self + cross) × %d kv-heads × (%d + %d) × B %d × L %d × %d B", Ld, m.KVHeads, m.qkDim(), m.vDim(), B, S, P)
	}
	full := int64(m.Layers - m.SlidingLayers)
	n := full * perTok * B * S * P
	var parts []string
	if full > 0 {
		parts = append(parts, fmt.Sprintf("%d layers × %d kv-heads × (K %d + V %d) × B %d × L %d × %d B", full, m.KVHeads, m.qkDim(), m.vDim(), B, S, P))
	}
	if m.SlidingLayers > 0 {
		w := min(S, int64(m.SlidingWindow))
		n += int64(m.SlidingLayers) * perTok * B * w * P
		parts = append(parts, fmt.Sprintf("%d sliding-window layers × %d kv-heads × (K %d + V %d) × B %d × min(L %d, window %d) × %d B",
			m.SlidingLayers, m.KVHeads, m.qkDim(), m.vDim(), B, S, m.SlidingWindow, P))
	}
	f := strings.Join(parts, " + ")
	return n, f
}

// HookOutputsPerToken is the element count the Hugging Face blog's forward
// hook sums for one token: every module's output in a Llama-style model
// (embedding, per layer: two norms, q/k/v/o projections, the attention
// module, gate/up/activation/down, the MLP module, the layer; then the
// rotary cos and sin, the final norm and the logits). The blog prints it
// in bytes: 5,065,216 for Qwen2.5-1.5B in fp32 = 1,266,304 elements.
func (m *Model) HookOutputsPerToken() (int64, error) {
	switch m.Family {
	case "llama", "mistral", "qwen2":
	default:
		return 0, fmt.Errorf("the module list of the blog's hook is written down for llama, mistral and qwen2, not %s", m.Family)
	}
	d, hd, I := int64(m.Hidden), int64(m.HeadDim), int64(m.Intermediate)
	q, kv := int64(m.Heads)*hd, int64(m.KVHeads)*hd
	// input_layernorm, q, k, v, self_attn, o_proj, post_attention_layernorm,
	// gate, act_fn, up, down, mlp, decoder layer.
	layer := d + q + 2*kv + d + d + d + 3*I + d + d + d
	return d + int64(m.Layers)*layer + 2*hd + d + int64(m.Vocab), nil
}
