// LoRA adapters on the CPU GPT ([Note: LoRA] in models/gpt/gpt_adapters.h), one process, units
// driven by UnitHarness: the specs (base order kept, adapters appended, frozen flags), the config's
// errors, the adapter's products against a double-precision reference, an adapted model with B = 0
// equal to its base bit for bit, the whole model's gradient (adapters and the path through them)
// against finite differences, frozen base parameters skipped without changing any other bit,
// training, and the activation plan against the tracker. The engine side is
// gpt_lora_engine_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/memory_tracker.h"
#include "models/gpt/gpt.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/gpt_specs.h"
#include "nn/attention.h"
#include "nn/gemm.h"
#include "nn/int8_linear.h"
#include "nn/kernels.h"
#include "nn/linear.h"
#include "nn/lora.h"
#include "nn/threads.h"
#include "tests/nn/gemm_scratchpads.h"
#include "tests/nn/gpt_arch_cases.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

// The block layout of the default (GPT-2) architecture.
const GptBlockLayout kGpt2Block = GptBlockLayout::of(GptArchitecture{});

// GPT-2 at tiny_config()'s size (gpt_arch_cases.h) with LoRA adapters of `rank`.
GptConfig small_config(DType dt = DType::kF32, int rank = 4) {
  GptConfig c = testing::tiny_config(testing::tiny_archs()[0], dt);
  c.adapters.lora.rank = rank;
  c.adapters.lora.alpha = 8.0f;  // s = 2 at rank 4
  return c;
}

std::vector<int32_t> tokens_for(const GptConfig& c, uint32_t seed, int micro_batches = 1) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, c.arch.vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(micro_batches) * c.run.batch * (c.arch.context + 1));
  for (auto& x : t) x = d(rng);
  return t;
}

// Runs f, which must throw zs::Error with exactly `code` and `message`.
template <typename F>
void expect_error(F&& f, ErrorCode code, const std::string& message) {
  try {
    f();
    ADD_FAILURE() << "no error; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(std::string(e.what()), message);
  }
}

// Adds normal(0, std) noise to every parameter of the units (adapters included when `adapters`).
void perturb(UnitHarness& h, uint32_t seed, float std, bool adapters) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, std);
  for (size_t u = 0; u < h.num_units(); ++u)
    for (size_t i = 0; i < h.num_params(u); ++i) {
      if (!adapters && h.spec(u, i).name.find(".lora_") != std::string::npos) continue;
      for (float& x : h.master(u, i)) x += nd(rng);
    }
  h.refresh();
}

