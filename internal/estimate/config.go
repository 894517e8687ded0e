package estimate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// MaxConfigBytes bounds a config.json: the largest real ones (with long
// RoPE factor lists) are tens of kilobytes.
const MaxConfigBytes = 4 << 20

// config is a Hugging Face config.json read field by field, so that a
// missing or mistyped field can be named in the error, and a field that
// describes structure gpumem does not count is named too.
type config struct {
	fields map[string]json.RawMessage
	family string
	used   map[string]bool
}

// traits are what a family's modeling code fixes without a config field:
// every count comes from the standard fields, these only fill the gaps.
type traits struct {
	read       func(c *config, t traits) (*Model, error)
	qkvBias    bool   // q, k, v projections carry biases (Qwen2Attention)
	tied       bool   // tie_word_embeddings' default
	alwaysTied bool   // the head is the embedding whatever the config says (Gemma)
	norms      int    // norms per block (0: 2)
	qkNorm     bool   // per-head RMSNorm on q and k (Qwen3, Gemma3)
	sharedGate bool   // a sigmoid gate on the shared expert (Qwen2-MoE)
	sliding    string // which layers use "sliding_window": all, alternate, pattern, qwen
	experts    string // the field an MoE family must have
}

// families maps each model_type gpumem counts to its traits.
var families = map[string]traits{
	"llama":           {read: decoderModel},
	"mistral":         {read: decoderModel, sliding: "all"},
	"mixtral":         {read: decoderModel, sliding: "all", experts: "num_local_experts"},
	"qwen2":           {read: decoderModel, qkvBias: true, sliding: "qwen"},
	"qwen2_moe":       {read: decoderModel, qkvBias: true, sharedGate: true, sliding: "qwen", experts: "num_experts"},
	"qwen3":           {read: decoderModel, qkNorm: true, sliding: "qwen"},
	"qwen3_moe":       {read: decoderModel, qkNorm: true, sliding: "qwen", experts: "num_experts"},
	"gemma":           {read: decoderModel, tied: true, alwaysTied: true},
	"gemma2":          {read: decoderModel, tied: true, alwaysTied: true, norms: 4, sliding: "alternate"},
	"gemma3_text":     {read: decoderModel, tied: true, norms: 4, qkNorm: true, sliding: "pattern"},
	"phi3":            {read: decoderModel, sliding: "all"},
	"deepseek_v2":     {read: decoderModel, experts: "n_routed_experts"},
	"phi":             {read: phiModel},
	"phi-msft":        {read: phiModel},
	"gpt2":            {read: gpt2Model},
	"gpt_neox":        {read: neoxModel},
	"opt":             {read: optModel},
	"falcon":          {read: falconModel},
	"RefinedWeb":      {read: falconModel},
	"bert":            {read: bertModel, tied: true},
	"t5":              {read: t5Model, tied: true},
	"mt5":             {read: t5Model, tied: false},
	"RefinedWebModel": {read: falconModel},
}

