// The fused AdamW with bf16 and int8 states (optim/state_adam.h) against its references, bit for
// bit: every path this CPU has, 1..3 threads, grads fp32/bf16/fp16, out none/fp32/bf16/fp16,
// several block sizes and both code books, short last blocks, several steps in a row, data with
// huge, tiny, subnormal and zero values; and the arguments that are refused.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <cstring>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "core/convert.h"
#include "core/error.h"
#include "core/state_quant.h"
#include "optim/state_adam.h"
#include "optim/state_adam_internal.h"
#include "tests/optim/adam_test_data.h"

namespace zs::optim {
namespace {

const DType kFloatDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

// p, grad and out of one run; the states live beside it per test.
struct Params {
  std::vector<float> p;
  std::vector<uint8_t> grad, out;
};

Params make_params(int64_t n, DType gd, DType od, uint32_t seed) {
  std::mt19937 rng(seed);
  Params a;
  a.p.resize(n);
  for (float& x : a.p) x = interesting(rng, 0.02f);
  a.grad.resize(n * dtype_size(gd));
  for (int64_t i = 0; i < n; ++i) {
    const float g = interesting(rng, 1e-3f);
    if (gd == DType::kF32) std::memcpy(a.grad.data() + 4 * i, &g, 4);
    if (gd == DType::kBF16 || gd == DType::kF16) {
      const uint16_t h = (i % 7 == 3)
                             ? random_finite_16(rng, gd)
                             : (gd == DType::kBF16 ? fp32_to_bf16_bits(g) : fp32_to_fp16_bits(g));
      std::memcpy(a.grad.data() + 2 * i, &h, 2);
    }
  }
  a.out.assign(n * dtype_size(od) + 1, 0xab);
  return a;
}

// 8-bit moments: m from signed values, v from non-negative ones, with a zero block.
struct Int8State {
  std::vector<uint8_t> mc, vc;
  std::vector<float> ms, vs;
  QuantizedMoment m() { return {mc.data(), ms.data()}; }
  QuantizedMoment v() { return {vc.data(), vs.data()}; }
};

Int8State make_int8_state(int64_t n, const Int8StateFormat& f, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = (i / f.block == 1) ? 0.0f : interesting(rng, 1e-3f);
    v[i] = (i / f.block == 1) ? 0.0f : std::abs(interesting(rng, 1e-6f));
  }
  Int8State st;
  st.mc.resize(n);
  st.vc.resize(n);
  st.ms.resize(state_num_blocks(n, f.block));
  st.vs.resize(st.ms.size());
  quantize_state_blockwise(m.data(), n, f.block, state_code_book(f.code, true), st.mc.data(),
                           st.ms.data());
  quantize_state_blockwise(v.data(), n, f.block, state_code_book(f.code, false), st.vc.data(),
                           st.vs.data());
  return st;
}

void expect_same_bytes(const void* a, const void* b, int64_t n, size_t elem, const char* what) {
  const int64_t d = first_diff(a, b, n, elem);
  EXPECT_EQ(d, -1) << what << " differs at element " << d;
}

struct Case {
  AdamIsa isa;
  int threads;
  int64_t n;
  DType gd;
  bool has_out;
  DType od;
};

std::string describe(const Case& c) {
  return fmt::format("isa={} threads={} n={} grad={} out={}", detail::adam_isa_name(c.isa),
                     c.threads, c.n, dtype_name(c.gd), c.has_out ? dtype_name(c.od) : "none");
}

// Three steps in a row of the reference and of the path, from the same state.
void expect_int8_bitwise(const Case& c, const Int8StateFormat& f, uint32_t seed) {
  SCOPED_TRACE(describe(c) + fmt::format(" block={} code={}", f.block, state_code_name(f.code)));
  Params a = make_params(c.n, c.gd, c.od, seed), b = a;
  Int8State sa = make_int8_state(c.n, f, seed + 1), sb = sa;
  for (int64_t t = 1; t <= 3; ++t) {
    const AdamWStep s = test_step(t, t == 2 ? 1.0f / 1024.0f : 1.0f);
    adamw_int8_states_reference(a.p.data(), a.grad.data(), c.gd, sa.m(), sa.v(), c.n, f, s,
                                c.has_out ? a.out.data() : nullptr, c.od);
    detail::cpu_adamw_int8_states_with(c.isa, c.threads, b.p.data(), b.grad.data(), c.gd, sb.m(),
                                       sb.v(), c.n, f, s, c.has_out ? b.out.data() : nullptr, c.od);
  }
  expect_same_bytes(a.p.data(), b.p.data(), c.n, 4, "p");
  expect_same_bytes(a.out.data(), b.out.data(), static_cast<int64_t>(a.out.size()), 1, "out");
  expect_same_bytes(sa.mc.data(), sb.mc.data(), c.n, 1, "m codes");
  expect_same_bytes(sa.vc.data(), sb.vc.data(), c.n, 1, "v codes");
  expect_same_bytes(sa.ms.data(), sb.ms.data(), static_cast<int64_t>(sa.ms.size()), 4, "m scales");
  expect_same_bytes(sa.vs.data(), sb.vs.data(), static_cast<int64_t>(sa.vs.size()), 4, "v scales");
  EXPECT_EQ(a.grad, b.grad) << "grad must not be written";
}

TEST(StateAdam, Int8BitwiseEqualsReferenceOnEveryPath) {
  const Int8StateFormat formats[] = {{64, StateCode::kDynamic}, {256, StateCode::kDynamic},
                                     {320, StateCode::kLinear}, {4096, StateCode::kDynamic},
                                     {64, StateCode::kFloat8},  {256, StateCode::kFloat8},
                                     {448, StateCode::kFloat8}};
  for (AdamIsa isa : supported_isas()) {
    for (const Int8StateFormat& f : formats) {
      for (int64_t n : {int64_t{1}, f.block - 1, f.block, 3 * f.block + 17, int64_t{70001}}) {
        for (DType gd : kFloatDTypes) {
          for (int o = 0; o < 4; ++o) {
            const DType od = o > 0 ? kFloatDTypes[o - 1] : DType::kF32;
            const int threads = 1 + static_cast<int>((n + o) % 3);
            expect_int8_bitwise({isa, threads, n, gd, o > 0, od}, f,
                                static_cast<uint32_t>(n * 7 + o + f.block));
            if (testing::Test::HasFailure()) return;  // one clear failure, not thousands
          }
        }
      }
    }
  }
}

TEST(StateAdam, Int8ThreadCountsAndFlushToZero) {
  for (StateCode code : {StateCode::kDynamic, StateCode::kFloat8}) {
    SCOPED_TRACE(state_code_name(code));
    const Int8StateFormat f{256, code};
    for (AdamIsa isa : supported_isas()) {
      for (int threads : {1, 2, 3, 5}) {
        expect_int8_bitwise({isa, threads, 256 * 500 + 99, DType::kBF16, true, DType::kBF16}, f, 9);
      }
    }
    // The OpenMP workers follow the caller's FTZ/DAZ, as the reference on this thread does.
    const unsigned saved = _mm_getcsr();
    _mm_setcsr(saved | 0x8040u);
    for (AdamIsa isa : supported_isas()) {
      expect_int8_bitwise({isa, 2, 100003, DType::kF32, true, DType::kF16}, f, 10);
    }
    _mm_setcsr(saved);
  }
}

void expect_bf16_bitwise(const Case& c, uint32_t seed) {
  SCOPED_TRACE(describe(c));
  Params a = make_params(c.n, c.gd, c.od, seed), b = a;
  std::mt19937 rng(seed + 1);
  std::vector<uint16_t> ma(c.n), va(c.n);
  for (int64_t i = 0; i < c.n; ++i) {
    ma[i] = fp32_to_bf16_bits(interesting(rng, 1e-3f));
    va[i] = fp32_to_bf16_bits(std::abs(interesting(rng, 1e-6f)));
  }
  std::vector<uint16_t> mb = ma, vb = va;
  for (int64_t t = 1; t <= 2; ++t) {
    const AdamWStep s = test_step(t, 0.5f);
    adamw_bf16_states_reference(a.p.data(), a.grad.data(), c.gd, ma.data(), va.data(), c.n, s,
                                c.has_out ? a.out.data() : nullptr, c.od);
    detail::cpu_adamw_bf16_states_with(c.isa, c.threads, b.p.data(), b.grad.data(), c.gd, mb.data(),
                                       vb.data(), c.n, s, c.has_out ? b.out.data() : nullptr, c.od);
  }
  expect_same_bytes(a.p.data(), b.p.data(), c.n, 4, "p");
  expect_same_bytes(a.out.data(), b.out.data(), static_cast<int64_t>(a.out.size()), 1, "out");
  EXPECT_EQ(ma, mb);
  EXPECT_EQ(va, vb);
}

TEST(StateAdam, Bf16BitwiseEqualsReferenceOnEveryPath) {
  for (AdamIsa isa : supported_isas()) {
    for (int64_t n : {1, 15, 64, 257, 1000, 100003}) {
      for (DType gd : kFloatDTypes) {
        for (int o = 0; o < 4; ++o) {
          const DType od = o > 0 ? kFloatDTypes[o - 1] : DType::kF32;
          const int threads = 1 + static_cast<int>((n + o) % 3);
          expect_bf16_bitwise({isa, threads, n, gd, o > 0, od}, static_cast<uint32_t>(n + o));
          if (testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

TEST(StateAdam, SpansSplitAtBlockBoundariesGiveTheSameBits) {
  // One call over n, or two calls over [0, 3 blocks) and the rest: the same bits.
  const Int8StateFormat f{128, StateCode::kDynamic};
  const int64_t n = 128 * 9 + 5, cut = 3 * 128;
  Params a = make_params(n, DType::kF32, DType::kBF16, 3), b = a;
  Int8State sa = make_int8_state(n, f, 4), sb = sa;
  const AdamWStep s = test_step(5, 1.0f);
  cpu_adamw_int8_states(a.p.data(), a.grad.data(), DType::kF32, sa.m(), sa.v(), n, f, s,
                        a.out.data(), DType::kBF16);
  cpu_adamw_int8_states(b.p.data(), b.grad.data(), DType::kF32, sb.m(), sb.v(), cut, f, s,
                        b.out.data(), DType::kBF16);
  cpu_adamw_int8_states(b.p.data() + cut, b.grad.data() + 4 * cut, DType::kF32,
                        {sb.mc.data() + cut, sb.ms.data() + cut / f.block},
                        {sb.vc.data() + cut, sb.vs.data() + cut / f.block}, n - cut, f, s,
                        b.out.data() + 2 * cut, DType::kBF16);
  expect_same_bytes(a.p.data(), b.p.data(), n, 4, "p");
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(sa.mc, sb.mc);
  EXPECT_EQ(sa.vc, sb.vc);
  expect_same_bytes(sa.ms.data(), sb.ms.data(), static_cast<int64_t>(sa.ms.size()), 4, "m scales");
  expect_same_bytes(sa.vs.data(), sb.vs.data(), static_cast<int64_t>(sa.vs.size()), 4, "v scales");
}

TEST(StateAdam, OutMayAliasParamsInFp32) {
  const Int8StateFormat f{256, StateCode::kDynamic};
  const int64_t n = 256 * 200 + 31;
  for (AdamIsa isa : supported_isas()) {
    Params a = make_params(n, DType::kBF16, DType::kF32, 41), b = a;
    Int8State sa = make_int8_state(n, f, 42), sb = sa;
    const AdamWStep s = test_step(3, 1.0f);
    adamw_int8_states_reference(a.p.data(), a.grad.data(), DType::kBF16, sa.m(), sa.v(), n, f, s,
                                a.p.data(), DType::kF32);
    detail::cpu_adamw_int8_states_with(isa, 2, b.p.data(), b.grad.data(), DType::kBF16, sb.m(),
                                       sb.v(), n, f, s, b.p.data(), DType::kF32);
    expect_same_bytes(a.p.data(), b.p.data(), n, 4, "p");
    std::vector<uint16_t> ma(n, 0x3c00), va(n, 0x3800), mb = ma, vb = va;
    adamw_bf16_states_reference(a.p.data(), a.grad.data(), DType::kBF16, ma.data(), va.data(), n, s,
                                a.p.data(), DType::kF32);
    detail::cpu_adamw_bf16_states_with(isa, 2, b.p.data(), b.grad.data(), DType::kBF16, mb.data(),
                                       vb.data(), n, s, b.p.data(), DType::kF32);
    expect_same_bytes(a.p.data(), b.p.data(), n, 4, "p (bf16 states)");
    EXPECT_EQ(ma, mb);
  }
}

TEST(StateAdam, RefusesBadArguments) {
  const Int8StateFormat bad{100, StateCode::kDynamic};
  Params a = make_params(256, DType::kF32, DType::kF32, 1);
  Int8State st = make_int8_state(256, {64, StateCode::kDynamic}, 2);
  const AdamWStep s = test_step(1, 1.0f);
  EXPECT_THROW(cpu_adamw_int8_states(a.p.data(), a.grad.data(), DType::kF32, st.m(), st.v(), 256,
                                     bad, s, nullptr, DType::kF32),
               Error);
  EXPECT_THROW(adamw_int8_states_reference(a.p.data(), a.grad.data(), DType::kF32, st.m(), st.v(),
                                           256, bad, s, nullptr, DType::kF32),
               Error);
  EXPECT_THROW(cpu_adamw_int8_states(a.p.data(), a.grad.data(), DType::kI8, st.m(), st.v(), 256,
                                     {64, StateCode::kDynamic}, s, nullptr, DType::kF32),
               Error);
  std::vector<uint16_t> m(256), v(256);
  EXPECT_THROW(cpu_adamw_bf16_states(a.p.data(), a.grad.data(), DType::kF32, m.data(), v.data(),
                                     256, s, a.out.data(), DType::kU8),
               Error);
  EXPECT_THROW(cpu_adamw_bf16_states(a.p.data(), a.grad.data(), DType::kF32, m.data(), v.data(), -1,
                                     s, nullptr, DType::kF32),
               Error);
  EXPECT_EQ(int8_moment_bytes(1000, 256), 1000 + 4 * 4);
  EXPECT_STREQ(state_dtype_name(StateDType::kI8), "int8");
}

}  // namespace
}  // namespace zs::optim
