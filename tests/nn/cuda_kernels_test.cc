// Each nn/cuda kernel against the CPU implementation (nn/kernels.h, optim/) on the same inputs,
// within the dtype's tolerance; AdamW bit for bit against optim::adamw_reference. Every test
// prints the max difference. All skip without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/convert.h"
#include "nn/cuda/kernels.h"
#include "nn/kernels.h"
#include "optim/adamw.h"
#include "optim/clip.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

using test::check_close;
using test::DeviceArray;
using test::random_floats;

std::vector<float> widen(const std::vector<uint16_t>& h, DType dt) {
  std::vector<float> out(h.size());
  for (size_t i = 0; i < h.size(); ++i) out[i] = load_as_fp32(h.data(), dt, i);
  return out;
}

TEST(CudaKernels, LayerNormForwardBackward) {
  ZS_REQUIRE_CUDA();
  const int64_t M = 70;
  const int C = 768;
  auto x = random_floats(M * C, 1, -2.0f, 3.0f), w = random_floats(C, 2), b = random_floats(C, 3);
  auto dy = random_floats(M * C, 4), dx0 = random_floats(M * C, 5);
  auto dw0 = random_floats(C, 6), db0 = random_floats(C, 7);
  std::vector<float> out(M * C), mean(M), rstd(M);
  nn::layernorm_forward(x.data(), w.data(), b.data(), M, C, out.data(), DType::kF32, mean.data(),
                        rstd.data());
  std::vector<uint16_t> out_bf(M * C);
  std::vector<float> mean2(M), rstd2(M);
  nn::layernorm_forward(x.data(), w.data(), b.data(), M, C, out_bf.data(), DType::kBF16,
                        mean2.data(), rstd2.data());
  auto dx = dx0, dw = dw0, db = db0;
  nn::layernorm_backward(x.data(), w.data(), mean.data(), rstd.data(), dy.data(), M, C, dx.data(),
                         dw.data(), db.data());

  DeviceArray<float> gx(x), gw(w), gb(b), gout(M * C), gmean(M), grstd(M), gdy(dy), gdx(dx0),
      gdw(dw0), gdb(db0);
  DeviceArray<uint16_t> gout_bf(M * C);
  cuda_check(nn::gpu::layernorm_forward(gx.get(), gw.get(), gb.get(), M, C, gout.get(), DType::kF32,
                                        gmean.get(), grstd.get(), nullptr),
             "layernorm_forward");
  check_close("layernorm fwd fp32", gout.download(), out, 1e-5, 1e-5);
  check_close("layernorm mean", gmean.download(), mean, 1e-6, 1e-6);
  check_close("layernorm rstd", grstd.download(), rstd, 1e-6, 1e-5);
  cuda_check(nn::gpu::layernorm_forward(gx.get(), gw.get(), gb.get(), M, C, gout_bf.get(),
                                        DType::kBF16, gmean.get(), grstd.get(), nullptr),
             "layernorm_forward bf16");
  // One bf16 ulp (2^-8 relative) where the fp32 values straddle a rounding boundary.
  check_close("layernorm fwd bf16", widen(gout_bf.download(), DType::kBF16),
              widen(out_bf, DType::kBF16), 1e-6, 8e-3);
  DeviceArray<float> scratch(nn::gpu::layernorm_backward_scratch_floats(M, C));
  cuda_check(
      nn::gpu::layernorm_backward(gx.get(), gw.get(), gmean.get(), grstd.get(), gdy.get(), M, C,
                                  gdx.get(), gdw.get(), gdb.get(), scratch.get(), nullptr),
      "layernorm_backward");
  check_close("layernorm dx", gdx.download(), dx, 1e-5, 1e-4);
  check_close("layernorm dw", gdw.download(), dw, 1e-4, 1e-4);
  check_close("layernorm db", gdb.download(), db, 1e-4, 1e-4);
  EXPECT_EQ(nn::gpu::layernorm_backward(gx.get(), gw.get(), gmean.get(), grstd.get(), gdy.get(), M,
                                        C, gdx.get(), gdw.get(), gdb.get(), nullptr, nullptr),
            cudaErrorInvalidValue);
}

