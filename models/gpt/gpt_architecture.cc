#include "models/gpt/gpt_architecture.h"

#include <cmath>

#include "core/error.h"
#include "nn/kernels.h"

namespace zs::nn {

const char* norm_kind_name(NormKind k) { return k == NormKind::kRMSNorm ? "rmsnorm" : "layernorm"; }
const char* position_kind_name(PositionKind k) {
  return k == PositionKind::kRotary ? "rotary" : "learned";
}
const char* mlp_kind_name(MlpKind k) { return k == MlpKind::kSwiGLU ? "swiglu" : "gelu"; }

int64_t GptArchitecture::qkv_rows() const {
  return attn_width() + 2 * static_cast<int64_t>(kv_heads_or_heads()) * head_dim();
}

int64_t GptArchitecture::fc_rows() const {
  return (mlp == MlpKind::kSwiGLU ? 2 : 1) * static_cast<int64_t>(ffn_width());
}

std::string GptArchitecture::family() const {
  const bool gpt2 = norm == NormKind::kLayerNorm && positions == PositionKind::kLearned &&
                    mlp == MlpKind::kGelu && qkv_bias && proj_bias && mlp_bias &&
                    kv_heads_or_heads() == heads && attn_width() == width && !qk_norm;
  const bool llama_parts = norm == NormKind::kRMSNorm && positions == PositionKind::kRotary &&
                           mlp == MlpKind::kSwiGLU && !qkv_bias && !proj_bias && !mlp_bias;
  if (gpt2) return "gpt-2";
  if (llama_parts) return qk_norm ? "qwen3" : "llama";
  return "custom";
}

void GptArchitecture::validate() const {
  auto pos = [](int v, const char* name) {
    ZS_CHECK(v > 0, ErrorCode::kInvalidArgument, "gpt config: {} must be positive, got {}", name,
             v);
  };
  pos(layers, "layers");
  pos(heads, "heads");
  pos(width, "width");
  pos(context, "context");
  pos(vocab, "vocab");
  pos(ffn_mult, "ffn_mult");
  ZS_CHECK(head_dim_override >= 0 && head_dim_override <= kMaxRow, ErrorCode::kInvalidArgument,
           "gpt config: head_dim {} is outside 0..{} (0 = width / heads)", head_dim_override,
           kMaxRow);
  ZS_CHECK(head_dim_override > 0 || width % heads == 0, ErrorCode::kInvalidArgument,
           "gpt config: width {} must divide by heads {} (or set head_dim)", width, heads);
  // The attention's width D = heads x head_dim is a row of q, of the attention output and of
  // proj's input: bounded as the width is.
  ZS_CHECK(attn_width() <= 64 * static_cast<int64_t>(kMaxRow), ErrorCode::kInvalidArgument,
           "gpt config: heads {} x head_dim {} = {} is above {}", heads, head_dim(), attn_width(),
           64 * kMaxRow);
  // The layer norm's row buffers bound the width (the CPU's and the CUDA kernels' kMaxRow alike);
  // the vocabulary is unbounded (GPT-2's 50257).
  ZS_CHECK(width <= kMaxRow, ErrorCode::kInvalidArgument, "gpt config: width {} must be at most {}",
           width, kMaxRow);
  // Past these a model is a typo, not a model: refused before anything is allocated.
  ZS_CHECK(layers <= 100000 && ffn_mult <= 64, ErrorCode::kInvalidArgument,
           "gpt config: layers {} (at most 100000) or ffn_mult {} (at most 64) too large", layers,
           ffn_mult);
  ZS_CHECK(ffn >= 0 && ffn <= 64 * width, ErrorCode::kInvalidArgument,
           "gpt config: ffn {} is outside 0..64 x width ({}; 0 = ffn_mult x width)", ffn,
           64 * width);
  ZS_CHECK(kv_heads >= 0 && kv_heads <= heads && heads % kv_heads_or_heads() == 0,
           ErrorCode::kInvalidArgument,
           "gpt config: kv_heads {} must divide heads {} (0 = heads: no grouped-query attention)",
           kv_heads, heads);
  ZS_CHECK(std::isfinite(norm_eps) && norm_eps > 0.0f && norm_eps < 1.0f,
           ErrorCode::kInvalidArgument, "gpt config: norm_eps {} is outside (0, 1)", norm_eps);
  if (positions == PositionKind::kRotary) {
    ZS_CHECK(std::isfinite(rope_theta) && rope_theta > 1.0f, ErrorCode::kInvalidArgument,
             "gpt config: rope_theta {} must be finite and above 1", rope_theta);
    ZS_CHECK(head_dim() % 2 == 0, ErrorCode::kInvalidArgument,
             "gpt config: rotary positions need an even head dim, got {} (width {}, heads {}, "
             "head_dim {})",
             head_dim(), width, heads, head_dim_override);
    try {
      rope_scaling.validate();
    } catch (const Error& e) {
      fail(ErrorCode::kInvalidArgument, "gpt config: {}", e.what());
    }
  } else {
    ZS_CHECK(!rope_scaling.enabled(), ErrorCode::kInvalidArgument,
             "gpt config: rope scaling {} applies to rotary positions, not learned ones",
             rope_scaling_text(rope_scaling));
  }
}

int64_t GptArchitecture::num_block_params() const {
  const int64_t C = width, F = ffn_width();
  const int64_t norms = (has_norm_bias() ? 2 : 1) * C;
  const int64_t D = attn_width();
  const int64_t attn = qkv_rows() * C + (qkv_bias ? qkv_rows() : 0) + C * D + (proj_bias ? C : 0) +
                       (qk_norm ? 2 * head_dim() : 0);
  const int64_t mlp_params = fc_rows() * C + C * F + (mlp_bias ? fc_rows() + C : 0);
  return 2 * norms + attn + mlp_params;
}

int64_t GptArchitecture::num_params() const {
  const int64_t C = width, V = vocab, T = context;
  const int64_t embed = V * C + (positions == PositionKind::kLearned ? T * C : 0);
  const int64_t head = (has_norm_bias() ? 2 : 1) * C + (tied_embeddings ? 0 : V * C);
  return embed + layers * num_block_params() + head;
}

}  // namespace zs::nn
