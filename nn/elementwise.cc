// Conversions, parameter loads, embedding, GELU, residual and bias-gradient kernels.
#include <cstring>

#include "core/convert.h"
#include "core/error.h"
#include "nn/kernels.h"
#include "nn/simd.h"

namespace zs::nn {

void store_as(const float* src, void* dst, DType dt, int64_t off, int64_t n) {
  if (dt == DType::kF32) {
    std::memcpy(static_cast<float*>(dst) + off, src, sizeof(float) * n);
  } else {
    ZS_ASSERT(dt == DType::kBF16);
    fp32_to_bf16(src, static_cast<uint16_t*>(dst) + off, static_cast<size_t>(n));
  }
}

void param_to_fp32(const ParamView& p, float* dst) {
  convert(p.data, p.dtype, dst, DType::kF32, static_cast<size_t>(p.numel));
}

namespace {
template <typename LoadE, typename LoadP>
void embed_rows(const int32_t* tokens, int B, int T, int C, LoadE wte, LoadP wpe, float* out) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(B) * T; ++i) {
    const int64_t tok = tokens[i];
    const int64_t t = i % T;
    float* o = out + i * C;
    for (int c = 0; c < C; ++c) o[c] = wte(tok * C + c) + wpe(t * C + c);
  }
}
}  // namespace

void embedding_forward(const int32_t* tokens, int B, int T, int C, const ParamView& wte,
                       const ParamView* wpe, float* out) {
  ZS_CHECK(wpe == nullptr || wte.dtype == wpe->dtype, ErrorCode::kInvalidArgument,
           "embedding: wte is {} but wpe is {}", dtype_name(wte.dtype), dtype_name(wpe->dtype));
  // No position table (rotary positions): the rows of wte alone, as + 0.0f would give them.
  auto rows = [&](auto load_e, auto load_p) {
    if (wpe == nullptr)
      embed_rows(
          tokens, B, T, C, load_e, [](int64_t) { return 0.0f; }, out);
    else
      embed_rows(tokens, B, T, C, load_e, load_p, out);
  };
  const void* p = wpe ? wpe->data : nullptr;
  switch (wte.dtype) {
    case DType::kF32: {
      const float* e = wte.as<float>();
      const float* pf = static_cast<const float*>(p);
      rows([=](int64_t i) { return e[i]; }, [=](int64_t i) { return pf[i]; });
      break;
    }
    case DType::kBF16:
    case DType::kF16: {
      const uint16_t* e = wte.as<uint16_t>();
      const uint16_t* ph = static_cast<const uint16_t*>(p);
      if (wte.dtype == DType::kBF16)
        rows([=](int64_t i) { return bf16_bits_to_fp32(e[i]); },
             [=](int64_t i) { return bf16_bits_to_fp32(ph[i]); });
      else
        rows([=](int64_t i) { return fp16_bits_to_fp32(e[i]); },
             [=](int64_t i) { return fp16_bits_to_fp32(ph[i]); });
      break;
    }
    default:
      fail(ErrorCode::kInvalidArgument, "embedding: unsupported dtype {}", dtype_name(wte.dtype));
  }
}

void embedding_forward(const int32_t* tokens, int B, int T, int C, const ParamView& wte,
                       const ParamView& wpe, float* out) {
  embedding_forward(tokens, B, T, C, wte, &wpe, out);
}

void embedding_backward(const int32_t* tokens, int B, int T, int C, const float* dout, float* dwte,
                        float* dwpe) {
  // Serial over tokens (rows of dwte may repeat); vectorized over C. Deterministic.
  for (int64_t i = 0; dwte != nullptr && i < static_cast<int64_t>(B) * T; ++i) {
    float* g = dwte + static_cast<int64_t>(tokens[i]) * C;
    const float* d = dout + i * C;
    for (int c = 0; c < C; ++c) g[c] += d[c];
  }
  for (int b = 0; dwpe != nullptr && b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* g = dwpe + static_cast<int64_t>(t) * C;
      const float* d = dout + (static_cast<int64_t>(b) * T + t) * C;
      for (int c = 0; c < C; ++c) g[c] += d[c];
    }
}

namespace {
constexpr float kGeluK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

ZS_SIMD_BODY(void, gelu_chunk, (const float* x, float* y, int n)) {
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kGeluK * (v + kGeluA * v * v * v);
    y[i] = 0.5f * v * (1.0f + simd::tanh_approx(u));
  }
}
ZS_SIMD_DISPATCH(void, gelu_chunk, (const float* x, float* y, int n), (x, y, n))