// The parameter gradients' column sums over row chunks: one chunk, a short last chunk, and the
// 64-chunk cap with columns off the 32-wide tile; twice, for the same bits.
TEST(CudaKernels, LayerNormParamGradChunks) {
  ZS_REQUIRE_CUDA();
  for (const auto& [M, C] : {std::pair<int64_t, int>{255, 40}, {1000, 100}, {20'000, 771}}) {
    auto x = random_floats(M * C, 21, -2.0f, 3.0f), w = random_floats(C, 22);
    auto dy = random_floats(M * C, 23), dw0 = random_floats(C, 24), db0 = random_floats(C, 25);
    std::vector<float> mean(M), rstd(M), out(M * C), dx(M * C, 0.0f);
    nn::layernorm_forward(x.data(), w.data(), w.data(), M, C, out.data(), DType::kF32, mean.data(),
                          rstd.data());
    auto dw = dw0, db = db0;
    nn::layernorm_backward(x.data(), w.data(), mean.data(), rstd.data(), dy.data(), M, C, dx.data(),
                           dw.data(), db.data());
    DeviceArray<float> gx(x), gw(w), gmean(mean), grstd(rstd), gdy(dy),
        scratch(nn::gpu::layernorm_backward_scratch_floats(M, C));
    std::vector<float> first_w, first_b;
    for (int run = 0; run < 2; ++run) {
      DeviceArray<float> gdx(std::vector<float>(M * C, 0.0f)), gdw(dw0), gdb(db0);
      cuda_check(
          nn::gpu::layernorm_backward(gx.get(), gw.get(), gmean.get(), grstd.get(), gdy.get(), M, C,
                                      gdx.get(), gdw.get(), gdb.get(), scratch.get(), nullptr),
          "layernorm_backward");
      const auto got_w = gdw.download(), got_b = gdb.download();
      // Sums of up to 20k terms of magnitude ~1 (~140 in all): both orders round in fp32.
      check_close("layernorm dw (chunked)", got_w, dw, 1e-2, 1e-4);
      check_close("layernorm db (chunked)", got_b, db, 1e-2, 1e-4);
      if (run == 0) {
        first_w = got_w;
        first_b = got_b;
      } else {
        EXPECT_EQ(0, std::memcmp(first_w.data(), got_w.data(), got_w.size() * sizeof(float)));
        EXPECT_EQ(0, std::memcmp(first_b.data(), got_b.data(), got_b.size() * sizeof(float)));
      }
    }
  }
}

TEST(CudaKernels, GeluForwardBackward) {
  ZS_REQUIRE_CUDA();
  const int64_t n = 100'003;
  auto x = random_floats(n, 11, -6.0f, 6.0f), dy = random_floats(n, 12);
  std::vector<float> y(n), dx(n);
  nn::gelu_forward(x.data(), y.data(), DType::kF32, n);
  nn::gelu_backward(x.data(), dy.data(), dx.data(), n);
  DeviceArray<float> gx(x), gy(n), gdy(dy), gdx(n);
  cuda_check(nn::gpu::gelu_forward(gx.get(), gy.get(), DType::kF32, n, nullptr), "gelu_forward");
  cuda_check(nn::gpu::gelu_backward(gx.get(), gdy.get(), gdx.get(), n, nullptr), "gelu_backward");
  check_close("gelu fwd", gy.download(), y, 1e-6, 1e-5);
  check_close("gelu bwd", gdx.download(), dx, 1e-6, 1e-5);
}

TEST(CudaKernels, CausalSoftmaxForwardBackward) {
  ZS_REQUIRE_CUDA();
  const int64_t BH = 6;
  const int T = 300;
  auto s = random_floats(BH * T * T, 21, -8.0f, 8.0f), dp = random_floats(BH * T * T, 22);
  std::vector<float> p(BH * T * T), ds(BH * T * T);
  nn::causal_softmax_forward(s.data(), p.data(), BH, T);
  nn::causal_softmax_backward(p.data(), dp.data(), ds.data(), BH, T);
  DeviceArray<float> gs(s), gp(BH * T * T), gdp(dp), gds(BH * T * T);
  DeviceArray<uint16_t> gpm(BH * T * T);
  cuda_check(
      nn::gpu::causal_softmax_forward(gs.get(), gp.get(), gpm.get(), DType::kBF16, BH, T, nullptr),
      "causal_softmax_forward");
  const auto got_p = gp.download();
  check_close("causal softmax fwd", got_p, p, 1e-7, 1e-5);
  check_close("causal softmax fwd (bf16 copy)", widen(gpm.download(), DType::kBF16), got_p, 0,
              4e-3);
  gp.upload(p);  // backward from the CPU's probabilities: compares the backward alone
  cuda_check(nn::gpu::causal_softmax_backward(gp.get(), gdp.get(), gds.get(), nullptr, DType::kF32,
                                              BH, T, nullptr),
             "causal_softmax_backward");
  check_close("causal softmax bwd", gds.download(), ds, 1e-6, 1e-4);
}

TEST(CudaKernels, CrossEntropyForwardBackward) {
  ZS_REQUIRE_CUDA();
  const int64_t M = 48;
  const int V = 1000;  // not a multiple of the block
  auto logits = random_floats(M * V, 31, -10.0f, 10.0f);
  std::vector<int32_t> targets(M);
  for (int64_t i = 0; i < M; ++i) targets[i] = static_cast<int32_t>((i * 7919) % V);
  std::vector<float> probs(M * V), loss(M), dl(M * V);
  nn::cross_entropy_forward(logits.data(), targets.data(), M, V, probs.data(), loss.data());
  nn::cross_entropy_backward(probs.data(), targets.data(), M, V, 1024.0f, dl.data());
  DeviceArray<float> glog(logits), gloss(M);
  DeviceArray<int32_t> gt(targets);
  // probs aliases logits, as the model does.
  cuda_check(
      nn::gpu::cross_entropy_forward(glog.get(), gt.get(), M, V, glog.get(), gloss.get(), nullptr),
      "cross_entropy_forward");
  check_close("cross-entropy probs", glog.download(), probs, 1e-7, 1e-5);
  check_close("cross-entropy row loss", gloss.download(), loss, 1e-5, 1e-5);
  cuda_check(
      nn::gpu::cross_entropy_backward(glog.get(), gt.get(), M, V, 1024.0f, glog.get(), nullptr),
      "cross_entropy_backward");
  check_close("cross-entropy dlogits", glog.download(), dl, 1e-6, 1e-5);
}

TEST(CudaKernels, CastsMatchTheCpuRounding) {
  ZS_REQUIRE_CUDA();
  const int64_t n = 65'537;
  auto x = random_floats(n, 41, -70000.0f, 70000.0f);
  for (int64_t i = 0; i < 100; ++i) x[i] = std::ldexp(x[i], -static_cast<int>(i));  // subnormals
  DeviceArray<float> gx(x), gback(n);
  for (DType dt : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> want(n);
    for (int64_t i = 0; i < n; ++i) store_from_fp32(want.data(), dt, i, x[i]);
    DeviceArray<uint16_t> gh(n);
    cuda_check(nn::gpu::cast(gx.get(), DType::kF32, gh.get(), dt, n, nullptr), "cast to 16");
    const auto got = gh.download();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), n * 2), 0) << dtype_name(dt);
    cuda_check(nn::gpu::cast(gh.get(), dt, gback.get(), DType::kF32, n, nullptr), "cast to 32");
    const auto back = gback.download();
    EXPECT_EQ(std::memcmp(back.data(), widen(want, dt).data(), n * 4), 0) << dtype_name(dt);
  }
}

