// The cuBLASLt GEMM wrapper against a double-precision reference on the dtype-rounded inputs
// (every transpose, batch, bias, accumulate, fp32/bf16/fp16), and the GPU attention core against
// the CPU nn::Attention. Skips without a device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/convert.h"
#include "nn/attention.h"
#include "nn/cuda/attention.h"
#include "nn/cuda/gemm.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

using test::check_close;
using test::DeviceArray;
using test::random_floats;

// Host bytes of `x` in dt, and x rounded through dt.
std::vector<uint8_t> to_dtype(const std::vector<float>& x, DType dt, std::vector<float>* rounded) {
  std::vector<uint8_t> out(x.size() * dtype_size(dt));
  rounded->resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    store_from_fp32(out.data(), dt, i, x[i]);
    (*rounded)[i] = load_as_fp32(out.data(), dt, i);
  }
  return out;
}

void check_gemm(nn::gpu::CublasContext& ctx, nn::gpu::CudaGemmDesc d) {
  const std::string what = std::string("gemm ") + std::string(dtype_name(d.dtype)) +
                           (d.trans_a ? " At" : " A") + (d.trans_b ? " Bt" : " B") +
                           (d.bias ? " +bias" : "") + (d.accumulate ? " +=" : "");
  const int64_t M = d.m, N = d.n, K = d.k, nb = d.batch;
  std::vector<float> a32 = random_floats(nb * M * K, 71), b32 = random_floats(nb * K * N, 72);
  std::vector<float> bias = random_floats(N, 73), c0 = random_floats(nb * M * N, 74);
  std::vector<float> ar, br;
  const auto ab = to_dtype(a32, d.dtype, &ar), bb = to_dtype(b32, d.dtype, &br);
  std::vector<float> want(nb * M * N);
  double max_dot = 0;  // scale of the products, for the tolerance
  for (int64_t q = 0; q < nb; ++q)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double x = d.trans_a ? ar[q * M * K + k * M + i] : ar[q * M * K + i * K + k];
          const double y = d.trans_b ? br[q * K * N + j * K + k] : br[q * K * N + k * N + j];
          acc += x * y;
          mag += std::fabs(x * y);
        }
        max_dot = std::max(max_dot, mag);
        double r = d.alpha * acc + (d.bias ? bias[j] : 0.0);
        if (d.accumulate) r += c0[q * M * N + i * N + j];
        want[q * M * N + i * N + j] = static_cast<float>(r);
      }
  DeviceArray<uint8_t> ga(ab), gb(bb);
  DeviceArray<float> gc(c0), gbias(bias);
  nn::gpu::CudaGemm g(ctx, d);
  g.run(ga.get(), gb.get(), gc.get(), nullptr, d.bias ? gbias.get() : nullptr);
  // fp32 accumulation of exact products: error ~ K * 2^-24 * sum |x y|.
  check_close(what.c_str(), gc.download(), want, 1e-6 * K * max_dot, 0);
}

TEST(CudaGemm, EveryLayoutAndDtype) {
  ZS_REQUIRE_CUDA();
  nn::gpu::CublasContext ctx(test::device_alloc(), nullptr);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        nn::gpu::CudaGemmDesc d;
        d.batch = 3;
        d.m = 37;
        d.n = 56;
        d.k = 72;
        d.trans_a = ta;
        d.trans_b = tb;
        d.dtype = dt;
        d.alpha = 0.5f;
        check_gemm(ctx, d);
        d.batch = 1;
        d.bias = true;
        d.accumulate = true;
        check_gemm(ctx, d);
      }
}

TEST(CudaGemm, RejectsBadDescriptors) {
  ZS_REQUIRE_CUDA();
  nn::gpu::CublasContext ctx(test::device_alloc(), nullptr);
  nn::gpu::CudaGemmDesc d;
  d.m = 0;
  d.n = d.k = 8;
  EXPECT_THROW(nn::gpu::CudaGemm(ctx, d), Error);
  d.m = 8;
  d.dtype = DType::kI8;
  EXPECT_THROW(nn::gpu::CudaGemm(ctx, d), Error);
}

// GPU attention (fp32 and bf16 GEMM inputs) against the CPU attention in fp32.
TEST(CudaAttention, MatchesCpuForwardBackward) {
  ZS_REQUIRE_CUDA();
  const int B = 2, T = 40, C = 64, H = 4, hd = C / H;
  const int64_t BT = static_cast<int64_t>(B) * T, BHT = static_cast<int64_t>(B) * H * T;
  auto qkv = random_floats(BT * 3 * C, 81), dout = random_floats(BT * C, 82);
  MemoryTracker tracker;
  // CPU reference, fp32.
  std::vector<float> q(BHT * hd), k(BHT * hd), v(BHT * hd), p(BHT * T), s(BHT * T), o(BHT * hd),
      dom(BHT * hd), dq(BHT * hd), dk(BHT * hd), dv(BHT * hd), out(BT * C), dqkv(BT * 3 * C);
  nn::Attention cpu(B, T, C, H, DType::kF32, &tracker);
  nn::AttentionActs ca{q.data(), k.data(), v.data(), p.data(), p.data()};
  nn::AttentionWork cw{s.data(), o.data(), dom.data(), nullptr, dq.data(), dk.data(), dv.data()};
  cpu.forward(qkv.data(), ca, cw, out.data());
  cpu.backward(dout.data(), ca, cw, dqkv.data());

  nn::gpu::CublasContext ctx(test::device_alloc(), nullptr);
  for (DType mm : {DType::kF32, DType::kBF16}) {
    const size_t e = dtype_size(mm);
    DeviceArray<float> gqkv(qkv), gdout(dout), gp(BHT * T), gs(BHT * T), go(BHT * hd),
        gdq(BHT * hd), gdk(BHT * hd), gdv(BHT * hd), gdqkv(BT * 3 * C), gout32(BT * C);
    DeviceArray<uint8_t> gq(BHT * hd * e), gk(BHT * hd * e), gv(BHT * hd * e), gpm(BHT * T * e),
        gdom(BHT * hd * e), gdsm(BHT * T * e), gout(BT * C * e);
    nn::gpu::CudaAttention att(ctx, B, T, C, H, mm);
    nn::gpu::AttentionActs a{gq.get(), gk.get(), gv.get(), gp.get(), gpm.get()};
    nn::gpu::AttentionWork w{gs.get(),  go.get(),  gdom.get(), gdsm.get(),
                             gdq.get(), gdk.get(), gdv.get()};
    att.forward(gqkv.get(), a, w, gout.get(), nullptr);
    att.backward(gdout.get(), a, w, gdqkv.get(), nullptr);
    std::vector<float> got_out(BT * C);
    const auto raw = gout.download();
    for (int64_t i = 0; i < BT * C; ++i) got_out[i] = load_as_fp32(raw.data(), mm, i);
    const bool f32 = mm == DType::kF32;
    const std::string tag = std::string(" ") + std::string(dtype_name(mm));
    check_close(("attention out" + tag).c_str(), got_out, out, f32 ? 1e-5 : 2e-2,
                f32 ? 1e-4 : 2e-2);
    check_close(("attention dqkv" + tag).c_str(), gdqkv.download(), dqkv, f32 ? 1e-5 : 3e-2,
                f32 ? 1e-4 : 3e-2);
  }
}

}  // namespace
}  // namespace zs
