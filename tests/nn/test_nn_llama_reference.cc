// GptModel's Llama form against an independent naive double-precision forward written from
// transformers' LlamaForCausalLM (modeling_llama.py, 4.36): RMSNorm x * rsqrt(mean(x^2) + eps) * w,
// RoPE with rotate_half and inv_freq = 1 / theta^(2i/hd), repeat_kv (query head h reads key/value
// head h / (H / KV)), causal softmax of q k^T / sqrt(hd), o_proj, down_proj(silu(gate_proj(x)) *
// up_proj(x)), final norm, lm_head. The reference takes q_proj, k_proj, v_proj, gate_proj and
// up_proj as the row blocks [Note: architecture components] says our fused qkv and fc hold, so a
// Qwen3 form adds modeling_qwen3.py's q_norm / k_norm (RMSNorm over each head's q and k before
// RoPE) and a head_dim apart from width / heads (q_proj [H hd, C], o_proj [C, H hd]), so a
// convention error (head order, q/k/v order, gate vs up, which half rotates) shows here where
// finite differences cannot see it. fp32 logits (inference) and the training loss within 1e-5.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/gpt/gpt.h"
#include "tests/nn/gpt_arch_cases.h"
#include "tests/nn/layer_test_helpers.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

using Mat = std::vector<double>;  // row-major

// Rows [r0, r0 + n) of a row-major [rows, cols] fp32 parameter, in double.
Mat rows_of(const std::vector<float>& w, int64_t cols, int64_t r0, int64_t n) {
  return Mat(w.begin() + r0 * cols, w.begin() + (r0 + n) * cols);
}

// y [T, out] = x [T, in] W^T (+ b): nn.Linear.
Mat linear(const Mat& x, const Mat& w, const Mat* b, int64_t T, int64_t in, int64_t out) {
  Mat y(static_cast<size_t>(T * out));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[t * in + i] * w[o * in + i];
      y[t * out + o] = s;
    }
  return y;
}

// LlamaRMSNorm (layer_test_helpers.h) on x [T, C].
Mat rmsnorm(const Mat& x, const std::vector<float>& w, int64_t T, int64_t C, double eps) {
  return layer_test::ref_rmsnorm(x, Mat(w.begin(), w.end()), static_cast<int>(T),
                                 static_cast<int>(C), eps);
}

// apply_rotary_pos_emb on x [T, heads * hd] (position t for row t): x * cos + rotate_half(x) * sin,
// rotate_half(x) = cat(-x2, x1), cos/sin of t * inv_freq repeated over both halves.
void rope(Mat& x, int64_t T, int heads, int hd, double theta) {
  for (int64_t t = 0; t < T; ++t)
    for (int h = 0; h < heads; ++h) {
      double* v = &x[(t * heads + h) * hd];
      const Mat orig(v, v + hd);
      for (int j = 0; j < hd; ++j) {
        const int i = j % (hd / 2);
        const double a = t / std::pow(theta, 2.0 * i / hd);
        const double rot = j < hd / 2 ? -orig[j + hd / 2] : orig[j - hd / 2];
        v[j] = orig[j] * std::cos(a) + rot * std::sin(a);
      }
    }
}

// LlamaAttention's core: q [T, H hd], k and v [T, KV hd] -> [T, H hd].
Mat attention(const Mat& q, const Mat& k, const Mat& v, int64_t T, int H, int KV, int hd) {
  Mat o(static_cast<size_t>(T * H * hd), 0.0);
  const int group = H / KV;  // repeat_kv: key/value head g serves query heads [g*group, ...)
  for (int h = 0; h < H; ++h) {
    const int g = h / group;
    for (int64_t i = 0; i < T; ++i) {
      Mat s(static_cast<size_t>(i + 1));
      double mx = -1e300, sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        double d = 0.0;
        for (int e = 0; e < hd; ++e) d += q[(i * H + h) * hd + e] * k[(j * KV + g) * hd + e];
        s[j] = d / std::sqrt(static_cast<double>(hd));
        mx = std::max(mx, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j <= i; ++j)
        for (int e = 0; e < hd; ++e)
          o[(i * H + h) * hd + e] += s[j] / sum * v[(j * KV + g) * hd + e];
    }
  }
  return o;
}