ZS_SIMD_BODY(void, gelu_grad_chunk, (const float* x, const float* dy, float* dx, int n)) {
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kGeluK * (v + kGeluA * v * v * v);
    const float t = simd::tanh_approx(u);
    const float du = kGeluK * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}
ZS_SIMD_DISPATCH(void, gelu_grad_chunk, (const float* x, const float* dy, float* dx, int n),
                 (x, dy, dx, n))

// y = gelu(x), x = gelu'(x), with the expressions of gelu_chunk and gelu_grad_chunk.
ZS_SIMD_BODY(void, gelu_both_chunk, (float* x, float* y, int n)) {
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kGeluK * (v + kGeluA * v * v * v);
    const float t = simd::tanh_approx(u);
    const float du = kGeluK * (1.0f + 3.0f * kGeluA * v * v);
    y[i] = 0.5f * v * (1.0f + t);
    x[i] = 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du;
  }
}
ZS_SIMD_DISPATCH(void, gelu_both_chunk, (float* x, float* y, int n), (x, y, n))

ZS_SIMD_BODY(void, mul_chunk, (const float* a, const float* b, float* o, int64_t n)) {
  for (int64_t i = 0; i < n; ++i) o[i] = b[i] * a[i];
}
ZS_SIMD_DISPATCH(void, mul_chunk, (const float* a, const float* b, float* o, int64_t n),
                 (a, b, o, n))

ZS_SIMD_BODY(void, add_chunk, (const float* a, const float* b, float* o, int64_t n)) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}
ZS_SIMD_DISPATCH(void, add_chunk, (const float* a, const float* b, float* o, int64_t n),
                 (a, b, o, n))

ZS_SIMD_BODY(void, colsum_block, (const float* dy, int64_t M, int N, int j0, int j1, float* db)) {
  float acc[64];
  const int w = j1 - j0;
  for (int j = 0; j < w; ++j) acc[j] = 0.0f;
  for (int64_t i = 0; i < M; ++i) {
    const float* r = dy + i * N + j0;
    for (int j = 0; j < w; ++j) acc[j] += r[j];
  }
  for (int j = 0; j < w; ++j) db[j0 + j] += acc[j];
}
ZS_SIMD_DISPATCH(void, colsum_block, (const float* dy, int64_t M, int N, int j0, int j1, float* db),
                 (dy, M, N, j0, j1, db))
}  // namespace

void gelu_forward(const float* x, void* out, DType dt, int64_t n) {
  constexpr int kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    const int len = static_cast<int>(std::min<int64_t>(kChunk, n - off));
    if (dt == DType::kF32) {
      gelu_chunk(x + off, static_cast<float*>(out) + off, len);
    } else {
      alignas(64) float tmp[kChunk];
      gelu_chunk(x + off, tmp, len);
      store_as(tmp, out, dt, off, len);
    }
  }
}

void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  constexpr int kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    const int len = static_cast<int>(std::min<int64_t>(kChunk, n - off));
    gelu_grad_chunk(x + off, dy + off, dx + off, len);
  }
}

void gelu_forward_save_grad(float* x, void* out, DType dt, int64_t n) {
  constexpr int kChunk = 1024;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    const int len = static_cast<int>(std::min<int64_t>(kChunk, n - off));
    if (dt == DType::kF32) {
      gelu_both_chunk(x + off, static_cast<float*>(out) + off, len);
    } else {
      alignas(64) float tmp[kChunk];
      gelu_both_chunk(x + off, tmp, len);
      store_as(tmp, out, dt, off, len);
    }
  }
}

void gelu_backward_saved(const float* saved, const float* dy, float* dx, int64_t n) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    mul_chunk(saved + off, dy + off, dx + off, std::min(kChunk, n - off));
  }
}

void residual_add(const float* a, const float* b, float* out, int64_t n) {
  constexpr int64_t kChunk = 4096;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t off = c * kChunk;
    add_chunk(a + off, b + off, out + off, std::min(kChunk, n - off));
  }
}

void bias_backward(const float* dy, int64_t M, int N, float* db) {
  const int blocks = (N + 63) / 64;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < blocks; ++blk)
    colsum_block(dy, M, N, blk * 64, std::min(N, blk * 64 + 64), db);
}

}  // namespace zs::nn
