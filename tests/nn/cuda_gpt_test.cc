// The GPU GPT (nn::CudaGptModel): the shared model suite (tests/nn/gpt_model_typed_test.h)
// instantiated through CudaGptRunner, then the comparisons with the CPU one (nn::GptModel), driven
// unit by unit with the same parameter values on both: the loss and every parameter gradient
// (fp32 at fp32 tolerance, bf16/fp16 at theirs), an SGD loss curve, inference logits; no device
// allocation inside steps (the caching allocator's counters); views of another dtype refused; the
// memory planner's CUDA activation figure against the model's allocations; and the kernels the
// GPT added (embedding forward/backward, residual add, bias gradient) against plain CPU loops.
// Skips without a device ("no CUDA device"), except the pure host test of the embedding-gradient
// index.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/convert.h"
#include "core/error.h"
#include "device/cuda/cuda_allocator.h"
#include "models/gpt/cuda/gpt_cuda.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "nn/cuda/kernels.h"
#include "nn/kernels.h"
#include "tests/cuda_test_util.h"
#include "tests/nn/gpt_model_typed_test.h"
#include "unit/unit_harness.h"

namespace zs {
namespace {

using nn::CudaGptModel;
using nn::GptConfig;
using nn::GptModel;
using test::check_close;
using test::DeviceArray;
using test::random_floats;

GptConfig small_config(DType dt = DType::kF32) {
  GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 4;
  c.arch.width = 64;
  c.arch.context = 32;
  c.arch.vocab = 256;
  c.run.batch = 2;
  c.run.threads = 2;
  c.run.compute_dtype = dt;
  return c;
}

std::vector<int32_t> random_tokens(const GptConfig& c, int micro_batches, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

void perturb(UnitHarness& h, uint32_t seed, float std) {
  nn::testing::perturb_params(h, seed, std);
}

class Stream {
 public:
  Stream() { cuda_check(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "stream"); }
  ~Stream() { cudaStreamDestroy(s_); }
  cudaStream_t get() const { return s_; }
  void sync() const { cuda_check(cudaStreamSynchronize(s_), "cudaStreamSynchronize"); }

 private:
  cudaStream_t s_ = nullptr;
};

// The engine's CUDA contract for one rank without sharding: device parameters in the compute
// dtype (copied from a CPU UnitHarness's fp32 master values), device fp32 gradients zeroed on the
// stream before each backward.
class DeviceHarness {
 public:
  DeviceHarness(CudaGptModel& model, UnitHarness& host, DType dt)
      : model_(model), host_(host), dt_(dt) {
    units_.resize(model.num_units());
    for (size_t u = 0; u < units_.size(); ++u) {
      UnitState& st = units_[u];
      st.specs = model.unit(u).param_specs();
      std::vector<float*> spans;
      std::vector<int64_t> numels;
      for (const ParamSpec& s : st.specs) {
        const size_t n = static_cast<size_t>(s.numel());
        st.params.push_back(std::make_unique<DeviceArray<uint8_t>>(n * dtype_size(dt)));
        st.grads.push_back(std::make_unique<DeviceArray<float>>(n));
        spans.push_back(st.grads.back()->get());
        numels.push_back(s.numel());
      }
      st.gv = GradViews(spans, numels);
    }
    upload();
  }

  // Copies the host harness's master values, converted to the compute dtype.
  void upload() {
    for (size_t u = 0; u < units_.size(); ++u) {
      UnitState& st = units_[u];
      st.views.clear();
      for (size_t i = 0; i < st.specs.size(); ++i) {
        const std::vector<float>& m = host_.master(u, i);
        std::vector<uint8_t> bytes(m.size() * dtype_size(dt_));
        convert(m.data(), DType::kF32, bytes.data(), dt_, m.size());
        st.params[i]->upload(bytes);
        ParamView v;
        v.data = st.params[i]->get();
        v.dtype = dt_;
        v.numel = st.specs[i].numel();
        v.spec = &st.specs[i];
        st.views.push_back(v);
      }
    }
    // cudaMemcpy from pageable memory may return before its DMA lands, and the model's stream
    // does not wait for the legacy stream: finish the copies here.
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  }

  void forward(bool training = true) {
    StepInfo info;
    info.training = training;
    for (size_t u = 0; u < units_.size(); ++u) model_.unit(u).forward(units_[u].views, info);
  }

  void backward(float loss_scale = 1.0f) {
    StepInfo info;
    info.loss_scale = loss_scale;
    for (size_t u = units_.size(); u-- > 0;) {
      UnitState& st = units_[u];
      for (auto& g : st.grads) {
        cuda_check(cudaMemsetAsync(g->get(), 0, g->size() * sizeof(float), model_.stream()),
                   "zero grads");
      }
      st.gv.clear_produced();
      model_.unit(u).backward(st.views, st.gv, info);
      for (size_t i = 0; i < st.gv.size(); ++i) {
        EXPECT_TRUE(st.gv.produced(i)) << "unit " << u << " param " << st.specs[i].name;
        produced_all_ &= st.gv.produced(i);
      }
    }
  }

  // Synchronizes the device (download does).
  std::vector<float> grad(size_t u, size_t i) { return units_[u].grads[i]->download(); }
  size_t num_units() const { return units_.size(); }
  size_t num_params(size_t u) const { return units_[u].specs.size(); }
  const ParamSpec& spec(size_t u, size_t i) const { return units_[u].specs[i]; }
  bool produced_all() const { return produced_all_; }

 private:
  struct UnitState {
    std::vector<ParamSpec> specs;
    std::vector<std::unique_ptr<DeviceArray<uint8_t>>> params;
    std::vector<std::unique_ptr<DeviceArray<float>>> grads;
    std::vector<ParamView> views;
    GradViews gv;
  };
  CudaGptModel& model_;
  UnitHarness& host_;
  DType dt_;
  std::vector<UnitState> units_;
  bool produced_all_ = true;
};

// The Runner of tests/nn/gpt_model_typed_test.h for the CUDA model: fp32 master values on the host
// (a UnitHarness over the model's own specs, never run), parameters and gradients on the device.
class CudaGptRunner {
 public:
  // The GPU multiplies bf16 and fp16 operands natively (fp16 activations), where the CPU runs
  // fp16 products in fp32.
  static constexpr double kBf16LossRel = 2e-2;
  static constexpr double kFp16LossRel = 5e-3;
  static const char* unavailable() { return cuda_device_count() == 0 ? "no CUDA device" : nullptr; }

  CudaGptRunner(const GptConfig& c, uint64_t seed, MemoryTracker* tracker = nullptr)
      : model_(c, stream_.get(), tracker),
        host_(model_, c.run.compute_dtype, seed),
        dev_(model_, host_, c.run.compute_dtype) {}

  CudaGptModel& model() { return model_; }
  std::vector<float>& master(size_t u, size_t i) { return host_.master(u, i); }
  void refresh() { dev_.upload(); }
  void forward(bool training = true) { dev_.forward(training); }
  void backward(float loss_scale = 1.0f) { dev_.backward(loss_scale); }
  std::vector<float> grad(size_t u, size_t i) { return dev_.grad(u, i); }
  bool produced_all() const { return dev_.produced_all(); }
  // UnitHarness::sgd's update with the device gradients.
  void sgd(float lr, float loss_scale = 1.0f) {
    for (size_t u = 0; u < num_units(); ++u)
      for (size_t i = 0; i < num_params(u); ++i) {
        const std::vector<float> g = dev_.grad(u, i);
        std::vector<float>& m = host_.master(u, i);
        for (size_t j = 0; j < m.size(); ++j) m[j] -= lr * g[j] / loss_scale;
      }
    dev_.upload();
  }
  size_t num_units() const { return dev_.num_units(); }
  size_t num_params(size_t u) const { return dev_.num_params(u); }
  const ParamSpec& spec(size_t u, size_t i) const { return dev_.spec(u, i); }

 private:
  Stream stream_;
  CudaGptModel model_;
  UnitHarness host_;
  DeviceHarness dev_;
};

}  // namespace

namespace nn::testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Cuda, GptModelTest, CudaGptRunner);
}  // namespace nn::testing

