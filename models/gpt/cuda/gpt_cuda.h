// The GPT of models/gpt/gpt_model_base.h on one CUDA device: the contract (units, parameters,
// tokens, loss, inference) is GptModelBase's; this header says what the device changes.
//
// Contract with the engine (device pointers throughout):
//   * every ParamView.data is device memory on the model's device, in the compute dtype
//     (GptConfig::run.compute_dtype: fp32, bf16 or fp16; a view of another dtype is rejected);
//   * every GradViews span is a device fp32 buffer, zeroed by the engine before backward; the
//     units add (+=) their gradients into it;
//   * all work is enqueued on the `stream` given to the constructor, the stream the engine's CUDA
//     DeviceOps and the NCCL communicator are ordered on. forward() and backward() never
//     synchronize the host, with one bounded exception: load_micro_batch() and
//     set_inference_input() reuse one of two pinned staging slots and wait for the copy issued
//     from that slot two loads earlier (they block only when the device is two whole
//     micro-batches behind the host);
//   * loss() and last_logits() synchronize: they wait for the copy of the last forward's values;
//   * the tokens given to set_tokens() must stay alive until the step's last load_micro_batch()
//     (each load copies its part).
//
// Compute: GEMMs through cuBLASLt (nn/cuda/gemm.h) with operands in the compute dtype (bf16 and
// fp16 natively, unlike the CPU model which runs fp16 products in fp32) and fp32 accumulation;
// attention through CudaAttention; layer norm, GELU, softmax, cross-entropy, embedding, residual
// and bias-gradient kernels of nn/cuda/kernels.h. Every kernel is deterministic (no float
// atomics), so a second run of the same micro-batch, and the recomputation of checkpointing, give
// the same bits.
//
// Memory: every device buffer (activations, temporaries, the cuBLAS workspace) is allocated once
// in the constructor from `device_alloc` (a CudaCachingAllocator of the current device; the model
// makes its own when null) under MemCategory::kActivations of `tracker`. Pinned host staging
// (token ids, the loss rows, the inference logits) is registered under MemCategory::kOther.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/buffer.h"
#include "core/memory_tracker.h"
#include "models/gpt/gpt_config.h"
#include "models/gpt/gpt_model_base.h"
#include "unit/unit.h"

namespace zs::nn {

class CudaGptModel : public GptModelBase {
 public:
  // Runs on the current CUDA device (cudaGetDevice), to which `stream` must belong. Allocates
  // every device buffer for (batch, context), the cuBLAS handles and every GEMM descriptor;
  // `tracker` receives the bytes (the process tracker when null). Throws zs::Error:
  // kInvalidArgument for a bad config, kUnsupported for LoRA adapters (config.adapters.lora.rank >
  // 0: CPU only, check_gpt_lora_device), without a device or for an allocator of another device,
  // kOutOfMemory when the buffers do not fit. config.run.threads is ignored.
  CudaGptModel(const GptConfig& config, cudaStream_t stream, MemoryTracker* tracker = nullptr,
               Allocator* device_alloc = nullptr);
  // Waits for the stream, then frees everything.
  ~CudaGptModel() override;

  // Synchronizes: waits until the last forward's per-row losses reached the host.
  double loss() const override;
  // Synchronizes: waits for the logits' copy to the host.
  std::span<const float> last_logits() const override;
  int threads() const override { return 1; }  // the host only enqueues
  // Device bytes under kActivations (activations, temporaries, the cuBLAS workspace).
  int64_t activation_bytes() const override;
  // gpt_activation_plan() (models/gpt/gpt_activations.h) for this config on CUDA: the sizes the
  // constructor allocated from; total() = activation_bytes(), pinned_host = the kOther bytes.
  ActivationPlan activation_plan() const override;
  cudaStream_t stream() const;
  int device() const;

  struct State;  // shared by the units (models/gpt/cuda/gpt_cuda_state.h)

 private:
  // Each fills a pinned staging slot and copies it to the device with one cudaMemcpyAsync;
  // load_ids() also builds the embedding-gradient index ([Note: token upload]).
  void load_ids(const int32_t* tokens) override;
  void load_prompt(const int32_t* tokens, int length) override;

  std::unique_ptr<State> state_;
};

}  // namespace zs::nn