// Families lists the model_type values ParseConfig understands.
func Families() []string {
	names := make([]string, 0, len(families))
	for n := range families {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseConfig reads a Hugging Face config.json into a Model. Errors name
// the field that is missing, wrong, or not one gpumem can count.
func ParseConfig(data []byte) (*Model, error) {
	if len(data) > MaxConfigBytes {
		return nil, fmt.Errorf("%d bytes: larger than any config.json (limit %d)", len(data), MaxConfigBytes)
	}
	c := &config{used: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c.fields); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if c.fields == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	if err := c.str("model_type", &c.family); err != nil {
		return nil, err
	}
	if c.family == "" {
		return nil, fmt.Errorf(`no "model_type" field (which model family is this?)`)
	}
	t, ok := families[c.family]
	if !ok {
		hint := ""
		if c.has("text_config") {
			hint = `; it has a "text_config": give that object, with its own model_type, as the config`
		}
		return nil, fmt.Errorf(`"model_type" %q is not a family gpumem counts (known: %s)%s`, c.family, strings.Join(Families(), ", "), hint)
	}
	m, err := t.read(c, t)
	if err != nil {
		return nil, err
	}
	m.Family = c.family
	if err := c.unknownStructure(); err != nil {
		return nil, err
	}
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s config: %v", c.family, err)
	}
	return m, nil
}

// structural are fragments of key names that describe a model's shape.
// A key with one of them that no reader used is structure gpumem would
// miscount, so it is named instead of ignored.
var structural = []string{"expert", "moe", "lora", "linear_", "conv", "ssm", "mamba", "state_size", "kv_heads",
	"head_dim", "num_layers", "_layers", "sparse", "dense", "window", "vision_config", "audio_config", "n_inner", "intermediate"}

// ignorable are keys with a structural-looking name that change no count
// or memory: routing hyper-parameters, loss weights, layer ranges of
// features gpumem models elsewhere.
var ignorable = map[string]bool{
	"router_aux_loss_coef": true, "output_router_logits": true, "norm_topk_prob": true, "routed_scaling_factor": true,
	"moe_aux_loss_coeff": true, "aux_loss_alpha": true, "seq_aux": true, "ep_size": true, "router_jitter_noise": true,
	"num_nextn_predict_layers": true, // multi-token-prediction layers: the Hub checkpoint's extra, not built by transformers
	"max_window_layers":        true, "use_sliding_window": true, "sliding_window_pattern": true,
	"attention_window": true, "moe_layer_freq": true, "fused_dense": true, "dense_act_fn": true,
}

func (c *config) unknownStructure() error {
	keys := make([]string, 0, len(c.fields))
	for k := range c.fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if c.used[k] || ignorable[k] || !c.has(k) {
			continue
		}
		for _, s := range structural {
			if strings.Contains(k, s) {
				return fmt.Errorf("%s config: field %q describes structure gpumem does not count (value %s); it would miscount this model", c.family, k, clip(c.fields[k]))
			}
		}
	}
	return nil
}

func clip(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return s
}

func (c *config) has(key string) bool {
	raw, ok := c.fields[key]
	return ok && string(raw) != "null"
}

