#include "nn/gpt_architecture.h"

#include "core/error.h"
#include "nn/kernels.h"

namespace zs::nn {

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
  ZS_CHECK(width % heads == 0, ErrorCode::kInvalidArgument,
           "gpt config: width {} must divide by heads {}", width, heads);
  // The layer norm's row buffers bound the width (the CPU's and the CUDA kernels' kMaxRow alike);
  // the vocabulary is unbounded (GPT-2's 50257).
  ZS_CHECK(width <= kMaxRow, ErrorCode::kInvalidArgument, "gpt config: width {} must be at most {}",
           width, kMaxRow);
  // Past these a model is a typo, not a model: refused before anything is allocated.
  ZS_CHECK(layers <= 100000 && ffn_mult <= 64, ErrorCode::kInvalidArgument,
           "gpt config: layers {} (at most 100000) or ffn_mult {} (at most 64) too large", layers,
           ffn_mult);
}

int64_t GptArchitecture::num_block_params() const {
  const int64_t C = width, F = static_cast<int64_t>(ffn_mult) * width;
  return 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
}

int64_t GptArchitecture::num_params() const {
  const int64_t C = width, V = vocab, T = context;
  const int64_t embed = V * C + T * C;
  const int64_t head = 2 * C + V * C;
  return embed + layers * num_block_params() + head;
}

}  // namespace zs::nn
