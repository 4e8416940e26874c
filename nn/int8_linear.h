// A linear layer whose weight is int8, row-quantized (LLM.int8()'s vector-wise weights, the
// record of [Note: frozen records] in sharding/frozen_layout.h): W [out, in] as q [out, in] int8
// and one fp32 absmax scale per output row, W[n, k] ~ q[n, k] * sw[n].
//
// [Note: int8 linear] Forward y[M, out] = x[M, in] W^T (+ b) (+= y when residual), x in the
// matmul dtype mm (fp32 or bf16), y fp32, on one of two paths fixed at construction:
//   int8 GEMM   (LLM.int8(): vector-wise quantization of both operands)
//     1. outlier columns (threshold t > 0): O = the columns k of x with max_m |x[m, k]| > t, at
//        most max_outliers of them (when more exceed t, those with the largest maxima); they are
//        left out of the quantization (taken as 0);
//     2. each row of x is quantized to int8: sx[m] = absmax_k |x[m, k]| / 127 over the kept
//        columns, qx = round_half_even(x * (127 / absmax)) (clamped to +-127; a zero row gets
//        sx = 0 and qx = 0; a row holding inf or NaN gets sx = NaN, so y's row is NaN);
//     3. acc = qx qw^T in int32 (oneDNN s8 x s8 -> s32 matmul, exact);
//     4. y[m, n] = (float(acc) * sx[m]) * sw[n] (+ b[n]) (+ y[m, n] when residual), in fp32;
//     5. y[m, n] += sum_{k in O} x[m, k] * (q[n, k] * sw[n]), in fp32 (the outlier columns against
//        the dequantized weight columns, in O's ascending order).
//   dequantize  W is dequantized into the workspace in mm (each q * sw rounded once, as the
//     engine's conversion would) and nn::Linear's products run on it: the same bits as a Linear
//     given the engine-dequantized weight.
// Backward-data dx[M, in] = dy[M, out] W (overwrites; dy in mm) on the same two paths:
//   int8 GEMM   dy's columns scaled by W's row scales, d[m, n] = dy[m, n] * sw[n] (fp32), each row
//     quantized as in step 2 (sd[m]), acc = qd q (s8 x s8 -> s32), dx = float(acc) * sd[m];
//   dequantize  dx = dy Wdeq on the dequantized weight (nn::Linear::backward_data).
// Int8Backward picks the backward path independently (the GPT's choice is in
// docs/finetune.md, measured).
//
// Error of the int8 GEMM against the exact product of the int8 weight (tested,
// tests/nn/int8_linear_test.cc): per element |y - y_exact| <= sum_k |x[m, k]| |W[n, k]| * 2^-7
// (the activation quantization's error, half a step of absmax/127 per element, times |W|),
// plus fp32 rounding; the outlier columns add only fp32 rounding.
//
// [Note: int8 path choice] Int8Path::kAuto takes the int8 GEMM where int8_gemm_available() and
// the dequantize path elsewhere; kInt8Gemm on a process where it is not available throws
// zs::Error(kUnsupported). It is NOT available without VNNI (Zen 3 and other AVX2-only CPUs, or
// ONEDNN_MAX_CPU_ISA / ZS_MAX_ISA capping below it: int8_gemm_supported() in
// core/cpu_features.h): oneDNN's int8 kernels there saturate 16-bit pair sums and give wrong
// products for full-range weights. Nor in builds without oneDNN (Eigen).
//
// Buffers: the constructor creates the oneDNN primitives and reserves the workspace it needs
// (workspace_need()) in the shared `int8_ws` (kActivations); forward/backward allocate nothing.
// The Linear of the dequantize path uses the model's GEMM workspace `gemm_ws` like any Linear.
// Thread-safety: one call at a time per object; the kernels run over the calling OpenMP team.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/memory_tracker.h"
#include "nn/gemm.h"
#include "nn/linear.h"