// int reads a required integer field.
func (c *config) int(key string) (int, error) {
	c.used[key] = true
	raw, ok := c.fields[key]
	if !ok || string(raw) == "null" {
		return 0, fmt.Errorf("%s config has no %q field", c.family, key)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != float64(int64(f)) || f < -(1<<40) || f > 1<<40 {
		return 0, fmt.Errorf("%s config: %q is %s, want an integer", c.family, key, clip(raw))
	}
	return int(f), nil
}

// intOr reads an optional integer field, def when absent or null.
func (c *config) intOr(key string, def int) (int, error) {
	c.used[key] = true
	if !c.has(key) {
		return def, nil
	}
	return c.int(key)
}

// floatOr reads an optional number.
func (c *config) floatOr(key string, def float64) (float64, error) {
	c.used[key] = true
	if !c.has(key) {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(c.fields[key], &f); err != nil {
		return 0, fmt.Errorf("%s config: %q is %s, want a number", c.family, key, clip(c.fields[key]))
	}
	return f, nil
}

// first reads the first of several names a family has used for one field.
func (c *config) first(keys ...string) (int, error) {
	for _, k := range keys {
		c.used[k] = true
	}
	for _, k := range keys {
		if c.has(k) {
			return c.int(k)
		}
	}
	return 0, fmt.Errorf("%s config has no %q field", c.family, keys[0])
}

func (c *config) boolOr(key string, def bool) (bool, error) {
	c.used[key] = true
	if !c.has(key) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(c.fields[key], &b); err != nil {
		return false, fmt.Errorf("%s config: %q is %s, want true or false", c.family, key, clip(c.fields[key]))
	}
	return b, nil
}

func (c *config) str(key string, dst *string) error {
	c.used[key] = true
	if !c.has(key) {
		return nil
	}
	if err := json.Unmarshal(c.fields[key], dst); err != nil {
		return fmt.Errorf("%q is %s, want a string", key, clip(c.fields[key]))
	}
	return nil
}

// ints reads an optional list of integers.
func (c *config) ints(key string) ([]int, error) {
	c.used[key] = true
	if !c.has(key) {
		return nil, nil
	}
	var v []int
	if err := json.Unmarshal(c.fields[key], &v); err != nil {
		return nil, fmt.Errorf("%s config: %q is %s, want a list of integers", c.family, key, clip(c.fields[key]))
	}
	return v, nil
}

// strs reads an optional list of strings.
func (c *config) strs(key string) ([]string, error) {
	c.used[key] = true
	if !c.has(key) {
		return nil, nil
	}
	var v []string
	if err := json.Unmarshal(c.fields[key], &v); err != nil {
		return nil, fmt.Errorf("%s config: %q is %s, want a list of strings", c.family, key, clip(c.fields[key]))
	}
	return v, nil
}

// reader collects the first error of a run of field reads.
type reader struct {
	c   *config
	err error
}

func (r *reader) int(key string) int {
	v, err := r.c.int(key)
	r.keep(err)
	return v
}

func (r *reader) intOr(key string, def int) int {
	v, err := r.c.intOr(key, def)
	r.keep(err)
	return v
}

func (r *reader) floatOr(key string, def float64) float64 {
	v, err := r.c.floatOr(key, def)
	r.keep(err)
	return v
}

func (r *reader) first(keys ...string) int {
	v, err := r.c.first(keys...)
	r.keep(err)
	return v
}

func (r *reader) boolOr(key string, def bool) bool {
	v, err := r.c.boolOr(key, def)
	r.keep(err)
	return v
}

func (r *reader) str(key string) string {
	var s string
	r.keep(r.c.str(key, &s))
	return s
}

func (r *reader) ints(key string) []int {
	v, err := r.c.ints(key)
	r.keep(err)
	return v
}

func (r *reader) strs(key string) []string {
	v, err := r.c.strs(key)
	r.keep(err)
	return v
}

func (r *reader) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) fail(format string, a ...any) {
	r.keep(fmt.Errorf("%s config: "+format, append([]any{r.c.family}, a...)...))
}

// headDim is "head_dim" when given, else hidden / heads, which must divide.
func (r *reader) headDim(hidden, heads int, hiddenKey, headsKey string) int {
	if r.c.has("head_dim") {
		return r.int("head_dim")
	}
	r.c.used["head_dim"] = true
	if heads <= 0 || r.err != nil {
		return 0
	}
	if hidden%heads != 0 {
		r.fail("%q %d is not a multiple of %q %d, and there is no \"head_dim\"", hiddenKey, hidden, headsKey, heads)
		return 0
	}
	return hidden / heads
}

// decoderModel reads every RoPE + RMSNorm + gated-MLP decoder (Llama and
// its descendants) from the standard fields: grouped-query attention,
// explicit head_dim, attention and MLP biases, tied embeddings, MoE
// (num_local_experts / num_experts / n_routed_experts, num_experts_per_tok,
// moe_intermediate_size, shared experts, first_k_dense_replace,
// decoder_sparse_step, mlp_only_layers), multi-head latent attention
// (q_lora_rank, kv_lora_rank, qk_nope/rope_head_dim, v_head_dim) and
// sliding-window layers for the KV cache.
func decoderModel(c *config, t traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:       r.int("num_hidden_layers"),
		Hidden:       r.int("hidden_size"),
		Heads:        r.int("num_attention_heads"),
		Intermediate: r.int("intermediate_size"),
		Vocab:        r.int("vocab_size"),
		Gated:        true,
		Norm:         RMSNorm,
		FinalNorm:    true,
		QKNorm:       t.qkNorm,
	}
	m.NormsPerLayer = 2
	if t.norms > 0 {
		m.NormsPerLayer = t.norms
	}
	m.KVHeads = r.intOr("num_key_value_heads", m.Heads)
	if r.err != nil {
		return nil, r.err
	}
	if m.Layers > 1<<20 {
		return nil, fmt.Errorf("%s config: too large: %d layers", c.family, m.Layers)
	}
	bias := r.boolOr("attention_bias", false)
	m.QKVBias, m.OutBias = bias || t.qkvBias, bias
	m.MLPBias = r.boolOr("mlp_bias", false)
	m.AttnDropout = r.floatOr("attention_dropout", 0) > 0

	if c.has("kv_lora_rank") {
		m.KVLoRARank = r.int("kv_lora_rank")
		m.QLoRARank = r.intOr("q_lora_rank", 0)
		m.QKNopeDim = r.int("qk_nope_head_dim")
		m.QKRopeDim = r.int("qk_rope_head_dim")
		m.VHeadDim = r.int("v_head_dim")
		m.HeadDim = m.QKNopeDim + m.QKRopeDim
		m.KVHeads = m.Heads // every head reads its own k and v expanded from the latent
		if bias {
			r.fail(`"attention_bias" true with multi-head latent attention is not a layout gpumem counts`)
		}
	} else {
		if c.has("q_lora_rank") {
			r.fail(`"q_lora_rank" without "kv_lora_rank" is not a layout gpumem counts`)
		}
		m.HeadDim = r.headDim(m.Hidden, m.Heads, "hidden_size", "num_attention_heads")
	}

	// Mixture of experts, by whichever name the family gives the count.
	if t.experts != "" && !c.has(t.experts) {
		r.fail("has no %q field", t.experts)
	}
	if n := r.intOr("num_local_experts", r.intOr("num_experts", r.intOr("n_routed_experts", 0))); n > 0 {
		m.Experts = n
		m.ExpertsPerTok = r.int("num_experts_per_tok")
		m.ExpertIntermediate = r.intOr("moe_intermediate_size", 0)
		m.SharedExperts = r.intOr("n_shared_experts", 0)
		m.SharedIntermediate = r.intOr("shared_expert_intermediate_size", 0)
		m.SharedGate = t.sharedGate && m.SharedIntermediate > 0
		if f := r.intOr("moe_layer_freq", 1); f != 1 {
			r.fail(`"moe_layer_freq" %d: gpumem counts MoE on every layer after first_k_dense_replace only`, f)
		}
		firstDense := r.intOr("first_k_dense_replace", 0)
		step := r.intOr("decoder_sparse_step", 1)
		if step <= 0 {
			r.fail(`"decoder_sparse_step" %d must be positive`, step)
			step = 1
		}
		only := map[int]bool{}
		for _, l := range r.ints("mlp_only_layers") {
			only[l] = true
		}
		for i := 0; i < m.Layers; i++ {
			// DeepseekV2: MoE from first_k_dense_replace on; Qwen2/3-MoE:
			// (i+1) % decoder_sparse_step == 0 and not in mlp_only_layers.
			if i < firstDense || only[i] || (i+1)%step != 0 {
				m.DenseLayers++
			}
		}
	} else {
		for _, k := range []string{"num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "shared_expert_intermediate_size", "first_k_dense_replace", "decoder_sparse_step", "mlp_only_layers"} {
			c.used[k] = true
		}
	}

	// Sliding-window layers keep only the window in the KV cache.
	window := r.intOr("sliding_window", 0)
	switch t.sliding {
	case "all":
		if window > 0 {
			m.SlidingWindow, m.SlidingLayers = window, m.Layers
		}
	case "alternate": // Gemma2: even layers slide
		if window > 0 {
			m.SlidingWindow, m.SlidingLayers = window, (m.Layers+1)/2
		}
	case "pattern": // Gemma3: layer_types, else every sliding_window_pattern-th layer is global
		m.SlidingWindow = window
		if types := r.strs("layer_types"); types != nil {
			for i, ty := range types {
				switch ty {
				case "sliding_attention":
					m.SlidingLayers++
				case "full_attention":
				default:
					r.fail(`"layer_types"[%d] is %q, not an attention gpumem counts`, i, ty)
				}
			}
		} else {
			p := r.intOr("sliding_window_pattern", 6)
			for i := 0; window > 0 && i < m.Layers; i++ {
				if p <= 0 || (i+1)%p != 0 {
					m.SlidingLayers++
				}
			}
		}
	case "qwen": // sliding only when use_sliding_window, on the layers from max_window_layers on
		if r.boolOr("use_sliding_window", false) && window > 0 {
			m.SlidingWindow = window
			m.SlidingLayers = max(0, m.Layers-r.intOr("max_window_layers", 0))
		}
	}
	if window < 0 {
		r.fail(`"sliding_window" %d must not be negative`, window)
	}
	if m.SlidingLayers == 0 {
		m.SlidingWindow = 0
	}
	if types := c.fields["layer_types"]; types != nil && !c.used["layer_types"] {
		for i, ty := range r.strs("layer_types") {
			if ty != "full_attention" && !(ty == "sliding_attention" && m.SlidingLayers > 0) {
				r.fail(`"layer_types"[%d] is %q, not an attention gpumem counts for %s`, i, ty, c.family)
				break
			}
		}
	}

	m.Tied = r.boolOr("tie_word_embeddings", t.tied) || t.alwaysTied
	return m, r.err
}

