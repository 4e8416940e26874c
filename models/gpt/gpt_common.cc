#include "models/gpt/gpt_common.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "models/gpt/gpt_specs.h"

namespace zs::nn {

GptDims::GptDims(const GptConfig& c)
    : B(c.run.batch),
      T(c.arch.context),
      C(c.arch.width),
      H(c.arch.heads),
      F(c.arch.ffn_width()),
      KV(c.arch.kv_heads_or_heads()),
      hd(c.arch.head_dim()),
      D(static_cast<int>(c.arch.attn_width())),
      Q(static_cast<int>(c.arch.qkv_rows())),
      G(static_cast<int>(c.arch.fc_rows())),
      V(c.arch.vocab),
      L(c.arch.layers),
      M(static_cast<int64_t>(c.run.batch) * c.arch.context) {}

GptUnit::GptUnit(const GptConfig& c, size_t index)
    : config_(c), index_(index), num_params_(gpt_unit_specs(c, index).size()) {}

std::string GptUnit::name() const { return gpt_unit_name(config_, index_); }

std::vector<ParamSpec> GptUnit::param_specs() const { return gpt_unit_specs(config_, index_); }

void GptUnit::check_params(std::span<const ParamView> params) const {
  ZS_CHECK(params.size() == num_params_, ErrorCode::kInvalidArgument,
           "{}: {} parameters given, {} expected", name(), params.size(), num_params_);
}

void GptUnit::check_backward(bool inference) const {
  ZS_CHECK(!inference, ErrorCode::kInvalidArgument, "gpt {}: backward after an inference forward",
           name());
}

void split_micro_batch(const int32_t* tokens, int batch, int context, int32_t* inputs,
                       int32_t* targets) {
  const int T = context;
  for (int b = 0; b < batch; ++b) {
    const int32_t* row = tokens + static_cast<int64_t>(b) * (T + 1);
    std::memcpy(inputs + static_cast<int64_t>(b) * T, row, sizeof(int32_t) * T);
    std::memcpy(targets + static_cast<int64_t>(b) * T, row + 1, sizeof(int32_t) * T);
  }
}

void fill_inference_ids(const int32_t* prompt, int length, int64_t M, int32_t* inputs,
                        int32_t* targets) {
  std::fill(inputs, inputs + M, 0);
  std::memcpy(inputs, prompt, sizeof(int32_t) * length);
  std::fill(targets, targets + M, 0);
}

}  // namespace zs::nn
