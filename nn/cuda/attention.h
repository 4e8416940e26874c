// Causal multi-head self-attention core on the GPU, the device twin of nn/attention.h:
//   q, k, v = split(qkv) per head; S = Q K^T / sqrt(hd); P = causal_softmax(S); O = P V;
//   out = merge heads(O).
// A simple correct version (no flash attention): the four products are strided-batched cuBLASLt
// GEMMs over B*H heads (bf16/fp16/fp32 inputs, fp32 accumulation and fp32 S/O), the masked softmax
// is nn/cuda/softmax.cu. Memory is O(B H T^2) for S and P, as on the CPU.
// Thread-safety: one thread at a time per object (its GEMMs share the context's workspace).
#pragma once

#include <cuda_runtime_api.h>

#include "nn/cuda/gemm.h"

namespace zs::nn::gpu {

// Kept from forward for backward; device pointers, shapes as nn::AttentionActs.
struct AttentionActs {
  void* q = nullptr;   // [B, H, T, hd] in mm
  void* k = nullptr;   // [B, H, T, hd] in mm
  void* v = nullptr;   // [B, H, T, hd] in mm
  float* p = nullptr;  // [B, H, T, T] softmax probabilities, fp32
  void* pm = nullptr;  // [B, H, T, T] P in mm (may equal p when mm is fp32)
};

// Temporaries, shared by all blocks; device pointers, shapes as nn::AttentionWork.
struct AttentionWork {
  float* s = nullptr;   // [B, H, T, T] scores in forward, dP / dS in backward
  float* o = nullptr;   // [B, H, T, hd] forward output before merging heads
  void* dom = nullptr;  // [B, H, T, hd] dO in mm
  void* dsm = nullptr;  // [B, H, T, T] dS in mm (may equal s when mm is fp32)
  float* dq = nullptr;  // [B, H, T, hd]
  float* dk = nullptr;  // [B, H, T, hd]
  float* dv = nullptr;  // [B, H, T, hd]
};

class CudaAttention {
 public:
  CudaAttention() = default;
  // mm: fp32, bf16 or fp16. Throws zs::Error(kInvalidArgument) when C % H != 0.
  CudaAttention(CublasContext& ctx, int B, int T, int C, int H, DType mm);

  // qkv [B*T, 3C] fp32 -> out [B*T, C] in mm. Enqueued on `stream`, no synchronization.
  void forward(const float* qkv, const AttentionActs& acts, const AttentionWork& work, void* out,
               cudaStream_t stream);
  // dout [B*T, C] fp32 -> dqkv [B*T, 3C] fp32 (overwrites).
  void backward(const float* dout, const AttentionActs& acts, const AttentionWork& work,
                float* dqkv, cudaStream_t stream);

 private:
  int B_ = 0, T_ = 0, C_ = 0, H_ = 0, hd_ = 0;
  DType mm_ = DType::kF32;
  CudaGemm qk_, pv_, dp_, dv_, dq_, dk_;
};

}  // namespace zs::nn::gpu