// The base parameters of `from` (a model without adapters) into the first parameters of each unit
// of `to`, whose adapters keep their values.
void copy_base(UnitHarness& from, UnitHarness& to) {
  ASSERT_EQ(from.num_units(), to.num_units());
  for (size_t u = 0; u < from.num_units(); ++u)
    for (size_t i = 0; i < from.num_params(u); ++i) {
      ASSERT_EQ(from.spec(u, i).name, to.spec(u, i).name);
      to.master(u, i) = from.master(u, i);
    }
  to.refresh();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---- specs and config ---------------------------------------------------------------------

TEST(GptLoraSpecs, AdaptersFollowTheBaseParameters) {
  GptConfig base = small_config(DType::kF32, 0);
  const GptConfig c = small_config();  // rank 4, every target, freeze_base
  ASSERT_EQ(gpt_block_specs(c).size(), static_cast<size_t>(kGpt2Block.count) + 8);
  for (size_t u = 0; u < static_cast<size_t>(c.arch.layers) + 2; ++u) {
    const auto b = gpt_unit_specs(base, u), l = gpt_unit_specs(c, u);
    for (size_t i = 0; i < b.size(); ++i) {  // the base: same order, shapes, init; frozen
      EXPECT_EQ(l[i].name, b[i].name);
      EXPECT_EQ(l[i].shape, b[i].shape);
      EXPECT_EQ(l[i].init.kind, b[i].init.kind);
      EXPECT_EQ(l[i].init.a, b[i].init.a);
      EXPECT_EQ(l[i].init.b, b[i].init.b);
      EXPECT_EQ(l[i].weight_decay, b[i].weight_decay);
      EXPECT_TRUE(b[i].trainable);
      EXPECT_FALSE(l[i].trainable) << u << " " << l[i].name;
    }
  }
  // C = 32, F = 128, r = 4: qkv 32 -> 96, proj 32 -> 32, fc 32 -> 128, fc_proj 128 -> 32.
  struct Want {
    const char* name;
    std::vector<int64_t> shape;
    float bound;  // A: uniform(-bound, bound); B: 0 = zeros
  };
  const float b32 = 1.0f / std::sqrt(32.0f), b128 = 1.0f / std::sqrt(128.0f);
  const Want want[] = {{"qkv.lora_A", {4, 32}, b32},       {"qkv.lora_B", {96, 4}, 0},
                       {"proj.lora_A", {4, 32}, b32},      {"proj.lora_B", {32, 4}, 0},
                       {"fc.lora_A", {4, 32}, b32},        {"fc.lora_B", {128, 4}, 0},
                       {"fc_proj.lora_A", {4, 128}, b128}, {"fc_proj.lora_B", {32, 4}, 0}};
  const auto specs = gpt_block_specs(c);
  for (size_t k = 0; k < 8; ++k) {
    const ParamSpec& p = specs[static_cast<size_t>(kGpt2Block.count) + k];
    EXPECT_EQ(p.name, want[k].name);
    EXPECT_EQ(p.shape, want[k].shape) << p.name;
    EXPECT_TRUE(p.trainable) << p.name;
    EXPECT_TRUE(p.weight_decay) << p.name;
    if (want[k].bound > 0) {
      EXPECT_EQ(p.init.kind, Init::Kind::kUniform) << p.name;
      EXPECT_EQ(p.init.a, -want[k].bound) << p.name;
      EXPECT_EQ(p.init.b, want[k].bound) << p.name;
    } else {
      EXPECT_EQ(p.init.kind, Init::Kind::kZeros) << p.name;
    }
  }
  EXPECT_EQ(gpt_lora_param_index(c, GptLoraTarget::kQkv), 12);
  EXPECT_EQ(gpt_lora_param_index(c, GptLoraTarget::kFcProj), 18);
  // Counts: 4 (32 + 96) + 4 (32 + 32) + 4 (32 + 128) + 4 (128 + 32) = 2048 per block.
  EXPECT_EQ(c.adapters.num_lora_params_per_block(c.arch), 2048);
  EXPECT_EQ(c.num_params(), base.num_params() + 2 * 2048);
  EXPECT_EQ(c.num_trainable_params(), 2 * 2048);
  int64_t all = 0, trainable = 0;
  for (size_t u = 0; u < static_cast<size_t>(c.arch.layers) + 2; ++u)
    for (const ParamSpec& p : gpt_unit_specs(c, u)) {
      all += p.numel();
      trainable += p.trainable ? p.numel() : 0;
    }
  EXPECT_EQ(all, c.num_params());
  EXPECT_EQ(trainable, c.num_trainable_params());

  // A subset, listed in any order: the adapters follow GptLoraTarget order.
  GptConfig sub = c;
  sub.adapters.lora.targets = {GptLoraTarget::kFcProj, GptLoraTarget::kQkv};
  sub.validate();
  const auto s = gpt_block_specs(sub);
  ASSERT_EQ(s.size(), static_cast<size_t>(kGpt2Block.count) + 4);
  EXPECT_EQ(s[12].name, "qkv.lora_A");
  EXPECT_EQ(s[13].name, "qkv.lora_B");
  EXPECT_EQ(s[14].name, "fc_proj.lora_A");
  EXPECT_EQ(s[15].name, "fc_proj.lora_B");
  EXPECT_EQ(gpt_lora_param_index(sub, GptLoraTarget::kQkv), 12);
  EXPECT_EQ(gpt_lora_param_index(sub, GptLoraTarget::kProj), -1);
  EXPECT_EQ(gpt_lora_param_index(sub, GptLoraTarget::kFc), -1);
  EXPECT_EQ(gpt_lora_param_index(sub, GptLoraTarget::kFcProj), 14);
  EXPECT_EQ(sub.adapters.num_lora_params_per_block(sub.arch), 4 * (32 + 96) + 4 * (128 + 32));

  // freeze_base = false: everything trains.
  GptConfig open = c;
  open.adapters.lora.freeze_base = false;
  for (size_t u = 0; u < static_cast<size_t>(c.arch.layers) + 2; ++u)
    for (const ParamSpec& p : gpt_unit_specs(open, u)) EXPECT_TRUE(p.trainable) << p.name;
  EXPECT_EQ(open.num_trainable_params(), open.num_params());
  // Rank 0: the base model, whatever the other fields say.
  base.adapters.lora.targets = {GptLoraTarget::kFc};
  base.adapters.lora.freeze_base = true;
  EXPECT_EQ(gpt_block_specs(base).size(), static_cast<size_t>(kGpt2Block.count));
  EXPECT_TRUE(gpt_embed_specs(base)[0].trainable);
}

TEST(GptLoraConfig, RejectsBadValuesNamingThem) {
  const auto bad = [](auto edit, const std::string& message) {
    GptConfig c = small_config();
    edit(c.adapters.lora);
    expect_error([&] { c.validate(); }, ErrorCode::kInvalidArgument, message);
    expect_error([&] { GptModel m(c); }, ErrorCode::kInvalidArgument, message);
  };
  // Unknown names are refused where targets are parsed (GptLoraTargets below); typed targets can
  // still repeat.
  bad(
      [](GptLoraConfig& l) {
        l.targets = {GptLoraTarget::kFc, GptLoraTarget::kProj, GptLoraTarget::kFc};
      },
      "gpt config: lora target \"fc\" is given twice");
  bad([](GptLoraConfig& l) { l.targets = {}; },
      "gpt config: lora rank 4 with no targets (choose from "
      "qkv, proj, fc, fc_proj, q_proj, k_proj, v_proj, gate_proj, up_proj or the aliases o_proj, "
      "down_proj, c_attn, c_fc, c_proj)");
  bad([](GptLoraConfig& l) { l.rank = -1; }, "gpt config: lora rank -1 is outside 0..4096");
  bad([](GptLoraConfig& l) { l.rank = 4097; }, "gpt config: lora rank 4097 is outside 0..4096");
  bad([](GptLoraConfig& l) { l.alpha = 0.0f; },
      "gpt config: lora alpha 0 must be finite and positive");
  bad([](GptLoraConfig& l) { l.alpha = -2.0f; },
      "gpt config: lora alpha -2 must be finite and positive");
  bad([](GptLoraConfig& l) { l.alpha = std::numeric_limits<float>::quiet_NaN(); },
      "gpt config: lora alpha nan must be finite and positive");
  bad([](GptLoraConfig& l) { l.alpha = std::numeric_limits<float>::infinity(); },
      "gpt config: lora alpha inf must be finite and positive");
  // The bounds themselves are accepted.
  GptConfig c = small_config();
  c.adapters.lora.rank = 4096;
  c.validate();
  c.adapters.lora.rank = 0;
  c.adapters.lora.targets = {};  // no adapters: targets are not used
  c.validate();
  EXPECT_EQ(small_config().adapters.lora.scaling(), 2.0f);
}

// The CUDA model refuses adapters before touching a device; so does its activation plan.
TEST(GptLoraConfig, CudaRefusesAdapters) {
  const std::string msg =
      "cuda gpt: LoRA adapters are implemented on the CPU backend only (lora rank 4)";
  expect_error([] { check_gpt_lora_device(4, DeviceKind::kCuda); }, ErrorCode::kUnsupported, msg);
  expect_error([] { gpt_activation_plan(small_config(), DeviceKind::kCuda); },
               ErrorCode::kUnsupported, msg);
  check_gpt_lora_device(0, DeviceKind::kCuda);
  check_gpt_lora_device(4, DeviceKind::kCpu);
  EXPECT_TRUE(gpt_activation_plan(small_config(DType::kF32, 0), DeviceKind::kCuda).counted);
}

// ---- the adapter's products ---------------------------------------------------------------

// LoraAdapter against the formulas in double (inputs rounded to mm first; for bf16, u and v are
// rounded to bf16 before they feed a product, as the adapter does).
TEST(GptLoraAdapter, MatchesDoubleReference) {
  const int64_t M = 48, in = 40, out = 24, r = 5;
  const float s = 1.7f;
  for (DType mm : {DType::kF32, DType::kBF16}) {
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto draw = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = nd(rng);
      return v;
    };
    // Inputs in mm, and their exact fp32 values for the reference.
    auto to_mm = [&](std::vector<float>& v, std::vector<uint16_t>& lowp) -> const void* {
      if (mm == DType::kF32) return v.data();
      lowp.resize(v.size());
      store_as(v.data(), lowp.data(), mm, 0, static_cast<int64_t>(v.size()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_fp32(lowp.data(), mm, i);
      return lowp.data();
    };
    auto round_mm = [&](double x) {
      if (mm == DType::kF32) return x;
      float h = 0.0f;  // room for any dtype
      const float f = static_cast<float>(x);
      store_as(&f, &h, mm, 0, 1);
      return static_cast<double>(load_as_fp32(&h, mm, 0));
    };
    std::vector<float> x = draw(M * in), a = draw(r * in), b = draw(out * r), dy = draw(M * out);
    std::vector<uint16_t> xl, al, bl, dyl;
    const void* xm = to_mm(x, xl);
    const void* am = to_mm(a, al);
    const void* bm = to_mm(b, bl);
    const void* dym = to_mm(dy, dyl);
    const std::vector<float> y0 = draw(M * out), dx0 = draw(M * in), da0 = draw(r * in),
                             db0 = draw(out * r);

    MemoryTracker t;
    GemmWorkspace ws(&t);
    LoraAdapter lora(M, in, out, r, s, mm, &t, &ws);
    std::vector<float> u32(M * r), v32(M * r), y = y0, dx = dx0, da = da0, db = db0;
    std::vector<float> u(M * r), v(M * r);  // mm buffers (fp32-sized, enough for bf16)
    lora.forward(xm, am, bm, u32.data(), u.data(), y.data());
    lora.backward(dym, xm, u.data(), am, bm, v32.data(), v.data(), dx.data(), da.data(), db.data());

    // Reference.
    std::vector<double> ur(M * r), vr(M * r);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < r; ++k) {
        double acc = 0, accv = 0;
        for (int64_t j = 0; j < in; ++j) acc += double(x[i * in + j]) * a[k * in + j];
        for (int64_t o = 0; o < out; ++o) accv += double(dy[i * out + o]) * b[o * r + k];
        ur[i * r + k] = round_mm(acc);
        vr[i * r + k] = round_mm(accv);
      }
    double worst = 0.0;
    auto check = [&](const char* what, const std::vector<float>& got, auto ref_at, double tol) {
      double err = 0.0, scale = 0.0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double want = ref_at(static_cast<int64_t>(i));
        err = std::max(err, std::abs(got[i] - want));
        scale = std::max(scale, std::abs(want));
      }
      worst = std::max(worst, err / scale);
      EXPECT_LE(err, tol * scale) << dtype_name(mm) << " " << what;
    };
    // fp32: every product accumulates in fp32 over at most 48 terms. bf16: u and v are rounded
    // to bf16 from fp32 sums here and from double sums in the reference, which may land on
    // neighbouring bf16 values (2^-8 relative) for a few elements.
    const double tol = mm == DType::kF32 ? 2e-6 : 1e-2;
    check(
        "y", y,
        [&](int64_t e) {
          const int64_t i = e / out, o = e % out;
          double acc = 0;
          for (int64_t k = 0; k < r; ++k) acc += ur[i * r + k] * b[o * r + k];
          return y0[e] + s * acc;
        },
        tol);
    check(
        "dB", db,
        [&](int64_t e) {
          const int64_t o = e / r, k = e % r;
          double acc = 0;
          for (int64_t i = 0; i < M; ++i) acc += double(dy[i * out + o]) * ur[i * r + k];
          return db0[e] + s * acc;
        },
        tol);
    check(
        "dA", da,
        [&](int64_t e) {
          const int64_t k = e / in, j = e % in;
          double acc = 0;
          for (int64_t i = 0; i < M; ++i) acc += vr[i * r + k] * x[i * in + j];
          return da0[e] + s * acc;
        },
        tol);
    check(
        "dx", dx,
        [&](int64_t e) {
          const int64_t i = e / in, j = e % in;
          double acc = 0;
          for (int64_t k = 0; k < r; ++k) acc += vr[i * r + k] * a[k * in + j];
          return dx0[e] + s * acc;
        },
        tol);
    std::printf("%s adapter vs double reference: worst max|err| / max|ref| %.2e\n",
                std::string(dtype_name(mm)).c_str(), worst);
  }
}