// [Note: AdamW operation order]: the device kernel gives the CPU reference's bits.
TEST(CudaKernels, AdamWBitwiseAgainstReference) {
  ZS_REQUIRE_CUDA();
  const int64_t n = 100'003;
  optim::AdamWConfig cfg;
  for (DType gdt : {DType::kF32, DType::kBF16, DType::kF16})
    for (DType odt : {DType::kF32, DType::kBF16}) {
      auto p = random_floats(n, 51), m = random_floats(n, 52, -0.01f, 0.01f);
      auto v = random_floats(n, 53, 0.0f, 1e-4f), g32 = random_floats(n, 54, -0.5f, 0.5f);
      std::vector<uint16_t> g16(n);
      for (int64_t i = 0; i < n; ++i) store_from_fp32(g16.data(), gdt, i, g32[i]);
      DeviceArray<float> gp(p), gm(m), gv(v), gg32(g32), gout32(n);
      DeviceArray<uint16_t> gg16(g16), gout16(n);
      const void* dgrad = gdt == DType::kF32 ? static_cast<void*>(gg32.get()) : gg16.get();
      void* dout = odt == DType::kF32 ? static_cast<void*>(gout32.get()) : gout16.get();
      std::vector<float> out32(n);
      std::vector<uint16_t> out16(n);
      void* hout = odt == DType::kF32 ? static_cast<void*>(out32.data()) : out16.data();
      const void* hgrad = gdt == DType::kF32 ? static_cast<void*>(g32.data()) : g16.data();
      for (int t = 1; t <= 3; ++t) {
        const auto s = optim::make_adamw_step(cfg, 3e-4f * t, t, 0.37f, t != 2);
        optim::adamw_reference(p.data(), hgrad, gdt, m.data(), v.data(), n, s, hout, odt);
        cuda_check(
            nn::gpu::adamw(gp.get(), dgrad, gdt, gm.get(), gv.get(), n, s, dout, odt, nullptr),
            "adamw");
      }
      SCOPED_TRACE(std::string(dtype_name(gdt)) + " grads -> " + std::string(dtype_name(odt)));
      EXPECT_EQ(std::memcmp(gp.download().data(), p.data(), n * 4), 0) << "p";
      EXPECT_EQ(std::memcmp(gm.download().data(), m.data(), n * 4), 0) << "m";
      EXPECT_EQ(std::memcmp(gv.download().data(), v.data(), n * 4), 0) << "v";
      if (odt == DType::kF32) {
        EXPECT_EQ(std::memcmp(gout32.download().data(), out32.data(), n * 4), 0) << "out";
      } else {
        EXPECT_EQ(std::memcmp(gout16.download().data(), out16.data(), n * 2), 0) << "out";
      }
    }
}

