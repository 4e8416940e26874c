#include "nn/gpt_config.h"

#include "core/error.h"
#include "nn/kernels.h"

namespace zs::nn {

void GptConfig::validate() const {
  auto pos = [](int v, const char* name) {
    ZS_CHECK(v > 0, ErrorCode::kInvalidArgument, "gpt config: {} must be positive, got {}", name,
             v);
  };
  pos(layers, "layers");
  pos(heads, "heads");
  pos(width, "width");
  pos(context, "context");
  pos(vocab, "vocab");
  pos(batch, "batch");
  pos(ffn_mult, "ffn_mult");
  ZS_CHECK(width % heads == 0, ErrorCode::kInvalidArgument,
           "gpt config: width {} must divide by heads {}", width, heads);
  // The layer norm's row buffers bound the width (the CPU's and the CUDA kernels' kMaxRow alike);
  // the vocabulary is unbounded (GPT-2's 50257).
  ZS_CHECK(width <= kMaxRow, ErrorCode::kInvalidArgument, "gpt config: width {} must be at most {}",
           width, kMaxRow);
  ZS_CHECK(
      compute_dtype == DType::kF32 || compute_dtype == DType::kBF16 || compute_dtype == DType::kF16,
      ErrorCode::kInvalidArgument, "gpt config: compute dtype must be fp32, bf16 or fp16, got {}",
      dtype_name(compute_dtype));
  ZS_CHECK(threads >= 0 && threads <= 1024, ErrorCode::kInvalidArgument,
           "gpt config: threads {} is outside 0..1024", threads);
  // Past these a model is a typo, not a model: refused before anything is allocated.
  ZS_CHECK(layers <= 100000 && ffn_mult <= 64, ErrorCode::kInvalidArgument,
           "gpt config: layers {} (at most 100000) or ffn_mult {} (at most 64) too large", layers,
           ffn_mult);
  const long double tokens = static_cast<long double>(batch) * context;
  ZS_CHECK(tokens <= (1 << 24), ErrorCode::kInvalidArgument,
           "gpt config: batch {} x context {} = {:.0f} tokens per micro-batch, more than the {} "
           "allowed",
           batch, context, static_cast<double>(tokens), 1 << 24);
}

int64_t GptConfig::num_params() const {
  const int64_t C = width, F = static_cast<int64_t>(ffn_mult) * width, V = vocab, T = context;
  const int64_t embed = V * C + T * C;
  const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
  const int64_t head = 2 * C + V * C;
  return embed + layers * block + head;
}

}  // namespace zs::nn