// ---- the adapted model --------------------------------------------------------------------

// With B = 0 (its initial value) an adapted model computes its base's loss, logits and base
// gradients bit for bit; dA is exactly zero (dA = s (dy B)^T x) and dB is not.
TEST(GptLoraModel, ZeroBIsTheBaseBitForBit) {
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool ckpt : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (ckpt ? " checkpointed" : ""));
      GptConfig bc = small_config(dt, 0), lc = small_config(dt, 4);
      bc.run.checkpoint_activations = lc.run.checkpoint_activations = ckpt;
      lc.adapters.lora.freeze_base = false;  // base gradients too, to compare them
      GptModel base(bc), lora(lc);
      UnitHarness hb(base, dt, 5), hl(lora, dt, 6);
      perturb(hb, 9, 0.05f, false);
      copy_base(hb, hl);
      const auto tokens = tokens_for(bc, 4);
      base.set_tokens(tokens);
      lora.set_tokens(tokens);
      base.load_micro_batch(0);
      lora.load_micro_batch(0);
      const float scale = dt == DType::kF16 ? 256.0f : 1.0f;
      hb.forward();
      hl.forward();
      EXPECT_EQ(base.loss(), lora.loss());
      hb.backward(scale);
      hl.backward(scale);
      EXPECT_TRUE(hl.produced_all());
      for (size_t u = 0; u < hb.num_units(); ++u) {
        for (size_t i = 0; i < hb.num_params(u); ++i)
          EXPECT_TRUE(same_bits(hb.grad(u, i), hl.grad(u, i)))
              << "unit " << u << " " << hb.spec(u, i).name;
        for (size_t i = hb.num_params(u); i < hl.num_params(u); ++i) {
          double norm = 0.0;
          for (float g : hl.grad(u, i)) norm += double(g) * g;
          if (hl.spec(u, i).name.find("lora_A") != std::string::npos)
            EXPECT_EQ(norm, 0.0) << hl.spec(u, i).name;
          else
            EXPECT_GT(norm, 0.0) << hl.spec(u, i).name;
        }
      }
      std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 7);
      base.set_inference_input(prompt.data(), 7);
      lora.set_inference_input(prompt.data(), 7);
      hb.forward(false);
      hl.forward(false);
      const std::vector<float> lb(base.last_logits().begin(), base.last_logits().end());
      const std::vector<float> ll(lora.last_logits().begin(), lora.last_logits().end());
      EXPECT_TRUE(same_bits(lb, ll));
    }
}

