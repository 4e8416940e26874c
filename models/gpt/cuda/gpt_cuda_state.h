// Internal to nn/cuda: the device buffers and shared layers of a CudaGptModel, used by its units
// (gpt_cuda_units.cc). The layout follows GptModel::State (models/gpt/gpt_state.h) and its
// [Note: block activations]: without checkpointing each block keeps its own CudaBlockActs; with
// checkpointing one set is shared and a block's backward first recomputes its forward into it.
// Every kernel is deterministic, so the recomputed values, and the gradients, are bitwise those of
// the non-checkpointed model.
//
// Differences from the CPU state: the fc output `f` is kept as the GELU *input* (the GPU GELU
// backward recomputes tanh, the CPU saves gelu'), the matmul dtype is the compute dtype itself
// (fp16 products run in fp16), and the residual adds go through `dnarrow` as a forward temporary.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "core/buffer.h"
#include "device/cuda/cuda_allocator.h"
#include "device/cuda/cuda_error.h"
#include "models/gpt/cuda/gpt_cuda.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/gpt_buffers.h"
#include "models/gpt/gpt_common.h"
#include "nn/cuda/attention.h"
#include "nn/cuda/gemm.h"
#include "nn/cuda/linear.h"

namespace zs::nn {

// A cudaEvent_t without timing, destroyed with its owner.
class CudaEvent {
 public:
  CudaEvent() {
    cuda_check(cudaEventCreateWithFlags(&ev_, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~CudaEvent() {
    if (ev_ != nullptr) cudaEventDestroy(ev_);
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return ev_; }

 private:
  cudaEvent_t ev_ = nullptr;
};

// Device buffers kept from a block's forward for its backward (mm = the compute dtype).
struct CudaBlockActs : GptBlockBuffers {
  gpu::AttentionActs attn() {
    return {q.data(), k.data(), v.data(), p.as<float>(), pm.empty() ? p.data() : pm.data()};
  }
};

// The allocator a State makes when given none: a base before GptModelBuffers, so that it outlives
// every Buffer of the table.
struct CudaGptOwnAllocator {
  std::unique_ptr<CudaCachingAllocator> own_alloc;
};

// The buffers (ids and their pinned staging, xs, the head, the temporaries shared by all units)
// are GptModelBuffers', allocated from gpt_buffer_table() (models/gpt/gpt_buffers.h), the table
// the CPU model and the activation plan read too.
struct CudaGptModel::State : GptDims, CudaGptOwnAllocator, GptModelBuffers {
  State(const GptConfig& c, cudaStream_t s, MemoryTracker* t, Allocator* device_alloc);
  ~State();  // waits for the stream before the buffers go back to the allocator
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  GptConfig cfg;
  MemoryTracker* tracker = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  Allocator* alloc = nullptr;
  DType mm = DType::kF32;
  int64_t act_bytes = 0;

  // ---- inputs ----
  // [Note: token upload] One device int32 array `ids` of kIdsPerToken * M + 1 ids: inputs [M],
  // targets [M], then the embedding-gradient index of the inputs (embedding_grad_index: order [M],
  // rows [M], offsets [M + 1]). The host fills one of two pinned staging slots (staging0,
  // staging1) of the same layout and copies it with one cudaMemcpyAsync on the stream;
  // staging_done[s] is recorded after the copy from slot s, and the host waits for it before
  // refilling that slot.
  // From models/gpt/gpt_activations.h, which sizes `ids` and the staging slots.
  static constexpr int64_t kIdsPerToken = kCudaGptIdsPerToken;
  Buffer& staging(int slot) { return slot == 0 ? staging0 : staging1; }
  CudaEvent staging_done[2];
  int next_staging = 0;
  std::vector<int32_t> counts;  // [V + 1] host scratch of embedding_grad_index
  int emb_rows = 0;             // distinct ids of the loaded micro-batch
  bool inference = false;
  int inference_length = 0;
  int32_t* inputs() { return ids.as<int32_t>(); }
  int32_t* targets() { return ids.as<int32_t>() + M; }
  int32_t* emb_order() { return ids.as<int32_t>() + 2 * M; }
  int32_t* emb_row_ids() { return ids.as<int32_t>() + 3 * M; }
  int32_t* emb_offsets() { return ids.as<int32_t>() + 4 * M; }

  // ---- kept activations (device) ----
  std::vector<CudaBlockActs> acts;  // L, or 1 when checkpointing

  // ---- results on the host (pinned: row_loss_host [M], logits_host [V]) ----
  CudaEvent loss_ready, logits_ready;
  bool have_loss = false;

  // ---- temporaries: dnarrow is also the forward's pre-residual GEMM output; pscratch holds 4
  // slots of pscratch_stride floats, max(F, 3C) rounded up to 64, so every slot starts 256-byte
  // aligned (slots 2 and 3 hold biases, which CudaGemm::run() requires kGemmAlignment-aligned; an
  // unpadded stride misaligns them when max(F, 3C) is not a multiple of 4).
  int64_t pscratch_stride = 0;

  // ---- shared layers (one per shape) ----
  std::unique_ptr<gpu::CublasContext> blas;
  gpu::CudaLinear qkv_lin, proj_lin, fc_lin, fcproj_lin, head_lin;
  gpu::CudaAttention attn;

  Buffer act(int64_t bytes);  // a device kActivations buffer, counted in act_bytes
  CudaBlockActs& block_acts(int l) { return acts[cfg.run.checkpoint_activations ? 0 : l]; }
  float* x(int l) { return xs.as<float>() + static_cast<int64_t>(l) * M * C; }
  gpu::AttentionWork attn_work();
  // The parameter as fp32: its data when fp32, else converted into scratch slot `slot` (0..3) on
  // the stream. Slots are reused: a converted value is valid until the next conversion into it
  // is enqueued (stream order makes the reuse safe).
  const float* small_f32(const ParamView& p, int slot);
  // src in mm: src itself when mm is fp32, else converted into dst (n elements) on the stream.
  const void* to_mm(const float* src, Buffer& dst, int64_t n);
  // The next staging slot for the host to fill, once the copy last issued from it is done.
  int acquire_staging();
  // Copies a staging slot filled by the host to `ids` on the stream (the first `count` ids).
  void upload_ids(int slot, int64_t count);
};

}  // namespace zs::nn
