// The GPT-2 style decoder of nn/gpt.h on one CUDA device, as a zs::Model for the engine's CUDA
// path. Same GptConfig, same units ("embed", "block.i", "head"), same parameter names, shapes,
// order, initialisers and weight-decay flags as nn::GptModel (both take them from nn/gpt_specs.h),
// so checkpoints, param_hash and safetensors exports are interchangeable between CPU and GPU runs.
//
// It implements nn::GptModelBase (nn/gpt_model_base.h), so train_gpt drives either model.
//
// Contract with the engine (device pointers throughout):
//   * every ParamView.data is device memory on the model's device, in the compute dtype
//     (GptConfig::compute_dtype: fp32, bf16 or fp16; a view of another dtype is rejected);
//   * every GradViews span is a device fp32 buffer, zeroed by the engine before backward; the
//     units add (+=) their gradients into it;
//   * all work is enqueued on the `stream` given to the constructor, the stream the engine's CUDA
//     DeviceOps and the NCCL communicator are ordered on. forward() and backward() never
//     synchronize the host, with one bounded exception: load_micro_batch() reuses one of two
//     pinned staging slots and waits for the copy issued from that slot two loads earlier (it
//     blocks only when the device is two whole micro-batches behind the host);
//   * loss() and last_logits() synchronize: they wait for the copy of the last forward's values.
//
// Compute: GEMMs through cuBLASLt (nn/cuda/gemm.h) with operands in the compute dtype (bf16 and
// fp16 natively, unlike the CPU model which runs fp16 products in fp32) and fp32 accumulation;
// attention through CudaAttention; layer norm, GELU, softmax, cross-entropy, embedding, residual
// and bias-gradient kernels of nn/cuda/kernels.h. The residual stream, statistics, logits and
// every gradient are fp32, as on the CPU. Every kernel is deterministic (no float atomics), so a
// second run of the same micro-batch, and the recomputation of checkpointing, give the same bits.
//
// Memory: every device buffer (activations, temporaries, the cuBLAS workspace) is allocated once
// in the constructor from `device_alloc` (a CudaCachingAllocator of the current device; the model
// makes its own when null) under MemCategory::kActivations of `tracker`; forward/backward
// allocate nothing. Pinned host staging (token ids, the loss rows, the inference logits) is
// registered under MemCategory::kOther.
//
// Typical use (the engine's CUDA path; the same calls as GptModel):
//   CudaGptModel model(cfg, stream, &tracker, &device_ops.allocator());
//   model.set_tokens(tokens); engine.step();   // load_micro_batch(i), forward, backward
//   model.set_inference_input(prompt, n); engine.forward(); model.last_logits();
//
// Thread-safety: one thread at a time (the engine's contract for units).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "nn/gpt_config.h"
#include "nn/gpt_model_base.h"
#include "runtime/unit.h"

namespace zs::nn {

class CudaGptModel : public GptModelBase {
 public:
  // Runs on the current CUDA device (cudaGetDevice), to which `stream` must belong. Allocates
  // every device buffer for (batch, context), the cuBLAS handles and every GEMM descriptor;
  // `tracker` receives the bytes (the process tracker when null). Throws zs::Error:
  // kInvalidArgument for a bad config, kUnsupported without a device or for an allocator of another
  // device, kOutOfMemory when the buffers do not fit. config.threads is ignored.
  CudaGptModel(const GptConfig& config, cudaStream_t stream, MemoryTracker* tracker = nullptr,
               Allocator* device_alloc = nullptr);
  // Waits for the stream, then frees everything.
  ~CudaGptModel() override;
  CudaGptModel(const CudaGptModel&) = delete;
  CudaGptModel& operator=(const CudaGptModel&) = delete;

  // ---- zs::Model ----
  size_t num_units() const override;  // layers + 2
  Unit& unit(size_t i) override;
  // Selects micro-batch `index` of the tokens given to set_tokens(): its inputs, targets and the
  // embedding-gradient index go through a pinned staging slot and one cudaMemcpyAsync on the
  // stream. Throws zs::Error(kInvalidArgument) when no tokens were set or the index is out of
  // range. Leaves inference mode.
  void load_micro_batch(int index) override;
  // The mean cross-entropy (nats, unscaled) over the B*T targets of the last training or
  // validation forward, summed in double in row order as the CPU model does; NaN before any.
  // Synchronizes: waits until the last forward's per-row losses reached the host.
  double loss() const override;

  // As GptModel::set_tokens: host ids [micro_batch][sequence][context + 1], checked here, kept as
  // a non-owning view until the last load_micro_batch() of the step (each load copies its part).
  void set_tokens(std::span<const int32_t> tokens) override;
  int num_token_micro_batches() const override { return num_token_mb_; }

  // As GptModel::set_inference_input (host ids, copied to the device on the stream).
  void set_inference_input(const int32_t* tokens, int length) override;
  // The vocab logits (fp32, host memory) of the last position of the last inference forward.
  // Synchronizes: waits for their copy. Valid until the next inference forward.
  std::span<const float> last_logits() const override;

  const GptConfig& config() const override { return config_; }
  int threads() const override { return 1; }  // the host only enqueues
  // Device bytes this model allocated under kActivations (activations, temporaries, the cuBLAS
  // workspace), all registered with the tracker.
  int64_t activation_bytes() const override;
  // gpt_activation_plan() (nn/gpt_activations.h) for this config on CUDA: the sizes the
  // constructor allocated from; total() = activation_bytes(), pinned_host = the kOther bytes.
  ActivationPlan activation_plan() const override;
  cudaStream_t stream() const;
  int device() const;

  struct State;  // shared by the units (nn/cuda/gpt_cuda_state.h)

 private:
  GptConfig config_;
  int num_token_mb_ = 0;
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Unit>> units_;
};

}  // namespace zs::nn