// Frozen base parameters get no span (as the engine gives them): backward skips their gradients
// and leaves every adapter gradient the bits of the all-trainable model.
TEST(GptLoraModel, FrozenBaseSkipsItsGradientsOnly) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(dt));
    GptConfig oc = small_config(dt), fc = small_config(dt);
    oc.adapters.lora.freeze_base = false;
    GptModel open(oc), frozen(fc);
    UnitHarness ho(open, dt, 7), hf(frozen, dt, 7, /*frozen=*/true);
    perturb(ho, 2, 0.05f, true);
    perturb(hf, 2, 0.05f, true);  // the same values: same seeds, same specs order
    const auto tokens = tokens_for(oc, 8);
    open.set_tokens(tokens);
    frozen.set_tokens(tokens);
    open.load_micro_batch(0);
    frozen.load_micro_batch(0);
    ho.forward();
    hf.forward();
    EXPECT_EQ(open.loss(), frozen.loss());
    ho.backward();
    hf.backward();  // would throw on grad() of a frozen parameter
    EXPECT_TRUE(hf.produced_all());
    int adapters = 0;
    for (size_t u = 0; u < ho.num_units(); ++u)
      for (size_t i = 0; i < ho.num_params(u); ++i) {
        if (hf.spec(u, i).trainable) {
          EXPECT_TRUE(same_bits(ho.grad(u, i), hf.grad(u, i))) << u << " " << hf.spec(u, i).name;
          ++adapters;
        } else {
          for (float g : hf.grad(u, i)) ASSERT_EQ(g, 0.0f) << u << " " << hf.spec(u, i).name;
        }
      }
    EXPECT_EQ(adapters, 2 * 8);
  }
}

