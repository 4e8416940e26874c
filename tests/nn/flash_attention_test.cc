// The fused causal attention (nn/flash_attention.h) against the GEMM attention (nn/attention.h)
// and a double reference with finite differences; the same bits at thread counts 1, 2, 3 and at
// every ISA cap (the test re-runs itself under ZS_MAX_ISA=avx2 and scalar and compares a hash of
// the outputs).
#include "nn/flash_attention.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/error.h"
#include "nn/attention.h"
#include "tests/nn/layer_test_helpers.h"

namespace zs::nn {
namespace {

using layer_test::randf;
using layer_test::VecD;
using layer_test::VecF;

struct Shape {
  int B, T, H, KV, hd;
  int D() const { return H * hd; }
  int Q() const { return D() + 2 * KV * hd; }
  int64_t rows() const { return static_cast<int64_t>(B) * T; }
};

struct Outputs {
  VecF out, lse, dqkv;
};

// Forward and backward of the fused kernel with dout = r; outputs in fp32 whatever mm is.
Outputs run_flash(const Shape& s, const VecF& qkv, const VecF& r, int threads,
                  DType mm = DType::kF32) {
  FlashAttention fa(s.B, s.T, s.D(), s.H, s.KV, mm, threads);
  const size_t e = dtype_size(mm);
  const int64_t nq = s.rows() * s.D(), nkv = s.rows() * s.KV * s.hd;
  const int64_t nt = static_cast<int64_t>(s.B) * s.KV * s.hd * FlashAttention::padded_context(s.T);
  std::vector<char> q(nq * e), k(nkv * e), v(nkv * e), kt(nt * e), vt(nt * e), out(nq * e);
  std::vector<float> tiles(FlashAttention::tiles_bytes(s.hd, threads) / 4 + 16);
  float* t = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(tiles.data()) + 63) / 64 * 64);
  Outputs res{VecF(nq), VecF(s.rows() * s.H), VecF(qkv.size(), NAN)};
  FlashAttentionActs acts{q.data(), k.data(), v.data(), kt.data(), vt.data(), res.lse.data()};
  fa.forward(qkv.data(), acts, t, out.data());
  fa.backward(r.data(), acts, out.data(), t, res.dqkv.data());
  if (mm == DType::kF32) {
    std::memcpy(res.out.data(), out.data(), nq * sizeof(float));
  } else {
    const auto* o = reinterpret_cast<const uint16_t*>(out.data());
    for (int64_t i = 0; i < nq; ++i) {
      const uint32_t u = static_cast<uint32_t>(o[i]) << 16;
      std::memcpy(&res.out[i], &u, 4);
    }
  }
  return res;
}

// The GEMM attention on the same data.
Outputs run_gemm(const Shape& s, const VecF& qkv, const VecF& r, DType mm = DType::kF32) {
  Attention attn(s.B, s.T, s.D(), s.H, s.KV, mm, nullptr);
  const int64_t bhtt = static_cast<int64_t>(s.B) * s.H * s.T * s.T, m = s.rows() * s.D();
  const size_t e = dtype_size(mm);
  std::vector<char> q(m * e), k(m * e), v(m * e), pm(bhtt * e), dom(m * e), dsm(bhtt * e),
      out(m * e);
  VecF p(bhtt), sc(bhtt), o(m), dq(m), dk(m), dv(m);
  AttentionActs acts{q.data(), k.data(), v.data(), p.data(),
                     mm == DType::kF32 ? static_cast<void*>(p.data()) : pm.data()};
  AttentionWork work{sc.data(), o.data(), dom.data(), dsm.data(), dq.data(), dk.data(), dv.data()};
  Outputs res{VecF(m), {}, VecF(qkv.size())};
  attn.forward(qkv.data(), acts, work, out.data());
  attn.backward(r.data(), acts, work, res.dqkv.data());
  if (mm == DType::kF32) {
    std::memcpy(res.out.data(), out.data(), m * sizeof(float));
  } else {
    const auto* x = reinterpret_cast<const uint16_t*>(out.data());
    for (int64_t i = 0; i < m; ++i) {
      const uint32_t u = static_cast<uint32_t>(x[i]) << 16;
      std::memcpy(&res.out[i], &u, 4);
    }
  }
  return res;
}

