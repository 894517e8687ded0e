package estimate

import "fmt"

// layerSaved is what one transformer block keeps for backward in eager
// PyTorch, per token (elements) and per sequence (elements that grow with
// the square of the sequence length).
type layerSaved struct {
	norms     int64 // each norm's input and output
	attention int64 // q, k, v after RoPE, the output-projection input (and flash's output)
	mlp       int64 // up/gate outputs, the activation and the product (or fc1 and its activation)
	perSeq    int64 // the softmax probabilities H × L × L (eager) per sequence, in elements
	lse       int64 // flash attention's fp32 log-sum-exp H × L per sequence, in bytes
}

func (m *Model) layerSaved(S int64, flash bool) layerSaved {
	d, hd := int64(m.Hidden), int64(m.HeadDim)
	H, KV, I := int64(m.Heads), int64(m.KVHeads), int64(m.Intermediate)
	var s layerSaved
	s.norms = int64(m.NormsPerLayer) * 2 * d
	s.attention = (H+2*KV)*hd + H*hd
	if flash {
		s.attention += H * hd // the kernel keeps its output beside the projection's input copy
		s.lse = H * S * 4
	} else {
		s.perSeq = H * S * S
	}
	per := 2 * I // fc1 output and its activation
	if m.Gated {
		per = 4 * I // gate, act(gate), up, act(gate)*up
	}
	if m.Experts > 0 {
		k := int64(m.ExpertsPerTok)
		s.mlp = k*per + k*d + int64(m.Experts) // each token's k experts, their gathered inputs, router logits
	} else {
		s.mlp = per
	}
	return s
}

// activations is the memory of the tensors saved for backward over the
// whole model at batch B and sequence S, with its formula.
func (m *Model) activations(B, S, P int64, flash, checkpointing bool) (int64, string) {
	s := m.layerSaved(S, flash)
	perToken := s.norms + s.attention + s.mlp
	layer := B*S*perToken*P + B*s.perSeq*P + B*s.lse
	d, V, L := int64(m.Hidden), int64(m.Vocab), int64(m.Layers)
	head := B * S * (2*d + 2*V) * P // final norm in/out, logits, log-softmax
	quad := fmt.Sprintf(" + %d heads × L² softmax", m.Heads)
	if flash {
		quad = " + fp32 log-sum-exp"
	}
	perLayer := fmt.Sprintf("per layer B %d × L %d × (norms %d + attention %d + MLP %d) × %d B%s = %s",
		B, S, s.norms, s.attention, s.mlp, P, quad, count(layer))
	headF := fmt.Sprintf("head B×L×(2×%d + 2×%d vocab)×%d B = %s", d, V, P, count(head))
	if checkpointing {
		inputs := L * B * S * d * P
		return inputs + layer + head, fmt.Sprintf("checkpointed: %d layer inputs B×L×%d×%d B = %s + one recomputed layer (%s) + %s",
			L, d, P, count(inputs), perLayer, headF)
	}
	return L*layer + head, fmt.Sprintf("%d layers × (%s) + %s", L, perLayer, headF)
}

// forwardActivations is the working memory of one inference forward over
// B×S tokens: the residual stream, the larger of one layer's attention and
// MLP temporaries, and the logits.
func (m *Model) forwardActivations(B, S, P int64, flash bool) (int64, string) {
	d, hd, I, V := int64(m.Hidden), int64(m.HeadDim), int64(m.Intermediate), int64(m.Vocab)
	T := B * S
	residual := 2 * d * T * P
	attn := (int64(m.Heads)+2*int64(m.KVHeads))*hd*T*P + int64(m.Heads)*hd*T*P
	if !flash {
		attn += 2 * B * int64(m.Heads) * S * S * P // scores and probabilities
	}
	width := 2 * I
	if m.Gated {
		width = 3 * I
	}
	if m.Experts > 0 {
		width *= int64(m.ExpertsPerTok)
	}
	mlp := width * T * P
	logits := V * T * P
	total := residual + max(attn, mlp) + logits
	scores := ""
	if !flash {
		scores = fmt.Sprintf(" + scores and probabilities 2×%d heads×L²", m.Heads)
	}
	return total, fmt.Sprintf("T = B %d × L %d tokens × %d B: residual 2×%d = %s + max(attention q,k,v,o %d%s = %s, MLP %d = %s) + logits %d = %s",
		B, S, P, d, count(residual), (int64(2*m.Heads)+2*int64(m.KVHeads))*hd, scores, count(attn), width, count(mlp), V, count(logits))
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
