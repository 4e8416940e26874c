// The architecture of zeroshard's decoder-only transformer (models/gpt/gpt_model_base.h): what a
// Hugging Face config.json describes and nothing of a run. One description covers the GPT-2 and
// Llama families and their relatives, chosen per component: the normalisation, the positions, the
// MLP, the biases of each projection, grouped-query attention, and any vocabulary. The defaults are
// zeroshard's byte-level GPT-2. The run's settings (models/gpt/gpt_config.h: GptRunSettings) and
// the adapters (models/gpt/gpt_adapters.h) are apart.
//
// [Note: architecture components]
//   norm       kLayerNorm: (x - mean) rstd w + b (GPT-2); kRMSNorm: x rstd w, no bias (Llama).
//              eps = norm_eps for both.
//   positions  kLearned: wpe [context, C] added to the token embedding (GPT-2); kRotary: no
//              parameters, q and k rotated per head by RoPE with rope_theta (Llama,
//              transformers' rotate_half convention), its frequencies stretched by rope_scaling
//              (none, linear or llama3: nn/rope_scaling.h; Llama-3.1/3.2).
//   mlp        kGelu: fc [F, C] -> GELU (tanh) -> fc_proj [C, F] (GPT-2); kSwiGLU: fc [2F, C]
//              holds gate_proj's rows [0, F) and up_proj's rows [F, 2F), silu(gate) * up ->
//              fc_proj [C, F] (down_proj) (Llama).
//   attention  heads query heads of head_dim (head_dim_override, else C / heads; Qwen3 sets it
//              apart: 16 heads of 128 on a width of 1024); kv_heads key/value heads (0: heads),
//              heads % kv_heads == 0 (grouped-query attention, transformers' repeat_kv). With
//              D = heads head_dim, qkv [D + 2 kv_heads head_dim, C] holds q_proj's, k_proj's and
//              v_proj's rows in order, and proj (o_proj) is [C, D].
//   qk_norm    Qwen3: q_norm.weight and k_norm.weight [head_dim] per block; each head's q and k
//              vector is RMS-normalised (eps = norm_eps) and scaled by them after the qkv
//              projection and before RoPE (modeling_qwen3.py's Qwen3Attention). Off elsewhere.
//   biases     qkv_bias (q/k/v), proj_bias (o_proj / attn.c_proj), mlp_bias (fc and fc_proj):
//              GPT-2 all on, Llama all off, Qwen2 qkv only.
//   embeddings tied_embeddings: the head's lm_head.weight is the embed unit's wte, one
//              parameter ([Note: tied parameters] in unit/unit.h; tie_word_embeddings: GPT-2's
//              checkpoints, SmolLM, Qwen2-0.5B); untied: a parameter of its own (Llama 2/3,
//              TinyLlama, and zeroshard's byte-level GPT).
#pragma once

#include <cstdint>
#include <string>

#include "nn/rope_scaling.h"

namespace zs::nn {

enum class NormKind : uint8_t { kLayerNorm, kRMSNorm };
enum class PositionKind : uint8_t { kLearned, kRotary };
enum class MlpKind : uint8_t { kGelu, kSwiGLU };

struct GptArchitecture {
  int layers = 4;     // L: blocks (n_layer, num_hidden_layers)
  int heads = 4;      // H (n_head, num_attention_heads)
  int width = 256;    // C (n_embd, hidden_size); must divide by heads unless head_dim is set
  int context = 128;  // T: sequence length of training and the largest inference length
  int vocab = 256;    // V (vocab_size)
  int ffn_mult = 4;   // F = ffn_mult * width when ffn is 0
  int ffn = 0;        // F in elements (n_inner, intermediate_size); 0: ffn_mult * width
  int kv_heads = 0;   // key/value heads (num_key_value_heads); 0: heads
  int head_dim_override = 0;  // per-head width (config.json head_dim); 0: width / heads
  bool qk_norm = false;       // per-head q/k RMSNorm before RoPE (Qwen3)
  NormKind norm = NormKind::kLayerNorm;
  float norm_eps = 1e-5f;  // layer_norm_epsilon, rms_norm_eps
  PositionKind positions = PositionKind::kLearned;
  float rope_theta = 10000.0f;  // kRotary only
  RopeScaling rope_scaling;     // kRotary only; none by default
  MlpKind mlp = MlpKind::kGelu;
  bool qkv_bias = true;
  bool proj_bias = true;
  bool mlp_bias = true;
  bool tied_embeddings = false;

  // F in elements.
  int ffn_width() const { return ffn > 0 ? ffn : ffn_mult * width; }
  int kv_heads_or_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int head_dim() const { return head_dim_override > 0 ? head_dim_override : width / heads; }
  // D = heads head_dim: the width of the attention's q and output (C unless head_dim is set).
  int64_t attn_width() const { return static_cast<int64_t>(heads) * head_dim(); }
  // Rows of the fused qkv weight: D + 2 kv_heads head_dim (3C without grouped-query attention).
  int64_t qkv_rows() const;
  // Rows of the fc weight: F (GELU) or 2F (SwiGLU: gate and up).
  int64_t fc_rows() const;
  bool has_norm_bias() const { return norm == NormKind::kLayerNorm; }
  // "gpt-2" when every component is GPT-2's, "llama" when every one is Llama's, "qwen3" for
  // Llama's with qk_norm, else "custom" (head_dim does not change the family).
  std::string family() const;
  // Throws zs::Error(kInvalidArgument) "gpt config: ..." naming the first bad field.
  void validate() const;
  // Parameter elements of the base model (embeddings, blocks, head), no adapters, no padding.
  int64_t num_params() const;
  // Parameter elements of one base block (norms, qkv, q/k norms, proj, fc, fc_proj with their
  // biases).
  int64_t num_block_params() const;

  bool operator==(const GptArchitecture&) const = default;
};

const char* norm_kind_name(NormKind k);          // "layernorm", "rmsnorm"
const char* position_kind_name(PositionKind k);  // "learned", "rotary"
const char* mlp_kind_name(MlpKind k);            // "gelu", "swiglu"

}  // namespace zs::nn