// phiModel reads phi (Hugging Face's PhiForCausalLM) and phi-msft (the
// original remote-code config of phi-1.5 and phi-2): one LayerNorm per
// parallel block, biases everywhere, an LM head with a bias.
func phiModel(c *config, _ traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:        r.first("num_hidden_layers", "n_layer"),
		Hidden:        r.first("hidden_size", "n_embd"),
		Heads:         r.first("num_attention_heads", "n_head"),
		Vocab:         r.int("vocab_size"),
		QKVBias:       true,
		OutBias:       true,
		MLPBias:       true,
		HeadBias:      true,
		Norm:          LayerNorm,
		NormsPerLayer: 1,
		FinalNorm:     true,
		Parallel:      true,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.KVHeads = r.intOr("num_key_value_heads", r.intOr("n_head_kv", m.Heads))
	m.Intermediate = r.intOr("intermediate_size", r.intOr("n_inner", 4*m.Hidden))
	m.HeadDim = r.headDim(m.Hidden, m.Heads, "hidden_size", "num_attention_heads")
	m.QKNorm = r.boolOr("qk_layernorm", false)
	m.Tied = r.boolOr("tie_word_embeddings", false)
	m.AttnDropout = r.floatOr("attention_dropout", r.floatOr("attn_pdrop", 0)) > 0
	m.HiddenDropout = r.floatOr("resid_pdrop", 0) > 0
	return m, r.err
}