namespace {

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, std::fabs(static_cast<double>(x)));
  return m;
}

// ||got - want|| / ||want||.
double rel_norm_error(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0.0, n = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double e = static_cast<double>(got[i]) - want[i];
    d += e * e;
    n += static_cast<double>(want[i]) * want[i];
  }
  return n > 0.0 ? std::sqrt(d / n) : std::sqrt(d);
}

struct Tolerance {
  double loss_rel;  // |loss_gpu - loss_cpu| / loss_cpu
  double norm_rel;  // per tensor ||g_gpu - g_cpu|| / ||g_cpu||
  double elem;      // per element |diff| <= elem * (max|g_cpu| + |g_cpu|)
};

// Same parameters, same tokens: CPU and GPU losses and gradients over two micro-batches.
void compare_with_cpu(DType dt, const Tolerance& tol, float loss_scale) {
  const GptConfig c = small_config(dt);
  GptModel cpu(c);
  Stream stream;
  CudaGptModel gpu(c, stream.get());
  ASSERT_EQ(cpu.num_units(), gpu.num_units());
  UnitHarness hc(cpu, dt, 17);
  perturb(hc, 3, 0.05f);
  DeviceHarness hg(gpu, hc, dt);
  const auto tokens = random_tokens(c, 2, 23);
  cpu.set_tokens(tokens);
  gpu.set_tokens(tokens);
  const std::string tag(dtype_name(dt));
  for (int mb = 0; mb < 2; ++mb) {
    cpu.load_micro_batch(mb);
    gpu.load_micro_batch(mb);
    hc.forward();
    hg.forward();
    const double lc = cpu.loss(), lg = gpu.loss();
    std::printf("%s mb %d: loss cpu %.7f gpu %.7f (rel %.2e)\n", tag.c_str(), mb, lc, lg,
                std::fabs(lg - lc) / lc);
    EXPECT_NEAR(lg, lc, tol.loss_rel * lc) << tag << " micro-batch " << mb;
    hc.backward(loss_scale);
    hg.backward(loss_scale);
    double worst = 0.0;
    for (size_t u = 0; u < hg.num_units(); ++u)
      for (size_t i = 0; i < hg.num_params(u); ++i) {
        const std::vector<float>& want = hc.grad(u, i);
        const std::vector<float> got = hg.grad(u, i);
        const std::string what = tag + " " + cpu.unit(u).name() + "." + hg.spec(u, i).name;
        const double r = rel_norm_error(got, want);
        worst = std::max(worst, r);
        EXPECT_LE(r, tol.norm_rel) << what << " (relative norm error)";
        const double m = max_abs(want);
        check_close(what.c_str(), got, want, tol.elem * m, tol.elem);
      }
    std::printf("%s mb %d: worst relative norm error of a gradient %.2e\n", tag.c_str(), mb, worst);
  }
}