// max |a - b| / max(1, max |b|), printed.
double rel_diff(const char* what, const VecF& a, const VecF& b) {
  EXPECT_EQ(a.size(), b.size());
  double mx = 0.0, scale = 1.0;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i)
    mx = std::max(mx, static_cast<double>(std::fabs(a[i] - b[i])));
  std::printf("  %-10s n=%-7zu max abs diff %.3e (scale %.3g)\n", what, a.size(), mx, scale);
  return mx / scale;
}

bool same_bits(const VecF& a, const VecF& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// T off the 64-row tile, T = 1, one full tile, grouped-query heads (8 over 2), head dimensions
// 32, 64, 80, 128, several sequences.
const Shape kShapes[] = {{2, 100, 4, 4, 64}, {1, 1, 2, 1, 64},  {3, 64, 2, 2, 32},
                         {2, 130, 8, 2, 64}, {1, 70, 2, 2, 80}, {1, 129, 2, 1, 128},
                         {2, 200, 4, 2, 32}};

// fp32: within 5e-6 of the GEMM attention relative to the largest magnitude (both are fp32 sums
// of at most T products in other orders; observed at most 1e-6).
TEST(FlashAttention, MatchesGemmAttentionFp32) {
  for (const Shape& s : kShapes) {
    std::printf("B %d T %d H %d KV %d hd %d\n", s.B, s.T, s.H, s.KV, s.hd);
    const VecF qkv = randf(s.rows() * s.Q(), 11 + s.T), r = randf(s.rows() * s.D(), 12 + s.T);
    const Outputs f = run_flash(s, qkv, r, 2), g = run_gemm(s, qkv, r);
    EXPECT_LE(rel_diff("out", f.out, g.out), 5e-6);
    EXPECT_LE(rel_diff("dqkv", f.dqkv, g.dqkv), 5e-6);
  }
}

// bf16 mm (q, k, v and the output stored in bf16, fp32 arithmetic): within bf16 rounding of the
// GEMM attention's bf16 path.
TEST(FlashAttention, MatchesGemmAttentionBf16) {
  for (const Shape& s : {kShapes[0], kShapes[3]}) {
    std::printf("B %d T %d H %d KV %d hd %d\n", s.B, s.T, s.H, s.KV, s.hd);
    const VecF qkv = randf(s.rows() * s.Q(), 21), r = randf(s.rows() * s.D(), 22);
    const Outputs f = run_flash(s, qkv, r, 2, DType::kBF16), g = run_gemm(s, qkv, r, DType::kBF16);
    EXPECT_LE(rel_diff("out", f.out, g.out), 2e-2);
    EXPECT_LE(rel_diff("dqkv", f.dqkv, g.dqkv), 5e-2);
  }
}

TEST(FlashAttention, SameBitsAtEveryThreadCount) {
  for (const Shape& s : {kShapes[0], kShapes[3], kShapes[6]}) {
    const VecF qkv = randf(s.rows() * s.Q(), 31), r = randf(s.rows() * s.D(), 32);
    const Outputs one = run_flash(s, qkv, r, 1);
    for (int threads : {2, 3}) {
      const Outputs x = run_flash(s, qkv, r, threads);
      EXPECT_TRUE(same_bits(one.out, x.out)) << threads << " threads, T " << s.T;
      EXPECT_TRUE(same_bits(one.lse, x.lse)) << threads << " threads, T " << s.T;
      EXPECT_TRUE(same_bits(one.dqkv, x.dqkv)) << threads << " threads, T " << s.T;
    }
  }
}

// FNV-1a over the bits of every output of every shape, at this process's ISA level.
uint64_t outputs_hash() {
  uint64_t h = 1469598103934665603ull;
  auto add = [&](const VecF& v) {
    const auto* p = reinterpret_cast<const unsigned char*>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  for (const Shape& s : kShapes)
    for (DType mm : {DType::kF32, DType::kBF16}) {
      const VecF qkv = randf(s.rows() * s.Q(), 41), r = randf(s.rows() * s.D(), 42);
      const Outputs x = run_flash(s, qkv, r, 2, mm);
      add(x.out);
      add(x.lse);
      add(x.dqkv);
    }
  return h;
}

// Prints the hash for SameBitsAtEveryIsa's child processes.
TEST(FlashAttention, PrintOutputsHash) {
  std::printf("flash outputs hash %016llx at %s\n", static_cast<unsigned long long>(outputs_hash()),
              std::string(simd_level_name(active_simd_level())).c_str());
}

// This binary again under each ISA cap: the same hash as this process's.
TEST(FlashAttention, SameBitsAtEveryIsa) {
  char here[32];
  std::snprintf(here, sizeof here, "%016llx", static_cast<unsigned long long>(outputs_hash()));
  char self[4096] = {};
  ASSERT_GT(readlink("/proc/self/exe", self, sizeof self - 1), 0);
  for (const char* cap : {"avx2", "scalar"}) {
    const std::string cmd = std::string("ZS_MAX_ISA=") + cap + " '" + self +
                            "' --gtest_filter=FlashAttention.PrintOutputsHash";
    FILE* f = popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    std::string text;
    char buf[256];
    while (std::fgets(buf, sizeof buf, f) != nullptr) text += buf;
    pclose(f);
    const size_t at = text.find("flash outputs hash ");
    ASSERT_NE(at, std::string::npos) << text;
    const std::string line = text.substr(at + 19, text.find('\n', at) - at - 19);
    std::printf("  ZS_MAX_ISA=%-6s %s\n", cap, line.c_str());
    EXPECT_EQ(text.substr(at + 19, 16), here) << "ZS_MAX_ISA=" << cap;
  }
}

// Double reference: qkv [B*T, D + 2 KV hd] -> out [B*T, D], causal, query head h on key/value head
// h / (H / KV).
VecD ref_attention(const Shape& s, const VecD& qkv) {
  VecD out(s.rows() * s.D());
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hd));
  const int Q = s.Q(), D = s.D();
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.H; ++h) {
      const int g = h / (s.H / s.KV);
      for (int i = 0; i < s.T; ++i) {
        const double* q = &qkv[(b * s.T + i) * Q + h * s.hd];
        VecD p(i + 1);
        double mx = -1e300, sum = 0.0;
        for (int j = 0; j <= i; ++j) {
          const double* k = &qkv[(b * s.T + j) * Q + D + g * s.hd];
          double d = 0.0;
          for (int e = 0; e < s.hd; ++e) d += q[e] * k[e];
          mx = std::max(mx, p[j] = d * scale);
        }
        for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        for (int e = 0; e < s.hd; ++e) {
          double o = 0.0;
          for (int j = 0; j <= i; ++j)
            o += p[j] / sum * qkv[(b * s.T + j) * Q + D + (s.KV + g) * s.hd + e];
          out[(b * s.T + i) * D + h * s.hd + e] = o;
        }
      }
    }
  return out;
}

