// GptModelBase: the checks and bookkeeping both devices share (models/gpt/gpt_model_base.h).
#include "models/gpt/gpt_model_base.h"

#include <utility>

#include "core/error.h"

namespace zs::nn {

GptModelBase::GptModelBase(const GptConfig& config) : config_(config) { config_.validate(); }

GptModelBase::~GptModelBase() = default;

void GptModelBase::set_units(std::vector<std::unique_ptr<Unit>> units) {
  ZS_ASSERT(units_.empty() && units.size() == static_cast<size_t>(config_.arch.layers) + 2);
  units_ = std::move(units);
}

size_t GptModelBase::num_units() const { return units_.size(); }

Unit& GptModelBase::unit(size_t i) {
  ZS_CHECK(i < units_.size(), ErrorCode::kInvalidArgument, "gpt: unit {} of {}", i, units_.size());
  return *units_[i];
}

void GptModelBase::set_tokens(std::span<const int32_t> tokens) {
  const int64_t per_mb = static_cast<int64_t>(config_.run.batch) * (config_.arch.context + 1);
  ZS_CHECK(!tokens.empty() && static_cast<int64_t>(tokens.size()) % per_mb == 0,
           ErrorCode::kInvalidArgument,
           "gpt: {} tokens is not a whole number of micro-batches of {} x {}", tokens.size(),
           config_.run.batch, config_.arch.context + 1);
  for (size_t i = 0; i < tokens.size(); ++i)
    ZS_CHECK(tokens[i] >= 0 && tokens[i] < config_.arch.vocab, ErrorCode::kInvalidArgument,
             "gpt: token {} at index {} outside [0, {})", tokens[i], i, config_.arch.vocab);
  tokens_ = tokens;
  num_token_mb_ = static_cast<int>(static_cast<int64_t>(tokens.size()) / per_mb);
}

void GptModelBase::load_micro_batch(int index) {
  ZS_CHECK(index >= 0 && index < num_token_mb_, ErrorCode::kInvalidArgument,
           "gpt: micro-batch {} requested, {} set by set_tokens()", index, num_token_mb_);
  const int64_t per_mb = static_cast<int64_t>(config_.run.batch) * (config_.arch.context + 1);
  load_ids(tokens_.data() + index * per_mb);
}

void GptModelBase::set_inference_input(const int32_t* tokens, int length) {
  ZS_CHECK(length >= 1 && length <= config_.arch.context, ErrorCode::kInvalidArgument,
           "gpt: inference length {} outside [1, {}]", length, config_.arch.context);
  for (int i = 0; i < length; ++i)
    ZS_CHECK(tokens[i] >= 0 && tokens[i] < config_.arch.vocab, ErrorCode::kInvalidArgument,
             "gpt: token {} at index {} outside [0, {})", tokens[i], i, config_.arch.vocab);
  load_prompt(tokens, length);
}

}  // namespace zs::nn