// The whole model's gradient against central differences of its fp32 loss: every adapter tensor,
// and upstream parameters (the embeddings and block 0's first layer norm) whose gradient flows
// back through the adapters' dx = s (dy B) A. B is non-zero and large enough that the adapters'
// share of those upstream gradients is far above the tolerance.
TEST(GptLoraModel, GradientsMatchFiniteDifferences) {
  GptConfig c = small_config();
  c.arch.context = 12;
  c.adapters.lora.freeze_base = false;
  GptModel m(c);
  UnitHarness h(m, DType::kF32, 11);
  perturb(h, 5, 0.1f, false);
  {  // B from zeros to normal(0, 0.5)
    std::mt19937 rng(17);
    std::normal_distribution<float> nd(0.0f, 0.5f);
    for (size_t u = 0; u < h.num_units(); ++u)
      for (size_t i = static_cast<size_t>(kGpt2Block.count); i < h.num_params(u); ++i)
        if (h.spec(u, i).name.find("lora_B") != std::string::npos)
          for (float& x : h.master(u, i)) x = nd(rng);
    h.refresh();
  }
  const auto tokens = tokens_for(c, 21);
  m.set_tokens(tokens);
  m.load_micro_batch(0);
  auto loss = [&] {
    h.forward();
    return m.loss();
  };
  loss();
  h.backward();
  auto grad_of = [&](size_t u, size_t i) { return h.grad(u, i); };

  // The adapters' share of the upstream gradients: the same gradients with every B zeroed.
  const std::vector<std::pair<size_t, size_t>> upstream = {
      {0, 0}, {0, 1}, {1, static_cast<size_t>(kGpt2Block.ln1_w)}};
  std::vector<std::vector<float>> with_b;
  for (auto [u, i] : upstream) with_b.push_back(grad_of(u, i));
  std::vector<std::vector<float>> saved_b;
  for (size_t u = 1; u <= static_cast<size_t>(c.arch.layers); ++u)
    for (size_t i = static_cast<size_t>(kGpt2Block.count); i < h.num_params(u); ++i)
      if (h.spec(u, i).name.find("lora_B") != std::string::npos) {
        saved_b.push_back(h.master(u, i));
        std::fill(h.master(u, i).begin(), h.master(u, i).end(), 0.0f);
      }
  h.refresh();
  loss();
  h.backward();
  double share = 1.0;
  for (size_t k = 0; k < upstream.size(); ++k) {
    const auto g0 = grad_of(upstream[k].first, upstream[k].second);
    double diff = 0.0, norm = 0.0;
    for (size_t e = 0; e < g0.size(); ++e) {
      diff += std::pow(double(with_b[k][e]) - g0[e], 2);
      norm += std::pow(double(with_b[k][e]), 2);
    }
    share = std::min(share, std::sqrt(diff / norm));
  }
  std::printf("adapters' share of the upstream gradients (smallest of wte, wpe, ln1): %.3f\n",
              share);
  EXPECT_GT(share, 0.1);
  {
    size_t k = 0;
    for (size_t u = 1; u <= static_cast<size_t>(c.arch.layers); ++u)
      for (size_t i = static_cast<size_t>(kGpt2Block.count); i < h.num_params(u); ++i)
        if (h.spec(u, i).name.find("lora_B") != std::string::npos) h.master(u, i) = saved_b[k++];
    h.refresh();
  }
  loss();
  h.backward();

  // Central differences, eps 1e-3 on fp32 parameters: the loss (a mean of fp32 row losses summed
  // in double) resolves about 1e-7, i.e. 5e-5 of gradient; each element must agree to within
  // 2e-4 absolute + 1% of the larger of the two (the gradients checked are mostly 1e-3 to 0.5).
  std::mt19937 rng(3);
  double worst = 0.0;
  int checked = 0;
  auto fd_check = [&](size_t u, size_t i, size_t e) {
    std::vector<float>& w = h.master(u, i);
    const float g = h.grad(u, i)[e];
    const float saved = w[e];
    const float eps = 1e-3f;
    w[e] = saved + eps;
    h.refresh();
    const double lp = loss();
    w[e] = saved - eps;
    h.refresh();
    const double lm = loss();
    w[e] = saved;
    h.refresh();
    const double num = (lp - lm) / (2.0 * eps);
    const double tol = 2e-4 + 1e-2 * std::max(std::abs(num), std::abs(double(g)));
    worst = std::max(worst, std::abs(num - g) / tol);
    ++checked;
    EXPECT_LE(std::abs(num - g), tol) << "unit " << u << " " << h.spec(u, i).name << "[" << e
                                      << "]: analytic " << g << " numeric " << num;
  };
  for (size_t u = 1; u <= static_cast<size_t>(c.arch.layers); ++u)
    for (size_t i = static_cast<size_t>(kGpt2Block.count); i < h.num_params(u); ++i) {
      std::uniform_int_distribution<size_t> pick(0, h.master(u, i).size() - 1);
      for (int k = 0; k < 6; ++k) fd_check(u, i, pick(rng));
    }
  for (int k = 0; k < 4; ++k) {
    fd_check(0, 0, static_cast<size_t>(tokens[k]) * c.arch.width + k);  // wte rows the batch uses
    fd_check(0, 1, static_cast<size_t>(k) * c.arch.width + 3 * k);      // wpe
    fd_check(1, static_cast<size_t>(kGpt2Block.ln1_w), static_cast<size_t>(5 * k));
  }
  std::printf("%d elements vs finite differences: worst |err| / tolerance %.3f\n", checked, worst);
}