// ---- the model -------------------------------------------------------------------------------

TEST(CudaGpt, SpecsMatchCpu) {
  ZS_REQUIRE_CUDA();
  for (bool ckpt : {false, true}) {
    GptConfig c = small_config(DType::kBF16);
    c.arch.layers = 3;
    c.run.checkpoint_activations = ckpt;
    GptModel cpu(c);
    Stream stream;
    CudaGptModel gpu(c, stream.get());
    ASSERT_EQ(gpu.num_units(), cpu.num_units());
    EXPECT_EQ(gpu.num_params(), cpu.num_params());
    for (size_t u = 0; u < cpu.num_units(); ++u) {
      EXPECT_EQ(gpu.unit(u).name(), cpu.unit(u).name());
      const auto a = cpu.unit(u).param_specs(), b = gpu.unit(u).param_specs();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].name, b[i].name);
        EXPECT_EQ(a[i].shape, b[i].shape);
        EXPECT_EQ(a[i].init.kind, b[i].init.kind);
        EXPECT_EQ(a[i].init.a, b[i].init.a);
        EXPECT_EQ(a[i].init.b, b[i].init.b);
        EXPECT_EQ(a[i].weight_decay, b[i].weight_decay);
      }
    }
  }
}

TEST(CudaGpt, Fp32MatchesCpu) {
  ZS_REQUIRE_CUDA();
  compare_with_cpu(DType::kF32, {1e-5, 1e-4, 1e-4}, 2.0f);
}

