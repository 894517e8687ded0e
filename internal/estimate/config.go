package estimate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// config is a Hugging Face config.json read field by field, so that a
// missing or mistyped field can be named in the error.
type config struct {
	fields map[string]json.RawMessage
	family string
}

// families maps each model_type gpumem counts to the function that reads it.
var families = map[string]func(c *config) (*Model, error){
	"llama":      llamaLike,
	"mistral":    llamaLike,
	"mixtral":    llamaLike,
	"qwen2":      llamaLike,
	"gemma":      llamaLike,
	"gemma2":     llamaLike,
	"phi3":       llamaLike,
	"phi":        phiModel,
	"phi-msft":   phiModel,
	"gpt2":       gpt2Model,
	"gpt_neox":   neoxModel,
	"opt":        optModel,
	"falcon":     falconModel,
	"RefinedWeb": falconModel,
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
// the field that is missing or wrong.
func ParseConfig(data []byte) (*Model, error) {
	c := &config{}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c.fields); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if err := c.str("model_type", &c.family); err != nil {
		return nil, err
	}
	if c.family == "" {
		return nil, fmt.Errorf(`no "model_type" field (which model family is this?)`)
	}
	read, ok := families[c.family]
	if !ok {
		return nil, fmt.Errorf(`"model_type" %q is not a family gpumem counts (known: %s)`, c.family, strings.Join(Families(), ", "))
	}
	m, err := read(c)
	if err != nil {
		return nil, err
	}
	m.Family = c.family
	if err := m.validate(); err != nil {
		return nil, fmt.Errorf("%s config: %v", c.family, err)
	}
	return m, nil
}

func (c *config) has(key string) bool {
	raw, ok := c.fields[key]
	return ok && string(raw) != "null"
}

