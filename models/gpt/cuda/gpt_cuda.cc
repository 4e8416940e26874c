// CudaGptModel: buffers, token upload, loss and logits read-back. The units are in
// gpt_cuda_units.cc; the checks and bookkeeping both devices share in models/gpt/gpt_model_base.cc.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/cuda_probe.h"
#include "device/cuda/kernels/ops_kernels.h"
#include "models/gpt/cuda/gpt_cuda_state.h"
#include "models/gpt/gpt_activations.h"
#include "nn/cuda/kernels.h"
#include "nn/kernels.h"

namespace zs::nn {

std::vector<std::unique_ptr<Unit>> make_cuda_gpt_units(CudaGptModel::State& s);  // units.cc

CudaGptModel::State::State(const GptConfig& c, cudaStream_t s, MemoryTracker* t,
                           Allocator* device_alloc)
    : GptDims(c), cfg(c), tracker(t), stream(s) {
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  if (device_alloc == nullptr) {
    own_alloc = std::make_unique<CudaCachingAllocator>(device);
    device_alloc = own_alloc.get();
  }
  ZS_CHECK(device_alloc->device() == Device::cuda(device), ErrorCode::kUnsupported,
           "cuda gpt: the allocator serves {}, the current device is cuda:{}",
           device_alloc->device().to_string(), device);
  alloc = device_alloc;

  // Every buffer from gpt_buffer_table() (models/gpt/gpt_buffers.h), which activation_plan(), the
  // planner and the CPU model read too: the model and its plan cannot drift apart. It also rejects
  // a batch x context too large for int32 ids. Device buffers under kActivations, the pinned
  // staging slots and read-backs under kOther.
  const GptBufferTable table = gpt_buffer_table(GptActivationDims::of(c), DeviceKind::kCuda);
  mm = table.mm;
  pscratch_stride = table.pscratch_stride;  // aligned slots: see the member's comment
  counts.assign(static_cast<size_t>(V) + 1, 0);
  allocate_gpt_buffers(table, *this, acts, [&](int64_t bytes, GptBufferPart part) {
    if (part != GptBufferPart::kPinnedHost) return act(bytes);
    return Buffer(static_cast<size_t>(bytes), MemCategory::kOther, tracker,
                  &pinned_host_allocator());
  });

  blas = std::make_unique<gpu::CublasContext>(*alloc, tracker,
                                              static_cast<size_t>(table.cublas_workspace));
  act_bytes += static_cast<int64_t>(blas->workspace_bytes());
  qkv_lin = gpu::CudaLinear(*blas, M, C, 3 * C, true, mm);
  proj_lin = gpu::CudaLinear(*blas, M, C, C, true, mm);
  fc_lin = gpu::CudaLinear(*blas, M, C, F, true, mm);
  fcproj_lin = gpu::CudaLinear(*blas, M, F, C, true, mm);
  head_lin = gpu::CudaLinear(*blas, M, C, V, false, mm);
  attn = gpu::CudaAttention(*blas, B, T, C, H, mm);
}

CudaGptModel::State::~State() {
  // Nothing may still run on the buffers when they go back to the (caching) allocator, which
  // hands blocks out again at once. Errors are ignored: a destructor does not throw.
  cudaStreamSynchronize(stream);
}

Buffer CudaGptModel::State::act(int64_t bytes) {
  act_bytes += bytes;
  return Buffer(static_cast<size_t>(bytes), MemCategory::kActivations, tracker, alloc);
}

gpu::AttentionWork CudaGptModel::State::attn_work() {
  gpu::AttentionWork w;
  w.s = att_s.as<float>();
  w.o = att_o.as<float>();
  w.dom = att_dom.data();
  w.dsm = att_dsm.empty() ? att_s.data() : att_dsm.data();
  w.dq = att_dq.as<float>();
  w.dk = att_dk.as<float>();
  w.dv = att_dv.as<float>();
  return w;
}

const float* CudaGptModel::State::small_f32(const ParamView& p, int slot) {
  if (p.dtype == DType::kF32) return p.as<float>();
  float* dst = pscratch.as<float>() + slot * pscratch_stride;
  cuda_check(zs::gpu::cast(p.data, p.dtype, dst, DType::kF32, p.numel, stream), "cast parameter");
  return dst;
}

const void* CudaGptModel::State::to_mm(const float* src, Buffer& dst, int64_t n) {
  if (mm == DType::kF32) return src;
  cuda_check(zs::gpu::cast(src, DType::kF32, dst.data(), mm, n, stream),
             "cast to the matmul dtype");
  return dst.data();
}

int CudaGptModel::State::acquire_staging() {
  const int slot = next_staging;
  next_staging ^= 1;
  // See [Note: token upload]: blocks only while the copy from this slot two loads ago is pending.
  cuda_check(cudaEventSynchronize(staging_done[slot].get()), "wait for the staging slot");
  return slot;
}

void CudaGptModel::State::upload_ids(int slot, int64_t count) {
  cuda_check(cudaMemcpyAsync(ids.data(), staging(slot).data(), static_cast<size_t>(count) * 4,
                             cudaMemcpyHostToDevice, stream),
             "token upload");
  cuda_check(cudaEventRecord(staging_done[slot].get(), stream), "cudaEventRecord");
}

// ---------------------------------------------------------------------------------------------

// GptArchitecture::validate() bounds the width by the CPU kernels' kMaxRow; the CUDA layer norm's
// bound must be no tighter.
static_assert(gpu::kMaxRow >= kMaxRow, "the CUDA layer norm accepts every valid width");

CudaGptModel::CudaGptModel(const GptConfig& config, cudaStream_t stream, MemoryTracker* tracker,
                           Allocator* device_alloc)
    : GptModelBase(config) {
  check_gpt_lora_device(this->config().adapters.lora.rank, DeviceKind::kCuda);  // [Note: LoRA]
  ZS_CHECK(cuda_device_count() > 0, ErrorCode::kUnsupported, "cuda gpt: no CUDA device");
  state_ = std::make_unique<State>(this->config(), stream,
                                   tracker ? tracker : &MemoryTracker::process(), device_alloc);
  set_units(make_cuda_gpt_units(*state_));
}

CudaGptModel::~CudaGptModel() = default;

cudaStream_t CudaGptModel::stream() const { return state_->stream; }

int CudaGptModel::device() const { return state_->device; }

int64_t CudaGptModel::activation_bytes() const { return state_->act_bytes; }

ActivationPlan CudaGptModel::activation_plan() const {
  return gpt_activation_plan(config(), DeviceKind::kCuda);
}

double CudaGptModel::loss() const {
  State& s = *state_;
  if (!s.have_loss) return std::numeric_limits<double>::quiet_NaN();
  cuda_check(cudaEventSynchronize(s.loss_ready.get()), "wait for the loss");
  // The CPU model's order: rows summed in double, in row order.
  const float* rl = s.row_loss_host.as<float>();
  double sum = 0.0;
  for (int64_t i = 0; i < s.M; ++i) sum += rl[i];
  return sum / static_cast<double>(s.M);
}

void CudaGptModel::load_ids(const int32_t* tokens) {
  State& s = *state_;
  const int slot = s.acquire_staging();
  int32_t* st = s.staging(slot).as<int32_t>();
  int32_t* in = st;
  split_micro_batch(tokens, s.B, s.T, in, st + s.M);
  const int rows = gpu::embedding_grad_index(in, s.M, s.V, s.counts.data(), st + 2 * s.M,
                                             st + 3 * s.M, st + 4 * s.M);
  ZS_ASSERT(rows >= 0);  // ids were checked by set_tokens()
  s.emb_rows = rows;
  s.upload_ids(slot, State::kIdsPerToken * s.M + 1);
  s.inference = false;
}

void CudaGptModel::load_prompt(const int32_t* tokens, int length) {
  State& s = *state_;
  const int slot = s.acquire_staging();
  int32_t* st = s.staging(slot).as<int32_t>();
  fill_inference_ids(tokens, length, s.M, st, st + s.M);  // [Note: inference shape]
  s.upload_ids(slot, 2 * s.M);                            // inputs and targets; no backward follows
  s.inference = true;
  s.inference_length = length;
}

std::span<const float> CudaGptModel::last_logits() const {
  State& s = *state_;
  cuda_check(cudaEventSynchronize(s.logits_ready.get()), "wait for the logits");
  return {s.logits_host.as<float>(), static_cast<size_t>(s.V)};
}

}  // namespace zs::nn