TEST(CudaGpt, Bf16MatchesCpu) {
  ZS_REQUIRE_CUDA();
  // Same bf16 rounding points on both; accumulation order differs, so a few activations round to
  // the neighbouring bf16 value (2^-8 relative) and the gradients follow.
  compare_with_cpu(DType::kBF16, {2e-3, 3e-2, 5e-2}, 1.0f);
}

TEST(CudaGpt, Fp16CloseToCpu) {
  ZS_REQUIRE_CUDA();
  // The CPU runs fp16 parameters through fp32 products, the GPU through fp16 ones (fp16
  // activations, 2^-11 relative per rounding).
  compare_with_cpu(DType::kF16, {1e-3, 1e-2, 2e-2}, 1024.0f);
}

TEST(CudaGpt, SgdLossCurveFollowsCpu) {
  ZS_REQUIRE_CUDA();
  const GptConfig c = small_config(DType::kF32);
  GptModel cpu(c);
  UnitHarness hc(cpu, DType::kF32, 3);
  UnitHarness hm(cpu, DType::kF32, 3);  // the GPU run's master values (same start)
  Stream stream;
  CudaGptModel gpu(c, stream.get());
  DeviceHarness hg(gpu, hm, DType::kF32);
  const auto tokens = random_tokens(c, 1, 2);
  cpu.set_tokens(tokens);
  gpu.set_tokens(tokens);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 6; ++step) {
    cpu.load_micro_batch(0);
    gpu.load_micro_batch(0);
    hc.forward();
    hg.forward();
    std::printf("step %d: loss cpu %.6f gpu %.6f\n", step, cpu.loss(), gpu.loss());
    EXPECT_NEAR(gpu.loss(), cpu.loss(), 1e-4 * cpu.loss()) << "step " << step;
    if (step == 0) first = gpu.loss();
    last = gpu.loss();
    hc.backward();
    hg.backward();
    hc.sgd(0.5f);
    for (size_t u = 0; u < hg.num_units(); ++u)
      for (size_t i = 0; i < hg.num_params(u); ++i) {
        const auto g = hg.grad(u, i);
        auto& m = hm.master(u, i);
        for (size_t j = 0; j < m.size(); ++j) m[j] -= 0.5f * g[j];
      }
    hg.upload();
  }
  EXPECT_LT(last, first - 0.5);
}

TEST(CudaGpt, InferenceMatchesCpu) {
  ZS_REQUIRE_CUDA();
  const GptConfig c = small_config(DType::kF32);
  GptModel cpu(c);
  UnitHarness hc(cpu, DType::kF32, 4);
  perturb(hc, 9, 0.05f);
  Stream stream;
  CudaGptModel gpu(c, stream.get());
  DeviceHarness hg(gpu, hc, DType::kF32);
  const auto tokens = random_tokens(c, 1, 3);
  cpu.set_inference_input(tokens.data(), 10);
  hc.forward(false);
  gpu.set_inference_input(tokens.data(), 10);
  hg.forward(false);
  const std::vector<float> want(cpu.last_logits().begin(), cpu.last_logits().end());
  const std::vector<float> a(gpu.last_logits().begin(), gpu.last_logits().end());
  ASSERT_EQ(a.size(), static_cast<size_t>(c.arch.vocab));
  check_close("inference logits", a, want, 1e-4 * max_abs(want), 1e-4);
  // A longer prompt: still the CPU's logits.
  cpu.set_inference_input(tokens.data(), 20);
  hc.forward(false);
  gpu.set_inference_input(tokens.data(), 20);
  hg.forward(false);
  const std::vector<float> want20(cpu.last_logits().begin(), cpu.last_logits().end());
  const std::vector<float> b(gpu.last_logits().begin(), gpu.last_logits().end());
  check_close("inference logits, 20 tokens", b, want20, 1e-4 * max_abs(want20), 1e-4);
}