// int reads a required integer field.
func (c *config) int(key string) (int, error) {
	raw, ok := c.fields[key]
	if !ok || string(raw) == "null" {
		return 0, fmt.Errorf("%s config has no %q field", c.family, key)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != float64(int(f)) {
		return 0, fmt.Errorf("%s config: %q is %s, want an integer", c.family, key, raw)
	}
	return int(f), nil
}

// intOr reads an optional integer field, def when absent or null.
func (c *config) intOr(key string, def int) (int, error) {
	if !c.has(key) {
		return def, nil
	}
	return c.int(key)
}

// first reads the first of several names a family has used for one field.
func (c *config) first(keys ...string) (int, error) {
	for _, k := range keys {
		if c.has(k) {
			return c.int(k)
		}
	}
	return 0, fmt.Errorf("%s config has no %q field", c.family, keys[0])
}

func (c *config) boolOr(key string, def bool) (bool, error) {
	if !c.has(key) {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(c.fields[key], &b); err != nil {
		return false, fmt.Errorf("%s config: %q is %s, want true or false", c.family, key, c.fields[key])
	}
	return b, nil
}

func (c *config) str(key string, dst *string) error {
	if !c.has(key) {
		return nil
	}
	if err := json.Unmarshal(c.fields[key], dst); err != nil {
		return fmt.Errorf("%q is %s, want a string", key, c.fields[key])
	}
	return nil
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

func (r *reader) keep(err error) {
	if r.err == nil {
		r.err = err
	}
}

// llamaLike reads the RoPE + RMSNorm + gated-MLP families: llama, mistral,
// mixtral, qwen2, gemma, gemma2, phi3. They differ in biases, tying
// defaults, norms per layer and MoE.
func llamaLike(c *config) (*Model, error) {
	r := &reader{c: c}
	m := &Model{
		Layers:        r.int("num_hidden_layers"),
		Hidden:        r.int("hidden_size"),
		Heads:         r.int("num_attention_heads"),
		Intermediate:  r.int("intermediate_size"),
		Vocab:         r.int("vocab_size"),
		Gated:         true,
		Norm:          RMSNorm,
		NormsPerLayer: 2,
		FinalNorm:     true,
	}
	m.KVHeads = r.intOr("num_key_value_heads", m.Heads)
	if r.err != nil {
		return nil, r.err
	}
	if m.Heads > 0 {
		m.HeadDim = r.intOr("head_dim", perHead(m.Hidden, m.Heads))
	}
	tiedDefault := false
	switch c.family {
	case "llama":
		bias := r.boolOr("attention_bias", false)
		m.QKVBias, m.OutBias = bias, bias
		m.MLPBias = r.boolOr("mlp_bias", false)
	case "qwen2":
		m.QKVBias = true // Qwen2Attention: q, k, v with bias, o without
	case "gemma":
		tiedDefault = true
	case "gemma2":
		tiedDefault = true
		m.NormsPerLayer = 4 // input, post-attention, pre- and post-feedforward
	case "mixtral":
		m.Experts = r.int("num_local_experts")
		m.ExpertsPerTok = r.int("num_experts_per_tok")
	}
	m.Tied = r.boolOr("tie_word_embeddings", tiedDefault)
	if c.family == "gemma" || c.family == "gemma2" {
		m.Tied = true // GemmaForCausalLM always shares the embedding
	}
	return m, r.err
}

// phiModel reads phi (Hugging Face's PhiForCausalLM) and phi-msft (the
// original remote-code config of phi-1.5 and phi-2): one LayerNorm per
// parallel block, biases everywhere, an LM head with a bias.
func phiModel(c *config) (*Model, error) {
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
	m.HeadDim = perHead(m.Hidden, m.Heads)
	m.QKNorm = r.boolOr("qk_layernorm", false)
	m.Tied = r.boolOr("tie_word_embeddings", false)
	return m, r.err
}

// gpt2Model reads GPT-2: learned positions, LayerNorms, biases, tied head.
func gpt2Model(c *config) (*Model, error) {
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
	m.HeadDim = perHead(m.Hidden, m.Heads)
	m.Intermediate = r.intOr("n_inner", 4*m.Hidden)
	m.Tied = r.boolOr("tie_word_embeddings", true)
	return m, r.err
}

// neoxModel reads GPT-NeoX (Pythia, RedPajama-INCITE): fused qkv with
// bias, two LayerNorms per layer, untied embed_out.
func neoxModel(c *config) (*Model, error) {
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
	m.KVHeads, m.HeadDim = m.Heads, perHead(m.Hidden, m.Heads)
	bias := r.boolOr("attention_bias", true)
	m.QKVBias, m.OutBias = bias, bias
	m.Parallel = r.boolOr("use_parallel_residual", true)
	m.Tied = r.boolOr("tie_word_embeddings", false)
	return m, r.err
}

// optModel reads OPT: learned positions with an offset of 2 rows, ReLU
// MLP, biases, tied head, optional embedding projections.
func optModel(c *config) (*Model, error) {
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
	m.KVHeads, m.HeadDim = m.Heads, perHead(m.Hidden, m.Heads)
	bias := r.boolOr("enable_bias", true)
	m.QKVBias, m.OutBias, m.MLPBias = bias, bias, bias
	if proj := r.intOr("word_embed_proj_dim", m.Hidden); proj != m.Hidden {
		m.EmbedDim = proj
	}
	m.FinalNorm = r.boolOr("do_layer_norm_before", true) && !r.boolOr("_remove_final_layer_norm", false)
	m.Tied = r.boolOr("tie_word_embeddings", true)
	return m, r.err
}

// falconModel reads Falcon: multi-query (7B) or grouped (40B/180B, the
// "new decoder architecture" with two norms), parallel attention, 4x MLP.
func falconModel(c *config) (*Model, error) {
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
	m.HeadDim = perHead(m.Hidden, m.Heads)
	m.Intermediate = r.intOr("ffn_hidden_size", 4*m.Hidden)
	bias := r.boolOr("bias", false)
	m.QKVBias, m.OutBias, m.MLPBias = bias, bias, bias
	m.Parallel = r.boolOr("parallel_attn", true)
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
	return m, r.err
}

// perHead is hidden / heads, 0 for a config with no heads (validate then
// names the field).
func perHead(hidden, heads int) int {
	if heads <= 0 {
		return 0
	}
	return hidden / heads
}
