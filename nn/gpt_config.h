// The shape and compute settings of a GPT model (nn/gpt_model_base.h), shared by the CPU and CUDA
// models.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace zs::nn {

struct GptConfig {
  int layers = 4;
  int heads = 4;
  int width = 256;    // C; must divide by heads
  int context = 128;  // T: sequence length of training and the largest inference length
  int vocab = 256;
  int batch = 8;     // B: sequences per micro-batch
  int ffn_mult = 4;  // F = ffn_mult * width
  // Keep only each block's input in forward and recompute the block in backward. Gradients are
  // bitwise identical to the non-checkpointed model; activation memory drops.
  bool checkpoint_activations = false;
  // The dtype the engine hands parameters in (MixedPrecisionPolicy::param_dtype): fp32, bf16 or
  // fp16. Must match the engine's.
  DType compute_dtype = DType::kF32;
  // OpenMP/oneDNN/Eigen threads for this model's compute; 0 = default_threads().
  int threads = 0;

  // Throws zs::Error(kInvalidArgument) naming the first bad field.
  void validate() const;
  // Parameter elements of the model (embeddings, blocks, head), no padding.
  int64_t num_params() const;
};

}  // namespace zs::nn