// Forward against the double reference and dqkv against finite differences of <out, r>, on two
// query tiles (T = 67) with grouped heads.
TEST(FlashAttention, GradientAgainstFiniteDifferences) {
  const Shape s{1, 67, 2, 1, 8};
  const VecF qkv = randf(s.rows() * s.Q(), 51), r = randf(s.rows() * s.D(), 52);
  const Outputs f = run_flash(s, qkv, r, 2);
  layer_test::expect_close("forward", f.out, ref_attention(s, layer_test::to_d(qkv)), 1e-6);
  auto loss = [&](const VecD& x) { return layer_test::dot(ref_attention(s, x), r); };
  layer_test::expect_close("dqkv", f.dqkv, layer_test::numeric_grad(loss, layer_test::to_d(qkv)),
                           1e-5);
}

TEST(FlashAttention, RefusesBadShapes) {
  EXPECT_THROW(FlashAttention(1, 8, 64, 4, 3, DType::kF32, 1), Error);  // 4 % 3 != 0
  EXPECT_THROW(FlashAttention(1, 8, 66, 4, 4, DType::kF32, 1), Error);  // 66 % 4 != 0
  EXPECT_THROW(FlashAttention(1, 8, 64, 4, 4, DType::kF16, 1), Error);
  EXPECT_THROW(FlashAttention(1, 8, 64, 4, 4, DType::kF32, 0), Error);
}

}  // namespace
}  // namespace zs::nn
