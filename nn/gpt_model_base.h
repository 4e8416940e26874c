// What a trainer needs from a GPT model beyond zs::Model, whatever device it computes on:
// nn::GptModel (CPU) and nn::CudaGptModel (CUDA) implement it, so train_gpt drives either.
// The methods' contracts are documented on nn::GptModel (nn/gpt.h).
#pragma once

#include <cstdint>
#include <span>

#include "nn/gpt_config.h"
#include "runtime/unit.h"

namespace zs::nn {

class GptModelBase : public Model {
 public:
  // The token ids of one step, [micro_batch][sequence][context + 1]; a non-owning view the caller
  // keeps alive and unchanged until the step (or validation forward) is done.
  virtual void set_tokens(std::span<const int32_t> tokens) = 0;
  virtual int num_token_micro_batches() const = 0;
  // The next forward runs one sequence of `length` ids (copied) for generation.
  virtual void set_inference_input(const int32_t* tokens, int length) = 0;
  // Host fp32 logits of the last position of the last inference forward.
  virtual std::span<const float> last_logits() const = 0;
  virtual const GptConfig& config() const = 0;
  // Host threads the model's compute uses (1 for a device model).
  virtual int threads() const = 0;
  // Bytes of activation buffers the model allocated.
  virtual int64_t activation_bytes() const = 0;
  int64_t num_params() const { return config().num_params(); }
};

}  // namespace zs::nn