// SGD on a repeated batch lowers the loss with everything training (freeze_base = false) and with
// the adapters alone (the frozen base unchanged, bit for bit).
TEST(GptLoraModel, TrainingReducesLoss) {
  for (bool freeze : {false, true})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (freeze ? " frozen base" : " all trainable"));
      GptConfig c = small_config(dt);
      c.adapters.lora.freeze_base = freeze;
      GptModel m(c);
      UnitHarness h(m, dt, 3, /*frozen=*/true);
      // A base with larger weights than GPT-2's init (a stand-in for a trained one): a frozen
      // head at init spans logits of about 0.1, too little for any adapter to move the loss.
      perturb(h, 8, 0.2f, false);
      std::vector<std::vector<float>> base_before;
      for (size_t u = 0; u < h.num_units(); ++u)
        for (size_t i = 0; i < h.num_params(u); ++i)
          if (!h.spec(u, i).trainable) base_before.push_back(h.master(u, i));
      const auto tokens = tokens_for(c, 2);
      m.set_tokens(tokens);
      double first = 0.0, last = 0.0;
      for (int step = 0; step < 8; ++step) {
        m.load_micro_batch(0);
        h.forward();
        if (step == 0) first = m.loss();
        last = m.loss();
        h.backward();
        h.sgd(freeze ? 0.5f : 0.2f);
      }
      EXPECT_TRUE(h.produced_all());
      std::printf("%s, %s: loss %.4f -> %.4f after 8 SGD steps\n",
                  std::string(dtype_name(dt)).c_str(), freeze ? "frozen base" : "all trainable",
                  first, last);
      EXPECT_LT(last, first - 1.0);
      size_t k = 0;
      for (size_t u = 0; u < h.num_units(); ++u)
        for (size_t i = 0; i < h.num_params(u); ++i)
          if (!h.spec(u, i).trainable) {
            EXPECT_TRUE(same_bits(h.master(u, i), base_before[k++]));
          }
      EXPECT_EQ(k, freeze ? base_before.size() : 0u);
    }
}

