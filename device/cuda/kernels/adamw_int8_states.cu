// Fused AdamW with 8-bit moments in the float8 code book on a device shard: the bits of
// optim::adamw_int8_states_reference (optim/state_adam.h) with StateCode::kFloat8. One thread
// block per state block: pass 1 decodes m and v (integer shifts, [Note: float8 state codes] in
// core/state_quant.h), updates p (explicitly rounded intrinsics: no FMA contraction) and reduces
// the new moments' absmax bits; pass 2 recomputes the new moments from the same inputs (the same
// operations give the same bits; the codes are still the old ones, each element read and written
// by one thread) and writes their codes under the new scales. No scratch memory.
#include "core/state_quant.h"
#include "device/cuda/kernels/device_access.cuh"
#include "device/cuda/kernels/ops_kernels.h"

namespace zs::gpu {
namespace {

constexpr int kThreads = 256;

// Float8Format's fields as a kernel argument (the host constexpr function is not device code).
struct F8 {
  uint32_t k, top, min_normal;
  float sub_in, sub_out;
};

F8 f8_of(bool is_signed) {
  const Float8Format f = float8_format(is_signed);
  return {f.k, f.top, f.min_normal, f.sub_in, f.sub_out};
}

// book.value[c] of the float8 book (signed: codes above 0x80 negative).
__device__ __forceinline__ float f8_decode(const F8& f, uint32_t c, bool is_signed) {
  const uint32_t q = is_signed ? (c & 0x7fu) : c;
  float y = q < 8 ? __fmul_rn(static_cast<float>(q), f.sub_out) : __uint_as_float((q + f.k) << 20);
  if (is_signed && c > 0x80u) y = -y;
  return y;
}

// The code of r by float8_index (core/state_quant.h), with the sign for signed books.
__device__ __forceinline__ uint8_t f8_encode(const F8& f, float r, bool is_signed) {
  const uint32_t bits = __float_as_uint(r), abits = bits & 0x7fffffffu;
  uint32_t q;
  if (abits >= f.min_normal) {
    q = ((abits + 0x7ffffu) >> 20) - f.k;
  } else {
    const float y = __fmul_rn(__uint_as_float(abits), f.sub_in);
    const int t = __float2int_rz(y);
    q = static_cast<uint32_t>(t) + (__fsub_rn(y, __int2float_rn(t)) > 0.5f ? 1u : 0u);
  }
  q = q < f.top ? q : f.top;
  if (!is_signed) return static_cast<uint8_t>((q == 0 && abits != 0) ? 1u : q);
  return static_cast<uint8_t>(q | (q != 0 ? (bits >> 24) & 0x80u : 0u));
}

// state_scale_from_absmax_bits: NaN (0x7fc00000, the CPU's) for inf/NaN, else the float.
__device__ __forceinline__ float scale_from_bits(uint32_t b) {
  return b >= 0x7f800000u ? __uint_as_float(0x7fc00000u) : __uint_as_float(b);
}

struct Moments {
  float m, v;
};

// The new m and v of element i ([Note: AdamW operation order]); p_out gets the new p.
__device__ __forceinline__ Moments step_of(const optim::AdamWStep& s, float g_raw, float m_old,
                                           float v_old, float p_old, float* p_out) {
  const float g = __fmul_rn(g_raw, s.grad_scale);
  const float mi = __fadd_rn(__fmul_rn(m_old, s.beta1), __fmul_rn(g, s.one_minus_beta1));
  const float vi =
      __fadd_rn(__fmul_rn(v_old, s.beta2), __fmul_rn(__fmul_rn(g, g), s.one_minus_beta2));
  if (p_out != nullptr) {
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), s.bias2_sqrt), s.eps);
    *p_out = __fsub_rn(__fmul_rn(p_old, s.decay), __fmul_rn(s.step_size, __fdiv_rn(mi, denom)));
  }
  return {mi, vi};
}