// gpt2Model reads GPT-2: learned positions, LayerNorms, biases, tied head.
func gpt2Model(c *config, _ traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:        r.int("n_layer"),
		Hidden:        r.int("n_embd"),
		Heads:         r.int("n_head"),
		Vocab:         r.int("vocab_size"),
		Positions:     r.int("n_positions"),
		QKVBias:       true,
		OutBias:       true,
		MLPBias:       true,
		Norm:          LayerNorm,
		NormsPerLayer: 2,
		FinalNorm:     true,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.KVHeads = m.Heads
	m.HeadDim = r.headDim(m.Hidden, m.Heads, "n_embd", "n_head")
	m.Intermediate = r.intOr("n_inner", 4*m.Hidden)
	m.Tied = r.boolOr("tie_word_embeddings", true)
	m.AttnDropout = r.floatOr("attn_pdrop", 0) > 0
	m.HiddenDropout = r.floatOr("resid_pdrop", 0) > 0
	return m, r.err
}

// neoxModel reads GPT-NeoX (Pythia, RedPajama-INCITE): fused qkv with
// bias, two LayerNorms per layer, untied embed_out.
func neoxModel(c *config, _ traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:        r.int("num_hidden_layers"),
		Hidden:        r.int("hidden_size"),
		Heads:         r.int("num_attention_heads"),
		Intermediate:  r.int("intermediate_size"),
		Vocab:         r.int("vocab_size"),
		MLPBias:       true,
		Norm:          LayerNorm,
		NormsPerLayer: 2,
		FinalNorm:     true,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.KVHeads = m.Heads
	m.HeadDim = r.headDim(m.Hidden, m.Heads, "hidden_size", "num_attention_heads")
	bias := r.boolOr("attention_bias", true)
	m.QKVBias, m.OutBias = bias, bias
	m.Parallel = r.boolOr("use_parallel_residual", true)
	m.Tied = r.boolOr("tie_word_embeddings", false)
	m.AttnDropout = r.floatOr("attention_dropout", 0) > 0
	m.HiddenDropout = r.floatOr("hidden_dropout", 0) > 0
	return m, r.err
}