// ---- activations --------------------------------------------------------------------------

using testing::measured_gemm_scratchpads;

// Model::activation_plan() with adapters is what the model allocates, to the byte, and it grows
// by exactly the adapters' buffers: per kept block set [n][M, r] mm, once [M, r] fp32 (+ mm when
// 16-bit), fp16 one adapter's weights in fp32. Steps allocate nothing more.
TEST(GptLoraModel, ActivationPlanMatchesTracker) {
  const std::vector<std::vector<GptLoraTarget>> targets = {
      {GptLoraTarget::kQkv, GptLoraTarget::kProj, GptLoraTarget::kFc, GptLoraTarget::kFcProj},
      {GptLoraTarget::kFc, GptLoraTarget::kProj}};
  int checked = 0;
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (bool ckpt : {false, true})
      for (int rank : {4, 48})  // 48: wider than the model (C = 32), past every base product
        for (const auto& tg : targets) {
          GptConfig g = small_config(dt, rank);
          g.run.checkpoint_activations = ckpt;
          g.adapters.lora.targets = tg;
          SCOPED_TRACE(std::string(dtype_name(dt)) + " ckpt " + std::to_string(ckpt) + " rank " +
                       std::to_string(rank) + " targets " + std::to_string(tg.size()));
          MemoryTracker t;
          GptModel model(g, &t);
          const ActivationPlan a = model.activation_plan();
          EXPECT_TRUE(a.counted && a.exact);
          EXPECT_EQ(a.total(), model.activation_bytes());
          EXPECT_EQ(t.current(MemCategory::kActivations), a.total());
          EXPECT_EQ(a.gemm_scratchpads, measured_gemm_scratchpads(g));

          GptConfig b = g;
          b.adapters.lora.rank = 0;
          const ActivationPlan pb =
              gpt_activation_plan(b, DeviceKind::kCpu, this_process_cpu_gemm());
          const int64_t M = static_cast<int64_t>(g.run.batch) * g.arch.context, n = tg.size();
          const int64_t e = dt == DType::kBF16 ? 2 : 4, lowp = dt == DType::kBF16 ? 1 : 0;
          const int64_t sets = ckpt ? 1 : g.arch.layers;
          int64_t wmax = 0;  // fp16: the largest r (in + out) among the targets
          for (int k = 0; k < kNumGptLoraTargets; ++k) {
            if (!g.adapters.lora.targets_linear(static_cast<GptLoraTarget>(k))) continue;
            int64_t in = 0, out = 0;
            gpt_lora_linear_shape(static_cast<GptLoraTarget>(k), g.arch, &in, &out);
            wmax = std::max(wmax, rank * (in + out));
          }
          EXPECT_EQ(a.per_layer - pb.per_layer, n * M * rank * e);
          EXPECT_EQ(a.blocks + a.recompute - pb.blocks - pb.recompute, sets * n * M * rank * e);
          EXPECT_EQ(a.workspace - pb.workspace,
                    M * rank * 4 + lowp * M * rank * e + (dt == DType::kF16 ? wmax * 4 : 0));
          EXPECT_GE(a.gemm_workspace, pb.gemm_workspace);
          EXPECT_EQ(a.inputs, pb.inputs);
          EXPECT_EQ(a.head, pb.head);
          // One more block adds per_layer (per_layer_checkpointed) exactly.
          GptConfig g3 = g;
          g3.arch.layers = 3;
          GptModel m3(g3);
          EXPECT_EQ(m3.activation_bytes() - model.activation_bytes(),
                    ckpt ? a.per_layer_checkpointed : a.per_layer);
          // Steps allocate nothing.
          UnitHarness h(model, dt, 1, /*frozen=*/true);
          const auto tokens = tokens_for(g, 1, 2);
          model.set_tokens(tokens);
          const int64_t acts = t.current(MemCategory::kActivations);
          t.reset_peaks();
          for (int mb = 0; mb < 2; ++mb) {
            model.load_micro_batch(mb);
            h.forward();
            h.backward(dt == DType::kF16 ? 256.0f : 1.0f);
          }
          EXPECT_TRUE(std::isfinite(model.loss()));
          EXPECT_EQ(t.peak(MemCategory::kActivations), acts);
          ++checked;
        }
  EXPECT_EQ(checked, 24);
}

