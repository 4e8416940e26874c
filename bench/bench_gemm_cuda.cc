// bench_gemm_cuda: our cuBLASLt GEMM wrapper (nn/cuda/gemm.h, the heuristic's first algorithm, as
// the layers use it) against cuBLAS's best algorithm for the shape (every algorithm the heuristic
// offers, timed, the fastest kept) and cublasGemmEx's default, for the GEMMs of a GPT block.
//
// Method: per shape and dtype, 10 warm-up runs (excluded), then `--reps` timed runs of 20
// back-to-back GEMMs each between CUDA events; the median run is reported. TFLOP/s = 2 m n k
// batch / time. fp32 accumulation everywhere (CUBLAS_COMPUTE_32F), C in fp32.
//
//   bench_gemm_cuda [--tokens 8192] [--width 768] [--dtype bf16|fp16|fp32] [--reps 15]
//
// Without a CUDA device it prints "no CUDA device" and exits 0.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/cuda/cuda_allocator.h"
#include "device/cuda/cuda_error.h"
#include "device/cuda/cuda_probe.h"
#include "nn/cuda/gemm.h"

namespace {

namespace po = boost::program_options;
using zs::nn::gpu::CublasContext;
using zs::nn::gpu::CudaGemm;
using zs::nn::gpu::CudaGemmDesc;

struct Shape {
  const char* name;
  int64_t m, n, k;
  bool trans_b;
};

constexpr int kInner = 20;

// Median over reps of the per-GEMM time (ms) of `fn` run kInner times between events.
template <typename F>
double median_ms(F&& fn, int reps, cudaStream_t s) {
  for (int i = 0; i < 10; ++i) fn();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, s);
    for (int i = 0; i < kInner; ++i) fn();
    cudaEventRecord(b, s);
    zs::cuda_check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    t.push_back(ms / kInner);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

cudaDataType_t cuda_type(zs::DType dt) {
  return dt == zs::DType::kBF16 ? CUDA_R_16BF : dt == zs::DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

int run(int argc, char** argv) {
  int64_t tokens = 8192, width = 768;
  int reps = 15;
  std::string dtype_name = "bf16";
  po::options_description opts("bench_gemm_cuda options");
  opts.add_options()("help", "this text")("tokens", po::value(&tokens)->default_value(tokens),
                                          "B*T rows of the activations")(
      "width", po::value(&width)->default_value(width), "model width C")(
      "dtype", po::value(&dtype_name)->default_value(dtype_name), "GEMM inputs: bf16, fp16, fp32")(
      "reps", po::value(&reps)->default_value(reps), "timed runs per shape (median reported)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    zs::fail(zs::ErrorCode::kInvalidArgument, "{}", e.what());
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  const zs::DType dt = zs::parse_dtype(dtype_name);
  ZS_CHECK(tokens > 0 && width > 0 && reps > 0, zs::ErrorCode::kInvalidArgument,
           "--tokens, --width and --reps must be positive");
  if (zs::cuda_device_count() == 0) {
    std::printf("no CUDA device: nothing to measure\n");
    return 0;
  }
  const int dev = zs::select_local_device();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, dev);
  std::printf("# device %s, CUDA runtime %s, inputs %s, fp32 accumulate, C fp32\n", prop.name,
              zs::cuda_runtime_version().c_str(), std::string(zs::dtype_name(dt)).c_str());
  std::printf("# median of %d runs x %d GEMMs after 10 warm-up runs\n", reps, kInner);

  const int64_t C = width, BT = tokens;
  const std::vector<Shape> shapes = {
      {"qkv fwd   (BT,C)x(C,3C)", BT, 3 * C, C, true},
      {"attn proj (BT,C)x(C,C)", BT, C, C, true},
      {"fc1 fwd   (BT,C)x(C,4C)", BT, 4 * C, C, true},
      {"fc2 fwd   (BT,4C)x(4C,C)", BT, C, 4 * C, true},
      {"fc1 dW    (4C,BT)x(BT,C)", 4 * C, C, BT, false},
      {"lm head   (BT,C)x(C,V)", BT, 50304, C, true},
  };
  zs::CudaCachingAllocator alloc(dev);
  CublasContext ctx(alloc, nullptr);
  cudaStream_t s;
  zs::cuda_check(cudaStreamCreate(&s), "cudaStreamCreate");
  cublasSetStream(ctx.blas(), s);

  std::printf("%-26s %6s %6s %6s | %9s %9s %9s | %5s %s\n", "shape", "m", "n", "k", "ours",
              "best-lt", "gemmEx", "algos", "TFLOP/s");
  for (const Shape& sh : shapes) {
    CudaGemmDesc d;
    d.m = sh.m;
    d.n = sh.n;
    d.k = sh.k;
    d.trans_b = sh.trans_b;
    d.dtype = dt;
    CudaGemm g(ctx, d, 16);
    const size_t e = zs::dtype_size(dt);
    zs::Buffer a(sh.m * sh.k * e, zs::MemCategory::kOther, nullptr, &alloc);
    zs::Buffer b(sh.k * sh.n * e, zs::MemCategory::kOther, nullptr, &alloc);
    zs::Buffer c(sh.m * sh.n * 4, zs::MemCategory::kOther, nullptr, &alloc);
    auto ours = [&] { g.run(a.data(), b.data(), c.data(), s); };
    const double t_ours = median_ms(ours, reps, s);
    double t_best = t_ours;
    for (int i = 1; i < g.num_algos(); ++i) {
      g.select(i);
      t_best = std::min(t_best, median_ms(ours, reps, s));
    }
    g.select(0);
    // cublasGemmEx, the same row-major trick as the wrapper (its A = our B).
    const float one = 1.0f, zero = 0.0f;
    auto ex = [&] {
      cublasGemmEx(ctx.blas(), sh.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
                   static_cast<int>(sh.n), static_cast<int>(sh.m), static_cast<int>(sh.k), &one,
                   b.data(), cuda_type(dt), static_cast<int>(sh.trans_b ? sh.k : sh.n), a.data(),
                   cuda_type(dt), static_cast<int>(sh.k), &zero, c.data(), CUDA_R_32F,
                   static_cast<int>(sh.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
    const double t_ex = median_ms(ex, reps, s);
    const double tf = 2.0 * sh.m * sh.n * sh.k * 1e-9;
    std::printf("%-26s %6lld %6lld %6lld | %9.1f %9.1f %9.1f | %5d (ours %.0f%% of best)\n",
                sh.name, static_cast<long long>(sh.m), static_cast<long long>(sh.n),
                static_cast<long long>(sh.k), tf / t_ours, tf / t_best, tf / t_ex, g.num_algos(),
                100.0 * t_best / t_ours);
  }
  cudaStreamDestroy(s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const zs::Error& e) {
    std::fprintf(stderr, "bench_gemm_cuda: %s\n", e.what());
    return 1;
  }
}