// The host parameters of a model (UnitHarness masters), found by their names
// (models/gpt/gpt_specs.h's, which checkpoints and the Hugging Face mapping use), not by
// GptBlockLayout's indices.
struct Params {
  const GptArchitecture& a;
  UnitHarness& h;
  // Parameter `name` of unit `u`; throws std::runtime_error when the unit has none of that name.
  const std::vector<float>& get(size_t u, const std::string& name) const {
    for (size_t i = 0; i < h.num_params(u); ++i)
      if (h.spec(u, i).name == name) return h.master(u, i);
    throw std::runtime_error("unit " + std::to_string(u) + " has no parameter " + name);
  }
  const std::vector<float>& block(int l, const std::string& name) const { return get(1 + l, name); }
};

// One LlamaDecoderLayer on x [T, C], in place.
void decoder_layer(const Params& p, int l, Mat& x, int64_t T) {
  const GptArchitecture& a = p.a;
  const int C = a.width, H = a.heads, KV = a.kv_heads_or_heads(), hd = a.head_dim();
  const int64_t F = a.ffn_width(), kv = static_cast<int64_t>(KV) * hd, D = a.attn_width();
  const auto& wqkv = p.block(l, "qkv.weight");
  Mat bq, bk, bv;
  if (a.qkv_bias) {
    const auto& b = p.block(l, "qkv.bias");
    bq = rows_of(b, 1, 0, D), bk = rows_of(b, 1, D, kv), bv = rows_of(b, 1, D + kv, kv);
  }
  const Mat h1 = rmsnorm(x, p.block(l, "ln1.weight"), T, C, a.norm_eps);
  Mat q = linear(h1, rows_of(wqkv, C, 0, D), a.qkv_bias ? &bq : nullptr, T, C, D);
  Mat k = linear(h1, rows_of(wqkv, C, D, kv), a.qkv_bias ? &bk : nullptr, T, C, kv);
  const Mat v = linear(h1, rows_of(wqkv, C, D + kv, kv), a.qkv_bias ? &bv : nullptr, T, C, kv);
  if (a.qk_norm) {  // Qwen3Attention: q_norm / k_norm over each head's vector ([T * heads, hd])
    q = rmsnorm(q, p.block(l, "q_norm.weight"), T * H, hd, a.norm_eps);
    k = rmsnorm(k, p.block(l, "k_norm.weight"), T * KV, hd, a.norm_eps);
  }
  rope(q, T, H, hd, a.rope_theta);
  rope(k, T, KV, hd, a.rope_theta);
  const Mat att = attention(q, k, v, T, H, KV, hd);
  const Mat bo = a.proj_bias ? rows_of(p.block(l, "proj.bias"), 1, 0, C) : Mat();
  const Mat o = linear(att, rows_of(p.block(l, "proj.weight"), D, 0, C),
                       a.proj_bias ? &bo : nullptr, T, D, C);
  for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  // LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)).
  const Mat h2 = rmsnorm(x, p.block(l, "ln2.weight"), T, C, a.norm_eps);
  const auto& wfc = p.block(l, "fc.weight");
  const Mat bfc = a.mlp_bias ? rows_of(p.block(l, "fc.bias"), 1, 0, 2 * F) : Mat();
  const Mat bg = a.mlp_bias ? Mat(bfc.begin(), bfc.begin() + F) : Mat();
  const Mat bu = a.mlp_bias ? Mat(bfc.begin() + F, bfc.end()) : Mat();
  const Mat gate = linear(h2, rows_of(wfc, C, 0, F), a.mlp_bias ? &bg : nullptr, T, C, F);
  const Mat up = linear(h2, rows_of(wfc, C, F, F), a.mlp_bias ? &bu : nullptr, T, C, F);
  Mat act(gate.size());
  for (size_t i = 0; i < act.size(); ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
  const Mat bd = a.mlp_bias ? rows_of(p.block(l, "fc_proj.bias"), 1, 0, C) : Mat();
  const Mat d = linear(act, rows_of(p.block(l, "fc_proj.weight"), F, 0, C),
                       a.mlp_bias ? &bd : nullptr, T, F, C);
  for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
}

// LlamaForCausalLM: logits [T, V] of one sequence of T tokens.
Mat reference_logits(const Params& p, const int32_t* tokens, int64_t T) {
  const GptArchitecture& a = p.a;
  const int64_t C = a.width;
  const auto& wte = p.get(0, "wte");
  Mat x(static_cast<size_t>(T * C));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) x[t * C + c] = wte[tokens[t] * C + c];
  for (int l = 0; l < a.layers; ++l) decoder_layer(p, l, x, T);
  const size_t head = 1 + static_cast<size_t>(a.layers);
  const Mat hf = rmsnorm(x, p.get(head, "ln_f.weight"), T, C, a.norm_eps);
  return linear(hf, rows_of(p.get(head, "lm_head.weight"), C, 0, a.vocab), nullptr, T, C, a.vocab);
}