// [Note: int8 base compute]: the base linears computed from int8 records (the int8 GEMM with
// per-row activation quantization, backward-data on the dequantized weight) against the same
// model on the engine's dequantized weights. Where the int8 GEMM runs, the loss agrees within
// 0.1% and each adapter gradient within 5% (relative L2; the activation quantization's error,
// half a step of absmax/127 per element); threshold 6 finds no outlier columns in this small
// model's activations, so it gives the bits of threshold 0. Without it (the AVX2 twin) the raw
// records take the dequantize path: bitwise the same. The activation plan counts the Int8Linears'
// workspace and steps allocate nothing.
TEST(GptLoraModel, Int8RecordsMatchTheDequantizedBase) {
  for (DType dt : {DType::kF32, DType::kBF16})
    for (float threshold : {0.0f, 6.0f}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " threshold " + std::to_string(threshold));
      GptConfig c = small_config(dt);
      c.adapters.int8.accept = true;
      c.adapters.int8.outlier_threshold = threshold;
      MemoryTracker t;
      GptModel deq(c), raw(c, &t);
      EXPECT_EQ(raw.activation_plan().total(), raw.activation_bytes());
      UnitHarness hd(deq, dt, 7, /*frozen=*/true), hr(raw, dt, 7, /*frozen=*/true);
      perturb(hd, 2, 0.05f, true);
      perturb(hr, 2, 0.05f, true);
      hd.set_int8(false);
      hr.set_int8(true);
      const auto tokens = tokens_for(c, 8);
      deq.set_tokens(tokens);
      raw.set_tokens(tokens);
      deq.load_micro_batch(0);
      raw.load_micro_batch(0);
      const int64_t acts = t.current(MemCategory::kActivations);
      t.reset_peaks();
      hd.forward();
      hr.forward();
      hd.backward();
      hr.backward();
      EXPECT_EQ(t.peak(MemCategory::kActivations), acts);
      EXPECT_TRUE(hr.produced_all());
      const bool int8 = int8_gemm_available();
      std::printf("%s threshold %g: loss dequantized %.6f, int8 records %.6f (%s)\n",
                  dtype_name(dt).data(), threshold, deq.loss(), raw.loss(),
                  int8 ? "int8 GEMM" : "dequantize path");
      if (!int8) {
        EXPECT_EQ(deq.loss(), raw.loss());
      } else {
        EXPECT_NEAR(raw.loss(), deq.loss(), 0.001 * std::fabs(deq.loss()));
      }
      double worst = 0;
      for (size_t u = 0; u < hd.num_units(); ++u)
        for (size_t i = 0; i < hd.num_params(u); ++i) {
          if (!hd.spec(u, i).trainable) continue;
          const auto& a = hd.grad(u, i);
          const auto& b = hr.grad(u, i);
          if (!int8) {
            EXPECT_TRUE(same_bits(a, b)) << u << " " << hd.spec(u, i).name;
            continue;
          }
          double num = 0, den = 0;
          for (size_t k = 0; k < a.size(); ++k) {
            num += (static_cast<double>(b[k]) - a[k]) * (static_cast<double>(b[k]) - a[k]);
            den += static_cast<double>(a[k]) * a[k];
          }
          const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
          worst = std::max(worst, rel);
          EXPECT_LE(rel, 0.05) << u << " " << hd.spec(u, i).name;
        }
      if (int8) std::printf("  worst adapter gradient relative L2 difference %.4f\n", worst);
    }
}

}  // namespace
}  // namespace zs::nn