// The caching allocator's counters (the tracker's view is GptModelTest.StepsAllocateNothing).
TEST(CudaGpt, StepsAllocateNothingFromTheAllocator) {
  ZS_REQUIRE_CUDA();
  int dev = 0;
  cuda_check(cudaGetDevice(&dev), "cudaGetDevice");
  CudaCachingAllocator alloc(dev);
  MemoryTracker tracker;
  const GptConfig c = small_config(DType::kBF16);
  GptModel cpu(c);
  UnitHarness hc(cpu, DType::kBF16, 2);
  Stream stream;
  CudaGptModel gpu(c, stream.get(), &tracker, &alloc);
  DeviceHarness hg(gpu, hc, DType::kBF16);  // its buffers come from another allocator
  const auto tokens = random_tokens(c, 3, 4);
  gpu.set_tokens(tokens);
  const CudaAllocatorStats before = alloc.stats();
  const int64_t acts = tracker.current(MemCategory::kActivations);
  EXPECT_EQ(acts, gpu.activation_bytes());
  for (int mb = 0; mb < 3; ++mb) {
    gpu.load_micro_batch(mb);
    hg.forward();
    EXPECT_TRUE(std::isfinite(gpu.loss()));
    hg.backward();
  }
  stream.sync();
  const CudaAllocatorStats after = alloc.stats();
  EXPECT_EQ(after.cuda_mallocs, before.cuda_mallocs);
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(tracker.peak(MemCategory::kActivations), acts);
}

// The CUDA GPT's activation plan (gpt_activation_plan(), models/gpt/gpt_activations.h: what the
// planner and CudaGptModel::activation_plan() report) is what the model allocates:
// activation_bytes(), the tracker's kActivations (the cuBLASLt workspace included) and its kOther
// (the pinned host buffers), for every compute dtype, with and without checkpointing, one and three
// sequences, and a shape whose FFN width is no multiple of 64 (the padded pscratch stride) with two
// column-sum chunks (M = 384).
TEST(CudaGpt, ActivationsMatchPlan) {
  ZS_REQUIRE_CUDA();
  std::vector<GptConfig> configs;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool ckpt : {false, true})
      for (int batch : {1, 3}) {
        GptConfig c = small_config(dt);
        c.run.checkpoint_activations = ckpt;
        c.run.batch = batch;
        configs.push_back(c);
      }
  for (DType dt : {DType::kF32, DType::kBF16}) {
    GptConfig c = small_config(dt);
    c.arch.width = 72;  // F = 288: pscratch stride 320
    c.arch.heads = 3;
    c.arch.context = 128;
    c.run.batch = 3;  // M = 384: two column-sum chunks
    c.arch.vocab = 96;
    configs.push_back(c);
  }
  Stream stream;
  for (const GptConfig& c : configs) {
    SCOPED_TRACE(fmt::format("{} ckpt {} B {} C {} T {}", dtype_name(c.run.compute_dtype),
                             c.run.checkpoint_activations, c.run.batch, c.arch.width,
                             c.arch.context));
    MemoryTracker t;
    CudaGptModel gpu(c, stream.get(), &t);
    const ActivationPlan a = nn::gpt_activation_plan(c, DeviceKind::kCuda);
    EXPECT_TRUE(a.exact);
    EXPECT_EQ(gpu.activation_plan().total(), a.total());
    EXPECT_EQ(a.total(), gpu.activation_bytes());
    EXPECT_EQ(a.total(), t.current(MemCategory::kActivations));
    EXPECT_EQ(a.pinned_host, t.current(MemCategory::kOther));
    // One more block adds exactly per_layer (per_layer_checkpointed when checkpointing).
    GptConfig c1 = c;
    c1.arch.layers += 1;
    CudaGptModel gpu1(c1, stream.get());
    EXPECT_EQ(gpu1.activation_bytes() - gpu.activation_bytes(),
              c.run.checkpoint_activations ? a.per_layer_checkpointed : a.per_layer);
  }
}