// optModel reads OPT: learned positions with an offset of 2 rows, ReLU
// MLP, biases, tied head, optional embedding projections.
func optModel(c *config, _ traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:        r.int("num_hidden_layers"),
		Hidden:        r.int("hidden_size"),
		Heads:         r.int("num_attention_heads"),
		Intermediate:  r.int("ffn_dim"),
		Vocab:         r.int("vocab_size"),
		Positions:     r.int("max_position_embeddings") + 2, // OPTLearnedPositionalEmbedding's offset
		Norm:          LayerNorm,
		NormsPerLayer: 2,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.KVHeads = m.Heads
	m.HeadDim = r.headDim(m.Hidden, m.Heads, "hidden_size", "num_attention_heads")
	bias := r.boolOr("enable_bias", true)
	m.QKVBias, m.OutBias, m.MLPBias = bias, bias, bias
	if proj := r.intOr("word_embed_proj_dim", m.Hidden); proj != m.Hidden {
		m.EmbedDim = proj
	}
	m.FinalNorm = r.boolOr("do_layer_norm_before", true) && !r.boolOr("_remove_final_layer_norm", false)
	m.Tied = r.boolOr("tie_word_embeddings", true)
	m.AttnDropout = r.floatOr("attention_dropout", 0) > 0
	m.HiddenDropout = r.floatOr("dropout", 0) > 0
	return m, r.err
}

// falconModel reads Falcon: multi-query (7B) or grouped (40B/180B, the
// "new decoder architecture" with two norms), parallel attention, 4x MLP.
func falconModel(c *config, _ traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:    r.first("num_hidden_layers", "n_layer"),
		Hidden:    r.int("hidden_size"),
		Heads:     r.first("num_attention_heads", "n_head"),
		Vocab:     r.int("vocab_size"),
		Norm:      LayerNorm,
		FinalNorm: true,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.HeadDim = r.headDim(m.Hidden, m.Heads, "hidden_size", "num_attention_heads")
	m.Intermediate = r.intOr("ffn_hidden_size", 4*m.Hidden)
	bias := r.boolOr("bias", false)
	m.QKVBias, m.OutBias, m.MLPBias = bias, bias, bias
	m.Parallel = r.boolOr("parallel_attn", true)
	c.used["num_kv_heads"], c.used["n_head_kv"], c.used["num_ln_in_parallel_attn"] = true, true, true
	switch {
	case r.boolOr("new_decoder_architecture", false):
		m.KVHeads = r.first("num_kv_heads", "n_head_kv")
		m.NormsPerLayer = r.intOr("num_ln_in_parallel_attn", 2) // ln_attn and ln_mlp
	case r.boolOr("multi_query", true):
		m.KVHeads = 1
		m.NormsPerLayer = 1
	default:
		m.KVHeads = m.Heads
		m.NormsPerLayer = 1
	}
	if !m.Parallel {
		m.NormsPerLayer = 2
	}
	m.Tied = r.boolOr("tie_word_embeddings", true)
	m.AttnDropout = r.floatOr("attention_dropout", 0) > 0
	m.HiddenDropout = r.floatOr("hidden_dropout", 0) > 0
	return m, r.err
}