class NnLlamaReference : public ::testing::TestWithParam<testing::ArchCase> {};

TEST_P(NnLlamaReference, LogitsAndLossMatchDoubleReference) {
  GptConfig c;
  c.arch = GetParam().arch;
  c.arch.layers = 2;
  c.arch.context = 24;
  c.arch.vocab = 97;
  c.run.batch = 2;
  c.run.threads = 2;
  GptModel m(c);
  UnitHarness h(m, DType::kF32, 23);
  std::mt19937 rng(29);
  std::normal_distribution<float> nd(0.0f, 0.2f);
  for (size_t u = 0; u < h.num_units(); ++u)  // every weight away from init, norms included
    for (size_t i = 0; i < h.num_params(u); ++i)
      for (float& x : h.master(u, i)) x += nd(rng);
  h.refresh();
  const int64_t T = c.arch.context;
  std::vector<int32_t> tokens(static_cast<size_t>(c.run.batch * (T + 1)));
  std::uniform_int_distribution<int> td(0, c.arch.vocab - 1);
  for (auto& t : tokens) t = td(rng);
  const Params p{c.arch, h};
  // Inference logits of prompts of length n against the reference's row n - 1.
  const Mat ref0 = reference_logits(p, tokens.data(), T);
  double worst = 0.0, scale = 0.0;
  for (double v : ref0) scale = std::max(scale, std::fabs(v));
  for (int n : {1, 2, 7, 16, static_cast<int>(T)}) {
    m.set_inference_input(tokens.data(), n);
    h.forward(false);
    const auto got = m.last_logits();
    ASSERT_EQ(got.size(), static_cast<size_t>(c.arch.vocab));
    for (int v = 0; v < c.arch.vocab; ++v) {
      const double d = std::fabs(got[v] - ref0[(n - 1) * c.arch.vocab + v]);
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-5 * std::max(1.0, scale)) << "length " << n << " logit " << v;
    }
  }
  // The training loss: mean cross-entropy over both sequences.
  double loss = 0.0;
  for (int b = 0; b < c.run.batch; ++b) {
    const int32_t* seq = tokens.data() + b * (T + 1);
    const Mat lg = b == 0 ? ref0 : reference_logits(p, seq, T);
    for (int64_t t = 0; t < T; ++t) {
      const double* row = &lg[t * c.arch.vocab];
      const double mx = *std::max_element(row, row + c.arch.vocab);
      double s = 0.0;
      for (int v = 0; v < c.arch.vocab; ++v) s += std::exp(row[v] - mx);
      loss += mx + std::log(s) - row[seq[t + 1]];
    }
  }
  loss /= static_cast<double>(c.run.batch * T);
  m.set_tokens(tokens);
  m.load_micro_batch(0);
  h.forward();
  std::printf("%s: logits |max| %.3f, worst |ours - reference| %.3g; loss %.8f reference %.8f\n",
              GetParam().name.c_str(), scale, worst, m.loss(), loss);
  EXPECT_NEAR(m.loss(), loss, 1e-5 * loss);
}

// The all-Llama and Qwen2-like cases (the reference has no LayerNorm, GELU or learned positions)
// at 8 heads of 8: one and two key/value heads, and multi-head; 4 key/value heads with Llama 3's
// theta; 6 heads of 10 with 3 key/value heads.
std::vector<testing::ArchCase> reference_cases() {
  GptArchitecture base;
  base.width = 64;
  base.heads = 8;
  std::vector<testing::ArchCase> v;
  for (const testing::ArchCase& a : testing::llama_form_cases(base))
    if (a.arch.norm == NormKind::kRMSNorm) v.push_back(a);
  GptArchitecture kv4 = testing::llama_form(base, 4, 100);
  kv4.rope_theta = 500000.0f;  // Llama 3's theta
  v.push_back({"llama_kv4_theta5e5", kv4});
  // Head dim 10: rotary halves of 5, past no SIMD width (width 60, 6 heads, 3 key/value heads).
  GptArchitecture hd10 = base;
  hd10.width = 60;
  hd10.heads = 6;
  v.push_back({"llama_kv3_hd10", testing::llama_form(hd10, 3, 100)});
  return v;
}
INSTANTIATE_TEST_SUITE_P(Llama, NnLlamaReference, ::testing::ValuesIn(reference_cases()),
                         [](const ::testing::TestParamInfo<testing::ArchCase>& i) {
                           return i.param.name;
                         });

}  // namespace
}  // namespace zs::nn