// Views in a dtype other than the compute dtype are refused (the token checks are
// GptModelTest.RejectsBadTokens).
TEST(CudaGpt, RejectsViewsOfAnotherDtype) {
  ZS_REQUIRE_CUDA();
  const GptConfig c = small_config(DType::kBF16);
  Stream stream;
  CudaGptModel gpu(c, stream.get());
  GptModel cpu(c);
  UnitHarness hc(cpu, DType::kBF16, 1);
  DeviceHarness hg(gpu, hc, DType::kF32);
  const std::vector<int32_t> t(c.run.batch * (c.arch.context + 1), 0);
  gpu.set_tokens(t);
  gpu.load_micro_batch(0);
  nn::testing::expect_error([&] { hg.forward(); },
                            "embed: parameter 'wte' given in fp32, the model computes in bf16");
}

// ---- the kernels the GPT added ---------------------------------------------------------------

// Pure host code: runs without a device.
TEST(CudaGptKernels, EmbeddingGradIndexIsAStableCountingSort) {
  const std::vector<int32_t> tokens = {3, 1, 3, 0, 6, 1, 3};
  const int V = 7;
  std::vector<int32_t> counts(V + 1), order(tokens.size()), rows(tokens.size()),
      offsets(tokens.size() + 1);
  const int n =
      nn::gpu::embedding_grad_index(tokens.data(), static_cast<int64_t>(tokens.size()), V,
                                    counts.data(), order.data(), rows.data(), offsets.data());
  ASSERT_EQ(n, 4);
  EXPECT_EQ(std::vector<int32_t>(rows.begin(), rows.begin() + n),
            (std::vector<int32_t>{0, 1, 3, 6}));
  EXPECT_EQ(std::vector<int32_t>(offsets.begin(), offsets.begin() + n + 1),
            (std::vector<int32_t>{0, 1, 3, 6, 7}));
  EXPECT_EQ(order, (std::vector<int32_t>{3, 1, 5, 0, 2, 6, 4}));
  const std::vector<int32_t> bad = {0, 7};
  EXPECT_EQ(nn::gpu::embedding_grad_index(bad.data(), 2, V, counts.data(), order.data(),
                                          rows.data(), offsets.data()),
            -1);
}

TEST(CudaGptKernels, EmbeddingMatchesCpuBitwise) {
  ZS_REQUIRE_CUDA();
  const int B = 3, T = 5, C = 37, V = 7;  // few ids: many repeats
  const int64_t M = static_cast<int64_t>(B) * T;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> d(0, V - 1);
  std::vector<int32_t> tokens(M);
  for (auto& x : tokens) x = d(rng);
  const auto wte32 = random_floats(V * C, 2), wpe32 = random_floats(T * C, 3);
  // Forward in every compute dtype.
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16}) {
    std::vector<uint8_t> e(wte32.size() * dtype_size(dt)), p(wpe32.size() * dtype_size(dt));
    convert(wte32.data(), DType::kF32, e.data(), dt, wte32.size());
    convert(wpe32.data(), DType::kF32, p.data(), dt, wpe32.size());
    ParamView ve{e.data(), dt, V * C, nullptr}, vp{p.data(), dt, T * C, nullptr};
    std::vector<float> want(M * C);
    nn::embedding_forward(tokens.data(), B, T, C, ve, vp, want.data());
    DeviceArray<int32_t> gt(tokens);
    DeviceArray<uint8_t> ge(e), gp(p);
    DeviceArray<float> out(M * C);
    cuda_check(
        nn::gpu::embedding_forward(gt.get(), B, T, C, ge.get(), gp.get(), dt, out.get(), nullptr),
        "embedding_forward");
    const auto got = out.download();
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
        << dtype_name(dt);
  }
  // Backward: accumulates into non-zero gradients, in the CPU's order.
  const auto dout = random_floats(M * C, 4);
  auto dwte = random_floats(V * C, 5), dwpe = random_floats(T * C, 6);
  DeviceArray<float> gdout(dout), gdwte(dwte), gdwpe(dwpe);
  std::vector<int32_t> counts(V + 1), idx(3 * M + 1);
  const int rows = nn::gpu::embedding_grad_index(tokens.data(), M, V, counts.data(), idx.data(),
                                                 idx.data() + M, idx.data() + 2 * M);
  ASSERT_GT(rows, 0);
  DeviceArray<int32_t> gidx(idx);
  for (int run = 0; run < 2; ++run) {  // twice: += twice, still bitwise the CPU's
    nn::embedding_backward(tokens.data(), B, T, C, dout.data(), dwte.data(), dwpe.data());
    cuda_check(nn::gpu::embedding_backward(gidx.get(), gidx.get() + M, gidx.get() + 2 * M, rows, B,
                                           T, C, gdout.get(), gdwte.get(), gdwpe.get(), nullptr),
               "embedding_backward");
    const auto a = gdwte.download(), b = gdwpe.download();
    EXPECT_EQ(0, std::memcmp(a.data(), dwte.data(), a.size() * sizeof(float))) << "dwte";
    EXPECT_EQ(0, std::memcmp(b.data(), dwpe.data(), b.size() * sizeof(float))) << "dwpe";
  }
}

