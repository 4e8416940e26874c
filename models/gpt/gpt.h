// The GPT of models/gpt/gpt_model_base.h on the CPU: the contract (units, parameters, tokens, loss,
// inference) is GptModelBase's; this header says what the CPU adds.
//
// Compute: matrix products accumulate in fp32 (oneDNN when built with it, Eigen otherwise) on
// `threads` OpenMP threads. With a bf16 compute dtype the matmul operands (LN outputs, q/k/v,
// attention probabilities, GELU output, gradients fed to matmuls) are bf16 copies made into
// preallocated buffers, everything else fp32; with fp16 the fp16 weights are converted to fp32
// and every product runs in fp32 (the CUDA model multiplies fp16 natively).
//
// Memory: every activation buffer, temporary and matmul primitive is allocated in the
// constructor (host memory, kActivations of `tracker`).
//
// Thread-safety: one thread at a time; the compute uses `threads` OpenMP threads inside each
// call.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_model_base.h"
#include "nn/threads.h"  // default_threads()
#include "unit/unit.h"

namespace zs::nn {

class GptModel : public GptModelBase {
 public:
  // Allocates every activation buffer for (batch, context) and every matmul primitive; `tracker`
  // receives the bytes under kActivations (the process tracker when null). Throws zs::Error for
  // an invalid config.
  GptModel(const GptConfig& config, MemoryTracker* tracker = nullptr);
  ~GptModel() override;

  double loss() const override;
  std::span<const float> last_logits() const override;
  int threads() const override { return threads_; }
  int64_t activation_bytes() const override;
  // gpt_activation_plan() (models/gpt/gpt_activations.h) for this config on the CPU and this
  // process's GEMM path: the sizes the constructor allocated from; total() = activation_bytes().
  ActivationPlan activation_plan() const override;

  struct State;  // shared by the units (models/gpt/gpt_state.h)

 private:
  void load_ids(const int32_t* tokens) override;
  void load_prompt(const int32_t* tokens, int length) override;

  int threads_ = 1;
  std::unique_ptr<State> state_;
};

}  // namespace zs::nn