namespace zs::nn {

// True when this process may run the int8 GEMM: oneDNN is built in, int8_gemm_supported()
// (core/cpu_features.h) and oneDNN's own effective ISA has VNNI. Decided once; thread-safe.
bool int8_gemm_available();
// A line for logs, e.g. "int8 gemm: onednn s8s8s32 [brg:avx512_core_vnni]" or
// "int8 gemm: unavailable (no VNNI: avx2)".
std::string int8_gemm_description();

enum class Int8Path : uint8_t { kAuto, kInt8Gemm, kDequantize };
enum class Int8Backward : uint8_t { kDequantize, kInt8Gemm };

// LLM.int8()'s default outlier threshold.
inline constexpr float kDefaultOutlierThreshold = 6.0f;

struct Int8LinearDesc {
  int64_t M = 0;
  int64_t in = 0, out = 0;
  bool bias = false;
  bool residual = false;   // forward adds into y
  DType mm = DType::kF32;  // x and dy: fp32 or bf16
  Int8Path path = Int8Path::kAuto;
  Int8Backward backward = Int8Backward::kDequantize;
  float outlier_threshold = 0.0f;  // t; 0 = no outlier decomposition (int8 GEMM path only)
  int64_t max_outliers = 0;        // 0 = the default, max(1, in / 8)
  int64_t outlier_cap() const {
    return max_outliers > 0 ? max_outliers : std::max<int64_t>(1, in / 8);
  }
};

// The int8 weight as the engine hands it (ParamView with dtype kI8): q [out, in], scales [out].
struct Int8Weight {
  const int8_t* q = nullptr;
  const float* scales = nullptr;
};

class Int8Linear {
 public:
  Int8Linear();
  // Throws zs::Error(kInvalidArgument) for a bad shape, mm, threshold (negative or not finite) or
  // outlier cap, kUnsupported for kInt8Gemm where int8_gemm_available() is false.
  Int8Linear(const Int8LinearDesc& d, MemoryTracker* tracker, GemmWorkspace* gemm_ws,
             GemmWorkspace* int8_ws);
  ~Int8Linear();
  Int8Linear(Int8Linear&&) noexcept;
  Int8Linear& operator=(Int8Linear&&) noexcept;

  // y = x W^T + b (or y += ... when residual). b fp32 or null (required when desc.bias).
  void forward(const void* x, Int8Weight w, const float* b, float* y);
  // dx = dy W (overwrites).
  void backward_data(const void* dy, Int8Weight w, float* dx);

  bool int8_gemm() const { return int8_; }                  // forward's path
  bool int8_backward() const { return int8_bwd_; }          // backward's path
  int64_t last_outliers() const { return last_outliers_; }  // |O| of the last forward
  const Int8LinearDesc& desc() const { return d_; }

  // The bytes this layer reserves in `int8_ws` on the path it resolves to (int8_gemm: the
  // resolved Int8Path, true for the int8 GEMM): the largest of its forward and backward needs.
  static int64_t workspace_need(const Int8LinearDesc& d, bool int8_gemm, bool int8_backward);
  // Whether `path` resolves to the int8 GEMM in this process (kAuto: int8_gemm_available()).
  static bool resolves_to_int8(Int8Path path);
  // oneDNN's scratchpads of the products a layer of `d` builds on that path ([Note: GEMM
  // scratchpads] in nn/gemm.h): the dequantize path's Linear (`widened`: its bf16 products run
  // widened) and the s8 products, for the calling thread's OpenMP team.
  static int64_t scratchpad_need(const Int8LinearDesc& d, bool int8_gemm, bool int8_backward,
                                 bool widened);
  // The scratchpads this layer registered (scratchpad_need() of its path).
  int64_t scratchpad_bytes() const;

 private:
  struct Prims;
  Int8LinearDesc d_;
  bool int8_ = false, int8_bwd_ = false;
  int64_t last_outliers_ = 0;
  Linear deq_;  // the dequantize path's products
  std::unique_ptr<Prims> prims_;
  GemmWorkspace* ws_ = nullptr;
};

}  // namespace zs::nn