struct Args {
  float* p;
  const void* grad;
  DType grad_dtype;
  uint8_t *m_codes, *v_codes;
  float *m_scales, *v_scales;
  int64_t n, block;
  optim::AdamWStep s;
  void* out;
  DType out_dtype;
  F8 fm, fv;
};

__global__ void adamw_int8_states_kernel(Args a) {
  __shared__ uint32_t m_max, v_max;
  for (int64_t b = blockIdx.x; b * a.block < a.n; b += gridDim.x) {
    const int64_t begin = b * a.block;
    const int64_t len = a.n - begin < a.block ? a.n - begin : a.block;
    const float ms = a.m_scales[b], vs = a.v_scales[b];
    if (threadIdx.x == 0) m_max = v_max = 0;
    __syncthreads();
    uint32_t lm = 0, lv = 0;
    for (int64_t i = begin + threadIdx.x; i < begin + len; i += blockDim.x) {
      float p_new;
      const Moments mv =
          step_of(a.s, detail::load(a.grad, a.grad_dtype, i),
                  __fmul_rn(f8_decode(a.fm, a.m_codes[i], true), ms),
                  __fmul_rn(f8_decode(a.fv, a.v_codes[i], false), vs), a.p[i], &p_new);
      a.p[i] = p_new;
      if (a.out != nullptr) detail::store(a.out, a.out_dtype, i, p_new);
      lm = max(lm, __float_as_uint(mv.m) & 0x7fffffffu);
      lv = max(lv, __float_as_uint(mv.v) & 0x7fffffffu);
    }
    atomicMax(&m_max, lm);
    atomicMax(&v_max, lv);
    __syncthreads();
    const float new_ms = scale_from_bits(m_max), new_vs = scale_from_bits(v_max);
    // 0, NaN or a subnormal absmax: every code 0 (core/state_quant.h's rule for float8).
    const bool m_zero = !(new_ms >= 0x1p-126f), v_zero = !(new_vs >= 0x1p-126f);
    const float m_inv = __fdiv_rn(1.0f, new_ms), v_inv = __fdiv_rn(1.0f, new_vs);
    for (int64_t i = begin + threadIdx.x; i < begin + len; i += blockDim.x) {
      const Moments mv =
          step_of(a.s, detail::load(a.grad, a.grad_dtype, i),
                  __fmul_rn(f8_decode(a.fm, a.m_codes[i], true), ms),
                  __fmul_rn(f8_decode(a.fv, a.v_codes[i], false), vs), 0.0f, nullptr);
      a.m_codes[i] = m_zero ? 0 : f8_encode(a.fm, __fmul_rn(mv.m, m_inv), true);
      a.v_codes[i] = v_zero ? 0 : f8_encode(a.fv, __fmul_rn(mv.v, v_inv), false);
    }
    if (threadIdx.x == 0) {
      a.m_scales[b] = new_ms;
      a.v_scales[b] = new_vs;
    }
    __syncthreads();  // the shared maxima are reset for the next block
  }
}

}  // namespace

cudaError_t adamw_int8_states(float* p, const void* grad, DType grad_dtype, uint8_t* m_codes,
                              float* m_scales, uint8_t* v_codes, float* v_scales, int64_t n,
                              int64_t block, const optim::AdamWStep& s, void* out, DType out_dtype,
                              cudaStream_t stream) {
  if (n < 0 || block < 64 || (block & (block - 1)) != 0 || !detail::is_compute_dtype(grad_dtype) ||
      (out != nullptr && !detail::is_compute_dtype(out_dtype))) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  const Args a{p, grad,  grad_dtype, m_codes, v_codes,   m_scales,    v_scales,
               n, block, s,          out,     out_dtype, f8_of(true), f8_of(false)};
  const int64_t blocks = (n + block - 1) / block;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
  adamw_int8_states_kernel<<<grid, kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace zs::gpu
