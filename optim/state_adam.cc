#include "optim/state_adam.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "core/state_quant_kernels.h"
#include "optim/clip.h"
#include "optim/cpu_adam.h"
#include "optim/state_adam_internal.h"

namespace zs::optim {
namespace {

using detail::AdamIsa;

// Elements per fp32 tile of the bf16-state path (3 KiB of tiles: they stay in L1).
constexpr int64_t kTile = 256;

bool is_float_dtype(DType dt) {
  return dt == DType::kF32 || dt == DType::kBF16 || dt == DType::kF16;
}

void check_args(const char* who, DType grad_dtype, const void* out, DType out_dtype, int64_t n) {
  ZS_CHECK(is_float_dtype(grad_dtype), ErrorCode::kInvalidArgument,
           "{}: grad dtype {} (fp32, bf16 or fp16 expected)", who, dtype_name(grad_dtype));
  ZS_CHECK(out == nullptr || is_float_dtype(out_dtype), ErrorCode::kInvalidArgument,
           "{}: out dtype {} (fp32, bf16 or fp16 expected)", who, dtype_name(out_dtype));
  ZS_CHECK(n >= 0, ErrorCode::kInvalidArgument, "{}: n = {} < 0", who, n);
}

const char* byte_at(const void* base, DType dt, int64_t i) {
  return static_cast<const char*>(base) + i * static_cast<int64_t>(dtype_size(dt));
}

// What every fast path shares: the level, the grad and the out of the whole span.
struct Span {
  SimdLevel level;
  AdamIsa isa;
  float* p;
  const void* grad;
  DType grad_dtype;
  void* out;
  DType out_dtype;
  const AdamWStep* s;
};

// grad[begin, begin + len) as fp32: the span itself when fp32, else converted into tile.
const float* grad_f32(const Span& a, int64_t begin, int64_t len, float* tile) {
  if (a.grad_dtype == DType::kF32) return static_cast<const float*>(a.grad) + begin;
  convert_at(a.level, byte_at(a.grad, a.grad_dtype, begin), a.grad_dtype, tile, DType::kF32,
             static_cast<size_t>(len));
  return tile;
}

// out[begin, begin + len) = p rounded to out_dtype (nothing when out is null or is p itself).
// Returns true when an updated p there, or its out value, is an inf or NaN: the tile just written,
// read while it is in cache ([Note: non-finite policy] in runtime/engine_config.h).
bool store_out(const Span& a, int64_t begin, int64_t len) {
  bool bad = first_nonfinite(a.p + begin, DType::kF32, len) >= 0;
  if (a.out == nullptr) return bad;
  void* dst = const_cast<char*>(byte_at(a.out, a.out_dtype, begin));
  if (dst == a.p + begin) return bad;
  convert_at(a.level, a.p + begin, DType::kF32, dst, a.out_dtype, static_cast<size_t>(len));
  return bad || (a.out_dtype != DType::kF32 && first_nonfinite(dst, a.out_dtype, len) >= 0);
}

// True when an updated value is not finite (store_out).
bool bf16_range(const Span& a, uint16_t* m, uint16_t* v, int64_t begin, int64_t end) {
  bool bad = false;
  float g32[kTile], m32[kTile], v32[kTile];
  for (int64_t i = begin; i < end; i += kTile) {
    const int64_t len = std::min(kTile, end - i);
    const float* g = grad_f32(a, i, len, g32);
    convert_at(a.level, m + i, DType::kBF16, m32, DType::kF32, static_cast<size_t>(len));
    convert_at(a.level, v + i, DType::kBF16, v32, DType::kF32, static_cast<size_t>(len));
    detail::adam_f32_span(a.isa, a.p + i, g, m32, v32, len, *a.s);
    convert_at(a.level, m32, DType::kF32, m + i, DType::kBF16, static_cast<size_t>(len));
    convert_at(a.level, v32, DType::kF32, v + i, DType::kBF16, static_cast<size_t>(len));
    bad = store_out(a, i, len) || bad;
  }
  return bad;
}

bool int8_range(const Span& a, QuantizedMoment m, QuantizedMoment v, const Int8StateFormat& f,
                int64_t begin, int64_t end) {
  bool bad = false;
  const StateCodeBook& mb = state_code_book(f.code, true);
  const StateCodeBook& vb = state_code_book(f.code, false);
  std::vector<float> tiles(static_cast<size_t>(3 * f.block));  // g, m, v [block] each
  float* g32 = tiles.data();
  float* m32 = g32 + f.block;
  float* v32 = m32 + f.block;
  for (int64_t i = begin; i < end; i += f.block) {
    const int64_t len = std::min(f.block, end - i), b = i / f.block;
    const float* g = grad_f32(a, i, len, g32);
    detail::BlockScales sc;
    if (a.level == SimdLevel::kAvx512 && len % 16 == 0) {
      sc = detail::int8_block_adam_avx512(a.p + i, g, m.codes + i, m.scales[b], v.codes + i,
                                          v.scales[b], len, mb, vb, *a.s, m32, v32);
    } else {
      decode_state_block(a.level, m.codes + i, m.scales[b], len, mb, m32);
      decode_state_block(a.level, v.codes + i, v.scales[b], len, vb, v32);
      detail::adam_f32_span(a.isa, a.p + i, g, m32, v32, len, *a.s);
      sc = {state_block_scale_at(a.level, m32, len), state_block_scale_at(a.level, v32, len)};
    }
    m.scales[b] = sc.m;
    v.scales[b] = sc.v;
    encode_state_block(a.level, m32, sc.m, len, mb, m.codes + i);
    encode_state_block(a.level, v32, sc.v, len, vb, v.codes + i);
    bad = store_out(a, i, len) || bad;
  }
  return bad;
}

Span make_span(AdamIsa isa, float* p, const void* grad, DType grad_dtype, void* out,
               DType out_dtype, const AdamWStep& s) {
  ZS_CHECK(detail::adam_isa_supported(isa), ErrorCode::kUnsupported,
           "state AdamW: the {} path is not supported by this CPU", detail::adam_isa_name(isa));
  return Span{
      static_cast<SimdLevel>(static_cast<int>(isa)), isa, p, grad, grad_dtype, out, out_dtype, &s};
}

}  // namespace

const char* state_dtype_name(StateDType dtype) {
  switch (dtype) {
    case StateDType::kF32:
      return "fp32";
    case StateDType::kBF16:
      return "bf16";
    case StateDType::kI8:
      return "int8";
  }
  return "invalid";
}

int64_t int8_moment_bytes(int64_t n, int64_t block) {
  check_state_block(block);
  return n + 4 * state_num_blocks(n, block);
}

void adamw_bf16_states_reference(float* p, const void* grad, DType grad_dtype, uint16_t* m,
                                 uint16_t* v, int64_t n, const AdamWStep& s, void* out,
                                 DType out_dtype) {
  check_args("adamw_bf16_states_reference", grad_dtype, out, out_dtype, n);
  for (int64_t i = 0; i < n; ++i) {
    float mi = bf16_bits_to_fp32(m[i]), vi = bf16_bits_to_fp32(v[i]);
    adamw_reference(p + i, byte_at(grad, grad_dtype, i), grad_dtype, &mi, &vi, 1, s,
                    out == nullptr ? nullptr : const_cast<char*>(byte_at(out, out_dtype, i)),
                    out_dtype);
    m[i] = fp32_to_bf16_bits(mi);
    v[i] = fp32_to_bf16_bits(vi);
  }
}

void adamw_int8_states_reference(float* p, const void* grad, DType grad_dtype, QuantizedMoment m,
                                 QuantizedMoment v, int64_t n, const Int8StateFormat& format,
                                 const AdamWStep& s, void* out, DType out_dtype) {
  check_args("adamw_int8_states_reference", grad_dtype, out, out_dtype, n);
  check_state_block(format.block);
  const StateCodeBook& mb = state_code_book(format.code, true);
  const StateCodeBook& vb = state_code_book(format.code, false);
  std::vector<float> m32(static_cast<size_t>(format.block)), v32(m32.size());
  for (int64_t i = 0, b = 0; i < n; i += format.block, ++b) {
    const int64_t len = std::min(format.block, n - i);
    for (int64_t j = 0; j < len; ++j) {
      m32[j] = mb.value[m.codes[i + j]] * m.scales[b];
      v32[j] = vb.value[v.codes[i + j]] * v.scales[b];
    }
    adamw_reference(p + i, byte_at(grad, grad_dtype, i), grad_dtype, m32.data(), v32.data(), len, s,
                    out == nullptr ? nullptr : const_cast<char*>(byte_at(out, out_dtype, i)),
                    out_dtype);
    quantize_state_blockwise(m32.data(), len, format.block, mb, m.codes + i, m.scales + b);
    quantize_state_blockwise(v32.data(), len, format.block, vb, v.codes + i, v.scales + b);
  }
}

namespace detail {

bool cpu_adamw_bf16_states_with(AdamIsa isa, int threads, float* p, const void* grad,
                                DType grad_dtype, uint16_t* m, uint16_t* v, int64_t n,
                                const AdamWStep& s, void* out, DType out_dtype) {
  check_args("cpu_adamw_bf16_states", grad_dtype, out, out_dtype, n);
  ZS_CHECK(threads >= 1, ErrorCode::kInvalidArgument, "cpu_adamw_bf16_states: threads = {} < 1",
           threads);
  const Span a = make_span(isa, p, grad, grad_dtype, out, out_dtype, s);
  std::atomic<bool> bad{false};
  parallel_ranges(threads, n, 64, [&](int64_t begin, int64_t end) {
    if (bf16_range(a, m, v, begin, end)) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

bool cpu_adamw_int8_states_with(AdamIsa isa, int threads, float* p, const void* grad,
                                DType grad_dtype, QuantizedMoment m, QuantizedMoment v, int64_t n,
                                const Int8StateFormat& format, const AdamWStep& s, void* out,
                                DType out_dtype) {
  check_args("cpu_adamw_int8_states", grad_dtype, out, out_dtype, n);
  check_state_block(format.block);
  ZS_CHECK(threads >= 1, ErrorCode::kInvalidArgument, "cpu_adamw_int8_states: threads = {} < 1",
           threads);
  const Span a = make_span(isa, p, grad, grad_dtype, out, out_dtype, s);
  std::atomic<bool> bad{false};
  parallel_ranges(threads, n, format.block, [&](int64_t begin, int64_t end) {
    if (int8_range(a, m, v, format, begin, end)) bad.store(true, std::memory_order_relaxed);
  });
  return !bad.load();
}

}  // namespace detail

bool cpu_adamw_bf16_states(float* p, const void* grad, DType grad_dtype, uint16_t* m, uint16_t* v,
                           int64_t n, const AdamWStep& s, void* out, DType out_dtype) {
  return detail::cpu_adamw_bf16_states_with(detail::active_adam_isa(), cpu_adam_threads(), p, grad,
                                            grad_dtype, m, v, n, s, out, out_dtype);
}

bool cpu_adamw_int8_states(float* p, const void* grad, DType grad_dtype, QuantizedMoment m,
                           QuantizedMoment v, int64_t n, const Int8StateFormat& format,
                           const AdamWStep& s, void* out, DType out_dtype) {
  return detail::cpu_adamw_int8_states_with(detail::active_adam_isa(), cpu_adam_threads(), p, grad,
                                            grad_dtype, m, v, n, format, s, out, out_dtype);
}

}  // namespace zs::optim