TEST(CudaKernels, GradStatsMatchSpanStats) {
  ZS_REQUIRE_CUDA();
  const int64_t n = 1'000'003;
  auto g = random_floats(n, 61, -3.0f, 3.0f);
  const optim::SpanStats want = optim::span_stats(g.data(), DType::kF32, n);
  DeviceArray<float> gg(g);
  DeviceArray<double> scratch(nn::gpu::kGradStatsBlocks), sum(1);
  DeviceArray<int> bad(1);
  cuda_check(nn::gpu::grad_stats(gg.get(), DType::kF32, n, scratch.get(), sum.get(), bad.get(),
                                 false, nullptr),
             "grad_stats");
  const double got = sum.download()[0];
  std::printf("sum of squares gpu %.17g cpu %.17g\n", got, want.sum_squares);
  EXPECT_NEAR(got, want.sum_squares, 1e-12 * want.sum_squares);
  EXPECT_EQ(bad.download()[0], 0);
  // Accumulating a second span with an inf: sums add, the flag turns on.
  g[12345] = INFINITY;
  gg.upload(g);
  cuda_check(nn::gpu::grad_stats(gg.get(), DType::kF32, 1000, scratch.get(), sum.get(), bad.get(),
                                 true, nullptr),
             "grad_stats accumulate");
  EXPECT_EQ(bad.download()[0], 0);  // the inf is past the first 1000 elements
  cuda_check(nn::gpu::grad_stats(gg.get(), DType::kF32, n, scratch.get(), sum.get(), bad.get(),
                                 true, nullptr),
             "grad_stats accumulate inf");
  EXPECT_EQ(bad.download()[0], 1);
}

}  // namespace
}  // namespace zs