// bertModel reads BERT: learned positions and token types, an embedding
// LayerNorm, post-norm blocks with biases, and the head its
// "architectures" entry names (BertModel's pooler, BertForMaskedLM's MLM
// head, a classifier).
func bertModel(c *config, t traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Kind:          Encoder,
		Layers:        r.int("num_hidden_layers"),
		Hidden:        r.int("hidden_size"),
		Heads:         r.int("num_attention_heads"),
		Intermediate:  r.int("intermediate_size"),
		Vocab:         r.int("vocab_size"),
		Positions:     r.int("max_position_embeddings"),
		TokenTypes:    r.intOr("type_vocab_size", 2),
		EmbedNorm:     true,
		QKVBias:       true,
		OutBias:       true,
		MLPBias:       true,
		Norm:          LayerNorm,
		NormsPerLayer: 2,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.KVHeads = m.Heads
	m.HeadDim = r.headDim(m.Hidden, m.Heads, "hidden_size", "num_attention_heads")
	if p := r.str("position_embedding_type"); p != "" && p != "absolute" {
		r.fail(`"position_embedding_type" %q adds distance embeddings gpumem does not count`, p)
	}
	m.Tied = r.boolOr("tie_word_embeddings", t.tied)
	m.AttnDropout = r.floatOr("attention_probs_dropout_prob", 0) > 0
	m.HiddenDropout = r.floatOr("hidden_dropout_prob", 0) > 0
	arch := "BertModel"
	if a := r.strs("architectures"); len(a) > 0 {
		arch = a[0]
	}
	labels := 2 // PretrainedConfig's num_labels default
	if c.has("id2label") {
		var ids map[string]string
		if err := json.Unmarshal(c.fields["id2label"], &ids); err == nil && len(ids) > 0 {
			labels = len(ids)
		}
	}
	c.used["id2label"], c.used["label2id"] = true, true
	switch arch {
	case "BertModel":
		m.Pooler, m.BaseOnly = true, true
	case "BertForMaskedLM":
		m.MLMHead = true
	case "BertForPreTraining":
		m.Pooler, m.MLMHead, m.Classifier = true, true, 2 // next-sentence prediction
	case "BertForSequenceClassification", "BertForMultipleChoice":
		if arch == "BertForMultipleChoice" {
			labels = 1
		}
		m.Pooler, m.Classifier, m.BaseOnly = true, labels, true
	case "BertForTokenClassification":
		m.Classifier, m.BaseOnly = labels, true
	case "BertForQuestionAnswering":
		m.Classifier, m.BaseOnly = 2, true
	default:
		r.fail(`"architectures" %q is not a BERT head gpumem counts`, arch)
	}
	return m, r.err
}

// t5Model reads T5 and mT5 (Flan-T5 included): a shared embedding, an
// encoder and a decoder stack of pre-norm blocks without biases, relative
// attention bias in each stack's first layer, ReLU or gated-GELU MLP,
// RMS-style LayerNorms, a tied or separate LM head.
func t5Model(c *config, t traits) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Kind:          EncoderDecoder,
		Layers:        r.int("num_layers"),
		Hidden:        r.int("d_model"),
		Heads:         r.int("num_heads"),
		HeadDim:       r.int("d_kv"),
		Intermediate:  r.int("d_ff"),
		Vocab:         r.int("vocab_size"),
		Norm:          RMSNorm,
		NormsPerLayer: 2,
		FinalNorm:     true,
	}
	if r.err != nil {
		return nil, r.err
	}
	m.KVHeads = m.Heads
	m.DecoderLayers = r.intOr("num_decoder_layers", m.Layers)
	m.RelativeBuckets = r.intOr("relative_attention_num_buckets", 32)
	proj := r.str("feed_forward_proj")
	switch {
	case proj == "" || proj == "relu" || proj == "gelu" || proj == "gelu_new" || proj == "silu":
	case strings.HasPrefix(proj, "gated-"):
		m.Gated = true
	default:
		r.fail(`"feed_forward_proj" %q is not an MLP gpumem counts`, proj)
	}
	c.used["is_gated_act"] = true
	m.Tied = r.boolOr("tie_word_embeddings", t.tied)
	drop := r.floatOr("dropout_rate", 0.1) > 0
	m.AttnDropout, m.HiddenDropout = drop, drop
	arch := "T5ForConditionalGeneration"
	if a := r.strs("architectures"); len(a) > 0 {
		arch = a[0]
	}
	switch arch {
	case "T5ForConditionalGeneration", "MT5ForConditionalGeneration", "T5WithLMHeadModel":
	case "T5Model", "MT5Model":
		m.BaseOnly = true
	case "T5EncoderModel", "MT5EncoderModel":
		m.Kind, m.DecoderLayers, m.BaseOnly = Encoder, 0, true
	default:
		r.fail(`"architectures" %q is not a T5 head gpumem counts`, arch)
	}
	return m, r.err
}
