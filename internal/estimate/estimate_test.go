package estimate

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadConfig(t *testing.T, name string) *Model {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "configs", name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseConfig(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

// TestPublishedSizes checks the counts from real config.json files against
// published sizes (testdata/README.md cites each file and figure): KerasHub's
// preset tables, which print the full count of each checkpoint, where they
// have the model or one of the same shapes, else a full count published
// elsewhere. exact: the figure is the full count of the same module
// structure; otherwise it must be within 0.5%.
func TestPublishedSizes(t *testing.T) {
	for _, tc := range []struct {
		file      string
		published float64
		exact     bool
	}{
		{"llama-2-7b.json", 6_738_415_616, true},         // KerasHub llama2_7b_en
		{"llama-2-70b.json", 68_976_648_192, true},       // public tables (README)
		{"llama-3.2-1b.json", 1_235_814_400, true},       // public tables (README)
		{"mistral-7b-v0.1.json", 7_241_732_096, true},    // KerasHub mistral_7b_en
		{"mixtral-8x7b-v0.1.json", 46_702_792_704, true}, // KerasHub mixtral_8_7b_en
		{"qwen2-1.5b.json", 1_543_714_304, true},         // KerasHub qwen2.5_math_1.5b_en, same shapes
		{"qwen2-7b.json", 7_615_616_512, true},           // KerasHub qwen2.5_math_7b_en, same shapes
		{"gemma-2b.json", 2_506_172_416, true},           // KerasHub gemma_2b_en
		{"gemma-2-2b.json", 2_614_341_888, true},         // KerasHub gemma2_2b_en
		{"gemma-2-9b.json", 9_241_705_984, true},         // KerasHub gemma2_9b_en
		{"gemma-2-27b.json", 27_227_128_320, true},       // KerasHub gemma2_27b_en
		{"phi-3.5-mini.json", 3_821_079_552, true},       // KerasHub phi3_mini_4k_instruct_en, same shapes
		{"phi-2.json", 2_779_683_840, true},              // the Hub's safetensors total (README)
		{"gpt2.json", 124_439_808, true},                 // KerasHub gpt2_base_en
		{"gpt2-medium.json", 354_823_168, true},          // KerasHub gpt2_medium_en
		// KerasHub's opt_125m_en port has 2048 position rows, Hugging Face's
		// OPTLearnedPositionalEmbedding 2050 (an offset of 2): 1,536 fewer.
		{"opt-125m.json", 125_237_760, false},
		{"redpajama-incite-3b.json", 2_775_864_320, true}, // public tables (README); the card says 2.8B
		// Issue 33's families, by their standard fields.
		{"llama-3.1-8b.json", 8_030_261_248, true},           // KerasHub llama3.1_8b
		{"mistral-7b-v0.3.json", 7_248_023_552, true},        // KerasHub mistral_0.3_7b_en
		{"qwen2-0.5b.json", 494_032_768, true},               // KerasHub qwen2.5_0.5b_en, same shapes
		{"qwen2.5-3b.json", 3_085_938_688, true},             // KerasHub qwen2.5_3b_en
		{"qwen2.5-32b.json", 32_763_876_352, true},           // KerasHub qwen2.5_instruct_32b_en
		{"qwen3-0.6b.json", 596_049_920, true},               // KerasHub qwen3_0.6b_en: q/k norms, head_dim 128, tied
		{"qwen3-1.7b.json", 1_720_574_976, true},             // KerasHub qwen3_1.7b_en
		{"qwen3-4b.json", 4_022_468_096, true},               // KerasHub qwen3_4b_en
		{"qwen3-8b.json", 8_190_735_360, true},               // KerasHub qwen3_8b_en
		{"qwen3-14b.json", 14_768_307_200, true},             // KerasHub qwen3_14b_en
		{"qwen3-32b.json", 32_762_123_264, true},             // KerasHub qwen3_32b_en
		{"qwen3-30b-a3b.json", 30_532_122_624, true},         // KerasHub qwen3_moe_30b_a3b_en: 128 experts of 768
		{"qwen1.5-moe-a2.7b.json", 14_315_784_192, true},     // KerasHub qwen1.5_moe_2.7b_en: 60 experts + gated shared expert
		{"deepseek-v2-lite.json", 15_706_484_224, true},      // the Hub's safetensors total [T]: MLA, 64+2 experts, 1 dense layer
		{"gemma-3-1b-it.json", 999_885_952, true},            // KerasHub gemma3_1b: q/k norms, 4 norms per block
		{"bert-base-uncased.json", 109_482_240, true},        // KerasHub bert_base_en_uncased: BertModel with its pooler
		{"snowflake-arctic-embed-m.json", 109_482_240, true}, // the same BertModel shapes (KerasHub bge_base_en)
		{"t5-small.json", 60_506_624, true},                  // KerasHub t5_small_multi: tied head, ReLU MLP
		{"flan-t5-large.json", 783_150_080, true},            // KerasHub flan_large_multi: gated-GELU, untied head
		{"t5-3b.json", 2_851_598_336, true},                  // DeepSpeed's docs: "Model with 2851M total params" (T5Model)
	} {
		got := loadConfig(t, tc.file).Params().Total()
		if tc.exact {
			if float64(got) != tc.published {
				t.Errorf("%s: %d parameters, published %.0f", tc.file, got, tc.published)
			}
			continue
		}
		if d := math.Abs(float64(got)-tc.published) / tc.published; d > 0.005 {
			t.Errorf("%s: %d parameters, %.2f%% from the published %.3g", tc.file, got, d*100, tc.published)
		}
	}
}

// TestFamilyStructure pins the parts where families differ: tying, GQA/MQA,
// biases, norms per layer, MoE.
func TestFamilyStructure(t *testing.T) {
	for _, tc := range []struct {
		file                   string
		tied                   bool
		kv, norms, experts     int
		qkvBias, outBias, gate bool
	}{
		{"llama-2-70b.json", false, 8, 2, 0, false, false, true},
		{"llama-3.2-1b.json", true, 8, 2, 0, false, false, true},
		{"mixtral-8x7b-v0.1.json", false, 8, 2, 8, false, false, true},
		{"qwen2-1.5b.json", true, 2, 2, 0, true, false, true},
		{"gemma-2b.json", true, 1, 2, 0, false, false, true},
		{"gemma-2-2b.json", true, 4, 4, 0, false, false, true},
		{"phi-2.json", false, 32, 1, 0, true, true, false},
		{"gpt2.json", true, 12, 2, 0, true, true, false},
		{"falcon-40b-instruct.json", true, 8, 2, 0, false, false, false},
		{"opt-125m.json", true, 12, 2, 0, true, true, false},
	} {
		m := loadConfig(t, tc.file)
		if m.Tied != tc.tied || m.KVHeads != tc.kv || m.NormsPerLayer != tc.norms || m.Experts != tc.experts ||
			m.QKVBias != tc.qkvBias || m.OutBias != tc.outBias || m.Gated != tc.gate {
			t.Errorf("%s: got %+v", tc.file, *m)
		}
	}
	// Falcon-40B by its modules: per layer ln_attn and ln_mlp (weight+bias),
	// fused qkv 8192 x (128+2*8)*64, dense 8192², 4x MLP; tied head.
	layer := int64(4*8192 + 8192*(128+16)*64 + 8192*8192 + 2*8192*4*8192)
	want := 60*layer + 65024*8192 + 2*8192
	if got := loadConfig(t, "falcon-40b-instruct.json").Params().Total(); got != want {
		t.Errorf("falcon-40b: %d, want %d", got, want)
	}
	// OPT-350m's shapes: 512-wide embeddings with project_in/out to 1024,
	// post-norm blocks and so no final norm, 2048 + 2 positions, tied head.
	m, err := ParseConfig([]byte(`{"model_type": "opt", "hidden_size": 1024, "ffn_dim": 4096, "num_hidden_layers": 24,
		"num_attention_heads": 16, "vocab_size": 50272, "max_position_embeddings": 2048, "word_embed_proj_dim": 512,
		"do_layer_norm_before": false}`))
	if err != nil {
		t.Fatal(err)
	}
	layer = 4*(1024*1024+1024) + 2*2*1024 + (1024*4096 + 4096) + (4096*1024 + 1024)
	want = 50272*512 + 2050*1024 + 2*512*1024 + 24*layer
	if got := m.Params().Total(); got != want {
		t.Errorf("opt-350m shapes: %d, want %d", got, want)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"model_type": "roberta", "hidden_size": 768}`, `"model_type" "roberta" is not a family`},
		{`{"model_type": "gemma3", "text_config": {}}`, `it has a "text_config"`},
		{`{"model_type": "llama", "hidden_size": 100, "num_hidden_layers": 2, "num_attention_heads": 3, "intermediate_size": 128, "vocab_size": 100}`,
			`"hidden_size" 100 is not a multiple of "num_attention_heads" 3, and there is no "head_dim"`},
		{`{"model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "linear_num_key_heads": 2}`,
			`field "linear_num_key_heads" describes structure gpumem does not count`},
		{`{"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "sliding_window": 8, "layer_types": ["linear_attention", "full_attention"]}`,
			`"layer_types"[0] is "linear_attention"`},
		{`{"model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_layer_freq": 2}`,
			`"moe_layer_freq" 2`},
		{`{"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 16, "position_embedding_type": "relative_key"}`,
			`"position_embedding_type" "relative_key"`},
		{`{"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 16, "architectures": ["BertLMHeadModel"]}`,
			`"architectures" "BertLMHeadModel" is not a BERT head`},
		{`{"model_type": "t5", "d_model": 64, "num_layers": 2, "num_heads": 4, "d_kv": 16, "d_ff": 128, "vocab_size": 100, "feed_forward_proj": "swish-ish"}`,
			`"feed_forward_proj" "swish-ish"`},
		{`{"hidden_size": 768}`, `no "model_type" field`},
		{`{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000}`, `llama config has no "intermediate_size" field`},
		{`{"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}`, `mixtral config: has no "num_local_experts" field`},
		{`{"model_type": "gpt2", "n_embd": "768", "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}`, `"n_embd" is "768", want an integer`},
		{`{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 128, "vocab_size": 100}`, `multiple of kv-heads`},
		{`{"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "ffn_dim": 128, "vocab_size": 100, "tie_word_embeddings": "yes", "max_position_embeddings": 16}`, `"tie_word_embeddings" is "yes", want true or false`},
		{`[1, 2]`, `not a JSON object`},
	} {
		_, err := ParseConfig([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.json, err, tc.want)
		}
	}
}

// tiny is a two-layer GQA model small enough to work every term out by
// hand (the comments in TestTermsExactBytes).
func tiny() *Model {
	return &Model{Family: "arch", Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, HeadDim: 16, Intermediate: 128,
		Vocab: 1000, Gated: true, Norm: RMSNorm, NormsPerLayer: 2, FinalNorm: true}
}

func tinyOptions() Options {
	return Options{Model: tiny(), Dtype: "bf16", Optimizer: "adamw", Batch: 2, Seq: 8, GPUs: 1,
		CUDAContext: DefaultCUDAContext, CacheOverhead: 0.10}
}

func mustEstimate(t *testing.T, o Options) *Result {
	t.Helper()
	r, err := Estimate(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTermsExactBytes pins every formula on the tiny model. Parameters:
// embedding 1000×64 = 64,000; per layer q 64×64 + k,v 2×64×32 + o 64×64 =
// 12,288, MLP 3×64×128 = 24,576, norms 2×64 → 36,992; two layers 73,984;
// final norm 64; untied head 64,000: N = 202,048.
func TestTermsExactBytes(t *testing.T) {
	if n := tiny().Params().Total(); n != 202_048 {
		t.Fatalf("tiny has %d parameters, want 202,048", n)
	}
	type terms map[string]int64
	for _, tc := range []struct {
		name   string
		change func(o *Options)
		want   terms
		peak   int64
	}{
		// bf16 AdamW: P = 2 B. Activations per layer and token: norms 2×2×64
		// = 256, attention q 4×16 + k,v 2×2×16 + o-input 64 = 192, MLP 4×128
		// = 512 → 960 × 16 tokens × 2 B = 30,720, softmax 4 heads × 8² × 2
		// sequences × 2 B = 1,024; two layers 63,488; head 16 × (2×64 +
		// 2×1000) × 2 B = 68,096 → 131,584.
		{"bf16 adamw", nil, terms{
			TermParameters: 404_096, TermGradients: 404_096, TermOptimizerState: 808_192,
			TermOptimizerIntermediates: 404_096, TermActivations: 131_584, TermCUDAContext: 536_870_912,
			TermAllocatorOverhead: 202_048,
		}, 404_096 + 808_192 + 404_096 + 404_096},
		// Flash attention: no softmax; the kernel's output 64 more per token
		// (+2,048 B per layer) and its fp32 log-sum-exp 4 heads × 8 × 2 × 4 B
		// = 256 per layer: 2 × (30,720 + 2,048 + 256) + 68,096 = 134,144.
		{"flash", func(o *Options) { o.FlashAttention = true }, terms{TermActivations: 134_144}, 0},
		// Checkpointing: 2 layer inputs 16 × 64 × 2 B = 4,096 + one layer
		// 31,744 + head 68,096.
		{"checkpointing", func(o *Options) { o.GradCheckpointing = true }, terms{TermActivations: 103_936}, 0},
		// Mixed precision over ZeRO-2 on 4 GPUs: bf16 weights whole, bf16
		// gradients / 4, fp32 state 2×4 + master 4 = 12 B × N / 4,
		// intermediates (sqrt 4 B + fp32 gradient copy 4 B) × N / 4.
		{"mixed zero-2", func(o *Options) { o.MixedPrecision, o.ZeRO, o.GPUs = true, 2, 4 }, terms{
			TermParameters: 404_096, TermGradients: 101_024, TermOptimizerState: 606_144,
			TermOptimizerIntermediates: 404_096,
		}, 0},
		// ZeRO-3: weights / 4 plus the largest module (the 64,000-element
		// embedding) and the next prefetched, 2 × 64,000 × 2 B.
		{"zero-3", func(o *Options) { o.ZeRO, o.GPUs = 3, 4 }, terms{
			TermParameters: 101_024 + 256_000, TermGradients: 101_024, TermOptimizerState: 202_048,
			TermOptimizerIntermediates: 101_024,
		}, 0},
		// FSDP: weights / 4 plus the largest unit (the 64,000-row embedding
		// beats a 36,992-parameter block) and the next block prefetched.
		{"fsdp", func(o *Options) { o.FSDP, o.GPUs = true, 4 }, terms{
			TermParameters: 101_024 + (64_000+36_992)*2,
		}, 0},
		// ZeRO-2 with the optimizer offloaded: the GPU keeps the bf16
		// weights; gradients, state and the step go to the host.
		{"zero-2 offload", func(o *Options) { o.ZeRO, o.GPUs, o.Offload = 2, 4, "optimizer" }, terms{
			TermParameters: 404_096, TermGradients: 0, TermOptimizerState: 0, TermOptimizerIntermediates: 0,
		}, 0},
		// amp-bf16 under FSDP: autocast casts the gathered units, freed with
		// them: (64,000 + 36,992) × 2 B, not every Linear weight.
		{"fsdp amp", func(o *Options) { o.FSDP, o.GPUs, o.Precision = true, 4, "amp-bf16" }, terms{TermAutocastCache: 201_984}, 0},
		// Fused AdamW updates in place.
		{"fused", func(o *Options) { o.OptimizerImpl = "fused" }, terms{TermOptimizerIntermediates: 0}, 0},
		// amp-bf16: fp32 weights, gradients and state; bf16 activations;
		// autocast's cache of 16-bit Linear weights: 2 × 36,864 block
		// matrices + the 64,000 head = 137,728 × 2 B.
		{"amp-bf16", func(o *Options) { o.Precision = "amp-bf16" }, terms{
			TermParameters: 808_192, TermGradients: 808_192, TermOptimizerState: 1_616_384,
			TermActivations: 131_584, TermAutocastCache: 275_456,
		}, 0},
		// fp32 logits in the loss at bf16: the head keeps 16 × (2×64 + 1000)
		// × 2 B + 16 × 2 × 1000 × 4 B = 164,096 instead of 68,096.
		{"fp32 logits", func(o *Options) { o.LogitsFP32 = true }, terms{TermActivations: 131_584 - 68_096 + 164_096}, 0},
		// LoRA rank 4 on every block projection: 4 × (rows + cols) summed
		// = 8,192 adapters; only they have gradients and state.
		{"lora", func(o *Options) { o.LoRARank = 4 }, terms{
			TermParameters: 420_480, TermGradients: 16_384, TermOptimizerState: 32_768,
			TermOptimizerIntermediates: 16_384,
		}, 0},
		// Adafactor on LoRA adapters: per adapted weight A (4 × cols) and B
		// (rows × 4), Σ(rows + cols + 8) = 4,176 − 2,128 (embedding and
		// head) + 8 × 14 weights = 2,160 × 2 B.
		{"adafactor lora", func(o *Options) { o.Optimizer, o.LoRARank = "adafactor", 4 }, terms{TermOptimizerState: 4_320}, 0},
		{"sgd", func(o *Options) { o.Optimizer = "sgd" }, terms{TermOptimizerState: 0, TermOptimizerIntermediates: 0}, 0},
		{"sgd-momentum", func(o *Options) { o.Optimizer = "sgd-momentum" }, terms{TermOptimizerState: 404_096}, 0},
		// Adafactor: Σ(rows + cols) = 4,176 over the matrices + 320 norm
		// weights = 4,496 × 2 B; the loop's 2 temporaries of the 64,000-element
		// embedding × 2 B.
		{"adafactor", func(o *Options) { o.Optimizer = "adafactor" }, terms{
			TermOptimizerState: 8_992, TermOptimizerIntermediates: 256_000,
		}, 0},
		// 8-bit AdamW: 2 × 1 B per parameter + 2 × ceil(N/256) = 1,580 blocks × 4 B.
		{"adamw-8bit", func(o *Options) { o.Optimizer = "adamw-8bit" }, terms{
			TermOptimizerState: 2*202_048 + 4*1_580, TermOptimizerIntermediates: 0,
		}, 0},
		// Per-parameter loop: 2 temporaries of the largest tensor.
		{"adamw loop", func(o *Options) { o.OptimizerLoop = true }, terms{TermOptimizerIntermediates: 256_000}, 0},
		// fp32: everything doubles, activations included.
		{"fp32", func(o *Options) { o.Dtype = "fp32" }, terms{TermParameters: 808_192, TermActivations: 263_168}, 0},
		// Inference: weights; KV 2 × 2 layers × 2 heads × 16 × 16 tokens ×
		// 2 B = 4,096; forward: residual 2×64×16×2 = 4,096 + max(attention
		// (192 × 16 × 2 = 6,144) + scores and probabilities 2 × 2 × 4 × 64 × 2
		// = 2,048, MLP 3 × 128 × 16 × 2 = 12,288) + logits 1000 × 16 × 2 =
		// 32,000.
		{"inference", func(o *Options) { o.Inference = true }, terms{
			TermParameters: 404_096, TermKVCache: 4_096, TermActivations: 48_384, TermGradients: 0,
		}, 456_576},
	} {
		o := tinyOptions()
		if tc.change != nil {
			tc.change(&o)
		}
		r := mustEstimate(t, o)
		for k, want := range tc.want {
			if got := r.Term(k); got != want {
				t.Errorf("%s: %s = %d, want %d", tc.name, k, got, want)
			}
		}
		if tc.peak != 0 && r.PeakBytes != tc.peak {
			t.Errorf("%s: peak %d, want %d", tc.name, r.PeakBytes, tc.peak)
		}
		if want := r.PeakBytes + r.Term(TermAllocatorOverhead) + r.Term(TermCUDAContext); r.TotalBytes != want {
			t.Errorf("%s: total %d, want peak + overhead + context = %d", tc.name, r.TotalBytes, want)
		}
	}
}

// TestPhases pins the three phases and the blog peak on the tiny model.
func TestPhases(t *testing.T) {
	r := mustEstimate(t, tinyOptions())
	M, O, G, I, A := int64(404_096), int64(808_192), int64(404_096), int64(404_096), int64(131_584)
	logitsGrad := int64(1000 * 16 * 2)
	want := map[string]int64{"forward": M + O + A, "backward": M + O + max(A, G) + logitsGrad, "optimizer step": M + O + G + I}
	for _, p := range r.Phases {
		if p.Bytes != want[p.Name] {
			t.Errorf("%s: %d, want %d", p.Name, p.Bytes, want[p.Name])
		}
	}
	if blog := M + O + max(G+I, A); r.BlogPeak != blog {
		t.Errorf("blog peak %d, want %d", r.BlogPeak, blog)
	}
	// The first step has no optimizer state before its optimizer step;
	// kept gradients are live through the forward and the backward.
	o := tinyOptions()
	o.FirstStep, o.KeepGrads = true, true
	r = mustEstimate(t, o)
	want = map[string]int64{"forward": M + G + A, "backward": M + max(A+G, G) + logitsGrad, "optimizer step": M + O + G + I}
	for _, p := range r.Phases {
		if p.Bytes != want[p.Name] {
			t.Errorf("first step, kept gradients: %s: %d, want %d", p.Name, p.Bytes, want[p.Name])
		}
	}
	if r.PeakBytes != M+O+G+I {
		t.Errorf("first step peak %d, want the optimizer step's %d", r.PeakBytes, M+O+G+I)
	}
}

// TestBlogWorkedFigures reproduces the Hugging Face blog's Qwen2.5-1.5B
// numbers (../shared/seeds/hf-blog-visualize-and-understand-gpu-memory.md).
func TestBlogWorkedFigures(t *testing.T) {
	m := loadConfig(t, "qwen2-1.5b.json") // Qwen2-1.5B: the same shapes as Qwen2.5-1.5B
	N := m.Params().Total()
	// "1.5 billion parameters": the model card's 1.54B.
	if N != 1_543_714_304 {
		t.Fatalf("Qwen 1.5B: %d parameters", N)
	}
	// The blog's forward hook sums 5,065,216 "activations per input token"
	// in fp32: it is bytes, 1,266,304 elements.
	elems, err := m.HookOutputsPerToken()
	if err != nil {
		t.Fatal(err)
	}
	if elems*4 != 5_065_216 {
		t.Errorf("hook outputs: %d elements = %d fp32 bytes, the blog printed 5,065,216", elems, elems*4)
	}
	// "Model Memory = 1.5e9 × 4 bytes = 6 GB", optimizer state 2 × N × P,
	// gradients and intermediates N × P, with the blog's N.
	r := mustEstimate(t, Options{Params: 1_500_000_000, Dtype: "fp32", Optimizer: "adamw", Batch: 16, Seq: 256,
		GPUs: 1, CacheOverhead: 0})
	for k, want := range map[string]int64{TermParameters: 6e9, TermOptimizerState: 12e9, TermGradients: 6e9, TermOptimizerIntermediates: 6e9} {
		if got := r.Term(k); got != want {
			t.Errorf("blog %s: %d, want %d", k, got, want)
		}
	}
	// The heuristic, read as 16-bit bytes per token (README: the blog's
	// "×10^4" must be ×10^-4 for N in parameters), lands 1.6% above the
	// hook's figure in 16-bit bytes; neither other reading comes close.
	a := blogActivationsPerToken(N)
	if d := a/float64(2*elems) - 1; d < 0 || d > 0.02 {
		t.Errorf("heuristic %.0f vs hook %d 16-bit bytes: %+.2f%%", a, 2*elems, d*100)
	}
	if billions := 4.6894e4*float64(N)/1e9 + 1.8494e6; math.Abs(billions/float64(2*elems)-1) < 0.2 || math.Abs(billions/float64(elems)-1) < 0.2 {
		t.Errorf("N in billions gives %.0f, unexpectedly close to the hook's figure", billions)
	}
	// The batch of the worked example: A/2 × B 16 × L 256 × 4 B.
	if want := int64(math.Round(blogActivationsPerToken(1_500_000_000) / 2 * 16 * 256 * 4)); r.Heuristic == nil || r.Heuristic.Bytes != want {
		t.Errorf("heuristic term %+v, want %d bytes", r.Heuristic, want)
	}
	// The blog's peak at batch 16: model + state + max(grads + intermediates, activations).
	if want := int64(6e9+12e9) + max(int64(12e9), r.Term(TermActivations)); r.BlogPeak != want {
		t.Errorf("blog peak %d, want %d", r.BlogPeak, want)
	}
}

// TestMaxBatchMatchesSearch compares MaxBatch with trying every batch.
func TestMaxBatchMatchesSearch(t *testing.T) {
	const h100, a100, rtx = 81559 << 20, 40960 << 20, 24 << 30
	for _, tc := range []struct {
		file string
		gpu  int64
		opt  func(o *Options)
	}{
		{"llama-2-7b.json", h100, func(o *Options) { o.ZeRO, o.GPUs, o.MixedPrecision, o.FlashAttention = 3, 8, true, true }},
		{"qwen2-1.5b.json", a100, func(o *Options) { o.GradCheckpointing = true }},
		{"gpt2.json", rtx, func(o *Options) { o.Dtype = "fp32" }},
		{"mistral-7b-v0.1.json", h100, func(o *Options) { o.Inference = true }},
		{"llama-2-70b.json", h100, nil},
	} {
		o := Options{Model: loadConfig(t, tc.file), Dtype: "bf16", Optimizer: "adamw", Batch: 1, Seq: 1024, GPUs: 1,
			CUDAContext: DefaultCUDAContext, CacheOverhead: DefaultCacheOverhead}
		if tc.opt != nil {
			tc.opt(&o)
		}
		got, err := MaxBatch(o, tc.gpu)
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for b := 1; b <= 4096; b++ {
			o.Batch = b
			if !mustEstimate(t, o).Fits(tc.gpu) {
				break
			}
			want = b
		}
		if got != want {
			t.Errorf("%s on %d bytes: MaxBatch %d, search %d", tc.file, tc.gpu, got, want)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		change func(o *Options)
		want   string
	}{
		{func(o *Options) { o.Dtype = "fp8" }, `dtype "fp8"`},
		{func(o *Options) { o.Dtype, o.MixedPrecision = "fp32", true }, "--mixed-precision needs"},
		{func(o *Options) { o.Optimizer = "lion" }, `optimizer "lion"`},
		{func(o *Options) { o.Model, o.Params, o.Inference = nil, 7e9, true }, "--inference needs the architecture"},
		{func(o *Options) { o.Model, o.Params, o.Optimizer = nil, 7e9, "adafactor" }, "adafactor's state"},
		{func(o *Options) { o.ZeRO = 4 }, "zero stage 4"},
		{func(o *Options) { o.Batch = 0 }, "batch and seq must be positive"},
		// Issue 33: every ineffective or contradictory combination says why.
		{func(o *Options) { o.Inference, o.ZeRO, o.GPUs = true, 3, 8 }, "--inference with --zero 3"},
		{func(o *Options) { o.Inference, o.LoRARank = true, 8 }, "--inference with --lora-rank"},
		{func(o *Options) { o.Inference, o.Offload = true, "optimizer" }, "--inference with --offload"},
		{func(o *Options) { o.Inference, o.GradCheckpointing = true, true }, "--inference with --grad-checkpointing"},
		{func(o *Options) { o.FSDP = true }, "--fsdp over 1 GPU shards nothing"},
		{func(o *Options) { o.FSDP, o.ZeRO, o.GPUs = true, 1, 8 }, "--fsdp is full sharding"},
		{func(o *Options) { o.ZeRO = 2 }, "--zero 2 over 1 GPU shards nothing"},
		{func(o *Options) { o.Offload = "optimizer" }, "--offload optimizer is DeepSpeed's ZeRO-Offload"},
		{func(o *Options) { o.Offload, o.ZeRO, o.GPUs = "params", 2, 8 }, "--offload params moves the weights"},
		{func(o *Options) { o.LoRARank = 100_000 }, "--lora-rank 100000 is above the width"},
		{func(o *Options) { o.Weights = "nf4" }, "--weights nf4 freezes the base"},
		{func(o *Options) { o.Weights, o.LoRARank, o.ZeRO, o.GPUs = "nf4", 4, 3, 8 }, "not partitioned by ZeRO-3"},
		{func(o *Options) { o.DoubleQuant = true }, "double quantization applies to 4-bit"},
		{func(o *Options) { o.Precision, o.MixedPrecision = "amp-bf16", true }, "--precision replaces --mixed-precision"},
		{func(o *Options) { o.Precision = "tf32" }, `precision "tf32"`},
		{func(o *Options) { o.Weights = "int3" }, `weights "int3"`},
		{func(o *Options) { o.Optimizer, o.OptimizerImpl = "adamw-8bit", "fused" }, "--optimizer-impl applies to torch.optim"},
		{func(o *Options) { o.OptimizerLoop, o.OptimizerImpl = true, "fused" }, "--optimizer-loop contradicts"},
		{func(o *Options) { o.LoRATargets = "attention" }, "--lora-targets needs --lora-rank"},
		{func(o *Options) { o.Offload, o.ZeRO, o.GPUs, o.OptimizerImpl = "optimizer", 2, 8, "fused" }, "the step runs in DeepSpeed's CPU Adam"},
	} {
		o := tinyOptions()
		tc.change(&o)
		if _, err := Estimate(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "configs", "*.json"))
	for _, p := range files {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"model_type": "deepseek_v2", "hidden_size": 8, "num_hidden_layers": 3, "num_attention_heads": 2, "intermediate_size": 8, "vocab_size": 9, "n_routed_experts": 4, "num_experts_per_tok": 2, "kv_lora_rank": 4, "qk_nope_head_dim": 2, "qk_rope_head_dim": 2, "v_head_dim": 2, "first_k_dense_replace": 1}`))
	f.Add([]byte(`{"model_type": "t5", "d_model": 8, "num_layers": 2, "num_heads": 2, "d_kv": 4, "d_ff": 16, "vocab_size": 9}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseConfig(data)
		if err != nil {
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if err := m.validate(); err != nil {
			t.Errorf("accepted a config that does not validate: %v", err)
		}
		if m.Params().Total() <= 0 {
			t.Errorf("non-positive count for %+v", *m)
		}
		// Every estimate of an accepted config runs without panicking.
		for _, o := range []Options{
			{Model: m, Dtype: "bf16", Optimizer: "adamw", Batch: 1, Seq: 16, GPUs: 1},
			{Model: m, Dtype: "bf16", Inference: true, Batch: 1, Seq: 16, GPUs: 1},
			{Model: m, Dtype: "bf16", Optimizer: "adafactor", FSDP: true, GPUs: 2, Batch: 1, Seq: 16, LoRARank: 1, Weights: "bf16"},
		} {
			_, _ = Estimate(o)
		}
	})
}

// TestCompareReasons checks the check's arithmetic and the reason chosen
// for each kind of gap, on the tiny model at batch 16 with a per-parameter
// optimizer (so that the estimate's peak is the backward).
func TestCompareReasons(t *testing.T) {
	o := tinyOptions()
	o.Batch, o.OptimizerLoop = 16, true
	r := mustEstimate(t, o)
	M, G, O, A := r.Term(TermParameters), r.Term(TermGradients), r.Term(TermOptimizerState), r.Term(TermActivations)
	// The run kept its gradients through the forward, and each of its 2
	// layers saved 60 more score tensors of 16 × 4 heads × 8² × 2 B = 8 KiB.
	gap := int64(2 * 60 * 8192)
	peak := M + O + G + A + gap
	m := Measured{Source: "x", Peak: peak, PeakReserved: peak * 11 / 10,
		Parameters: M, Gradients: G, OptimizerState: O, Activations: A + gap, Categories: "test",
		AtPeak: []Amount{{"parameter", M}, {"optimizer_state", O}, {"gradient", G}, {"activation", A + gap}}}
	c := Compare(r, m)
	want := map[string]string{
		"parameters":       "matches",
		"gradients":        "matches",
		"optimizer state":  "matches: adamw state",
		"activations":      "480.0KiB more per layer, 60.0× the B×H×L² score tensor (8.0KiB)",
		"peak (allocated)": "--keep-grads models that",
		"peak reserved":    "kept 10.0% above its allocated peak",
	}
	for _, row := range c.Rows {
		if w, ok := want[row.Name]; !ok || !strings.Contains(row.Reason, w) {
			t.Errorf("%s: reason %q, want %q", row.Name, row.Reason, w)
		}
		delete(want, row.Name)
	}
	if len(want) > 0 {
		t.Errorf("rows missing: %v", want)
	}
	if d := c.Rows[3].Diff(); math.Abs(d-float64(-gap)/float64(A+gap)) > 1e-12 {
		t.Errorf("activations diff %v", d)
	}
	// With --keep-grads the gradients are in the estimate's peak, and the
	// activation gap is what is left.
	o.KeepGrads = true
	c = Compare(mustEstimate(t, o), m)
	if row := c.Rows[4]; !strings.Contains(row.Reason, "at the measured peak activation is") {
		t.Errorf("keep-grads peak reason %q", row.Reason)
	}
	// A first step measured at its optimizer step, estimated in steady
	// state: the estimate's backward holds the state the run had not made.
	o.KeepGrads = false
	r2 := mustEstimate(t, o)
	first := Measured{Peak: M + O + G + 256_000, Parameters: M, Gradients: G, OptimizerState: O, Activations: A, Categories: "test",
		AtPeak: []Amount{{"parameter", M}, {"optimizer_state", O}, {"gradient", G}, {"temporary", 256_000}}}
	if row := Compare(r2, first).Rows[4]; !strings.Contains(row.Reason, "--first-step models that") {
		t.Errorf("first-step reason %q", row.Reason)
	}
	// A snapshot of something else (512 bytes of parameters against the
	// model's): no percentage, the reason says the snapshot is unrelated.
	other := m
	other.Parameters, other.Activations = 512, 20*A
	c = Compare(r, other)
	var text strings.Builder
	if err := c.Write(&text); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 3} {
		row := c.Rows[i]
		if !math.IsNaN(row.Diff()) || !strings.Contains(row.Reason, "does not look like this model's run") {
			t.Errorf("%s measured %d against %d: diff %v, reason %q", row.Name, row.Measured, row.Estimated, row.Diff(), row.Reason)
		}
		if j := c.ToJSON().Rows[i]; j.Diff != nil {
			t.Errorf("%s: json diff %v for an unrelated snapshot", row.Name, *j.Diff)
		}
	}
	if strings.Contains(text.String(), "00.0%") || strings.Count(text.String(), " n/a ") != 2 {
		t.Errorf("unrelated snapshot: want n/a, not a percentage, in the parameters and activations rows:\n%s", text.String())
	}
	// Nothing measured: the reason says so instead of a difference.
	c = Compare(r, Measured{Parameters: -1, Gradients: 0, OptimizerState: -1, Activations: -1, Categories: "no stacks"})
	if !strings.Contains(c.Rows[0].Reason, "not measured: no stacks") || !strings.Contains(c.Rows[1].Reason, "none in the snapshot") {
		t.Errorf("unmeasured reasons: %q, %q", c.Rows[0].Reason, c.Rows[1].Reason)
	}
}

// TestParseConfigBounded: a hostile config is refused by size before it
// is decoded, and huge numbers are refused by field.
func TestParseConfigBounded(t *testing.T) {
	big := make([]byte, MaxConfigBytes+1)
	if _, err := ParseConfig(big); err == nil || !strings.Contains(err.Error(), "larger than any config.json") {
		t.Errorf("oversized config: %v", err)
	}
	for _, tc := range []struct{ json, want string }{
		{`{"model_type": "llama", "hidden_size": 1e300, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100}`, `"hidden_size" is 1e300, want an integer`},
		{`{"model_type": "llama", "hidden_size": 65536, "num_hidden_layers": 100000, "num_attention_heads": 4, "intermediate_size": 1000000, "vocab_size": 100}`, "too large"},
		{`{"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 1000000000, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100, "num_experts": 2, "num_experts_per_tok": 1}`, "too large"},
		{`null`, "not a JSON object"},
	} {
		if _, err := ParseConfig([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.json, err, tc.want)
		}
	}
}