TEST(CudaGptKernels, ResidualAddIsExact) {
  ZS_REQUIRE_CUDA();
  for (int64_t n : {int64_t{1}, int64_t{1003}, int64_t{4096}}) {
    for (int64_t off : {int64_t{0}, int64_t{1}}) {  // off = 1: unaligned, the scalar kernel
      const auto a = random_floats(n + off, 7), b = random_floats(n + off, 8);
      DeviceArray<float> ga(a), gb(b), gout(n + off);
      cuda_check(
          nn::gpu::residual_add(ga.get() + off, gb.get() + off, gout.get() + off, n, nullptr),
          "residual_add");
      const auto got = gout.download();
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[off + i], a[off + i] + b[off + i]) << i;
      // In place: out aliases a.
      cuda_check(nn::gpu::residual_add(ga.get(), gb.get(), ga.get(), n + off, nullptr),
                 "residual_add");
      const auto inplace = ga.download();
      for (int64_t i = 0; i < n + off; ++i) ASSERT_EQ(inplace[i], a[i] + b[i]) << i;
    }
  }
}

TEST(CudaGptKernels, BiasGradMatchesCpuAndIsDeterministic) {
  ZS_REQUIRE_CUDA();
  for (int64_t M : {int64_t{1}, int64_t{37}, int64_t{300}, int64_t{5000}, int64_t{40000}})
    for (int N : {1, 31, 96, 200}) {
      const auto dy = random_floats(static_cast<size_t>(M) * N, 9);
      const auto db0 = random_floats(N, 10);
      std::vector<float> want(N);
      for (int j = 0; j < N; ++j) {
        double s = db0[j];
        for (int64_t i = 0; i < M; ++i) s += dy[i * N + j];
        want[j] = static_cast<float>(s);
      }
      std::vector<float> cpu = db0;
      nn::bias_backward(dy.data(), M, N, cpu.data());
      DeviceArray<float> gdy(dy), gdb(db0), gdb2(db0);
      DeviceArray<float> scratch(static_cast<size_t>(nn::gpu::bias_backward_scratch_floats(M, N)));
      cuda_check(nn::gpu::bias_backward(gdy.get(), M, N, gdb.get(), scratch.get(), nullptr),
                 "bias_backward");
      cuda_check(nn::gpu::bias_backward(gdy.get(), M, N, gdb2.get(), scratch.get(), nullptr),
                 "bias_backward");
      const auto got = gdb.download(), got2 = gdb2.download();
      const std::string what = "bias grad M " + std::to_string(M) + " N " + std::to_string(N);
      // fp32 sums of M values in [-1, 1]: error ~ sqrt(M) 2^-24 M.
      const double atol = 1e-6 * static_cast<double>(M) + 1e-6;
      check_close(what.c_str(), got, want, atol, 0);
      check_close((what + " vs cpu").c_str(), got, cpu, 2 * atol, 0);
      EXPECT_EQ(0, std::memcmp(got.data(), got2.data(), got.size() * sizeof(float))) << what;
    }
}

}  // namespace
}  // namespace zs
