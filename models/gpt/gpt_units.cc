// The units of GptModel: embeddings, transformer blocks, head (names, parameters and checks from
// GptUnit, models/gpt/gpt_common.h). Each forward/backward runs on the buffers of GptModel::State
// (see [Note: block activations] in gpt_state.h).
#include <cstring>

#include "models/gpt/gpt_specs.h"
#include "models/gpt/gpt_state.h"
#include "nn/kernels.h"
#include "nn/threads.h"

namespace zs::nn {

namespace {

// The span of parameter i's gradient, or null when it is frozen (GradViews::wanted): the kernels
// skip a null gradient, so no work is spent on a frozen parameter.
float* wanted_grad(GradViews& g, size_t i) { return g.wanted(i) ? g.grad(i) : nullptr; }
// The same for an optional parameter: index -1 (absent) gives null.
float* wanted_grad(GradViews& g, int i) {
  return i >= 0 ? wanted_grad(g, static_cast<size_t>(i)) : nullptr;
}
// Parameter i, or null when the architecture lacks it (index -1).
const ParamView* optional(std::span<const ParamView> p, int i) {
  return i >= 0 ? &p[static_cast<size_t>(i)] : nullptr;
}

// The block's or head's normalisation ([Note: architecture components]): LayerNorm with weight w
// and bias b, or RMSNorm with weight w (b is -1); out in mm, statistics kept for backward.
void norm_forward(GptModel::State& s, std::span<const ParamView> p, int w, int b, const float* x,
                  void* out, Buffer& mean, Buffer& rstd) {
  const GptArchitecture& a = s.cfg.arch;
  if (a.norm == NormKind::kRMSNorm) {
    rmsnorm_forward(x, s.small_f32(p[w], 0), s.M, s.C, a.norm_eps, out, s.mm, rstd.as<float>());
    return;
  }
  layernorm_forward(x, s.small_f32(p[w], 0), s.small_f32(p[b], 1), s.M, s.C, out, s.mm,
                    mean.as<float>(), rstd.as<float>(), a.norm_eps);
}

// dx += the norm's input gradient for dy; its weight's (and bias's) gradients where wanted.
void norm_backward(GptModel::State& s, std::span<const ParamView> p, GradViews& g, int w, int b,
                   const float* x, Buffer& mean, Buffer& rstd, const float* dy, float* dx) {
  if (s.cfg.arch.norm == NormKind::kRMSNorm) {
    rmsnorm_backward(x, s.small_f32(p[w], 0), rstd.as<float>(), dy, s.M, s.C, dx,
                     wanted_grad(g, w));
    return;
  }
  layernorm_backward(x, s.small_f32(p[w], 0), mean.as<float>(), rstd.as<float>(), dy, s.M, s.C, dx,
                     wanted_grad(g, w), wanted_grad(g, b));
}

// Rotary positions on the q and k heads of qkv [M, Q] in place (forward) or their transpose on
// dqkv (backward); nothing with learned positions.
void rotate_qk(GptModel::State& s, float* qkv, bool backward) {
  const GptArchitecture& a = s.cfg.arch;
  if (a.positions != PositionKind::kRotary) return;
  auto rope = backward ? rope_backward : rope_forward;
  rope(qkv, s.M, s.T, s.H, s.hd, s.Q, a.rope_theta, a.rope_scaling);
  rope(qkv + s.D, s.M, s.T, s.KV, s.hd, s.Q, a.rope_theta, a.rope_scaling);
}

// Qwen3's per-head q and k RMSNorm ([Note: architecture components]) on qkv [M, Q] in place,
// before RoPE: q heads at columns [0, D), k heads at [D, D + KV hd); their inputs and statistics
// kept in the block set (q's rows first, then k's). Nothing without qk_norm. The weights take
// pscratch slots 2 and 3 (the qkv bias's slot 0 is done with).
void qk_norm_forward(GptModel::State& s, std::span<const ParamView> p, const GptBlockLayout& lay,
                     BlockActs& a, float* qkv) {
  if (!s.cfg.arch.qk_norm) return;
  const float eps = s.cfg.arch.norm_eps;
  float* x = a.qk_x.as<float>();
  float* rstd = a.qk_rstd.as<float>();
  rmsnorm_heads_forward(qkv, s.M, s.H, s.hd, s.Q, s.small_f32(p[lay.q_norm_w], 2), eps, x, rstd);
  rmsnorm_heads_forward(qkv + s.D, s.M, s.KV, s.hd, s.Q, s.small_f32(p[lay.k_norm_w], 3), eps,
                        x + s.M * s.D, rstd + s.M * s.H);
}

// Its backward in place on dqkv [M, Q] (after RoPE's): dq and dk through the norms, the weights'
// gradients where wanted.
void qk_norm_backward(GptModel::State& s, std::span<const ParamView> p, GradViews& g,
                      const GptBlockLayout& lay, BlockActs& a, float* dqkv) {
  if (!s.cfg.arch.qk_norm) return;
  const float* x = a.qk_x.as<float>();
  const float* rstd = a.qk_rstd.as<float>();
  rmsnorm_heads_backward(dqkv, s.M, s.H, s.hd, s.Q, s.small_f32(p[lay.q_norm_w], 2), x, rstd,
                         wanted_grad(g, lay.q_norm_w));
  rmsnorm_heads_backward(dqkv + s.D, s.M, s.KV, s.hd, s.Q, s.small_f32(p[lay.k_norm_w], 3),
                         x + s.M * s.D, rstd + s.M * s.H, wanted_grad(g, lay.k_norm_w));
}

class EmbedUnit : public GptUnit {
 public:
  explicit EmbedUnit(GptModel::State& s) : GptUnit(s.cfg, 0), s_(s) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    ThreadScope scope(s_.threads);
    embedding_forward(s_.inputs.as<int32_t>(), s_.B, s_.T, s_.C, p[0],
                      p.size() > 1 ? &p[1] : nullptr, s_.x(0));
  }
  // Frozen wte and wpe (a LoRA fine-tune): nothing to do.
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo&) override {
    check_params(p);
    const int wpe = p.size() > 1 ? 1 : -1;
    if (!g.wanted(size_t{0}) && wanted_grad(g, wpe) == nullptr) return;
    ThreadScope scope(s_.threads);
    embedding_backward(s_.inputs.as<int32_t>(), s_.B, s_.T, s_.C, s_.dres.as<float>(),
                       wanted_grad(g, size_t{0}), wanted_grad(g, wpe));
  }

 private:
  GptModel::State& s_;
};

class BlockUnit : public GptUnit {
 public:
  BlockUnit(GptModel::State& s, int layer)
      : GptUnit(s.cfg, 1 + layer), s_(s), l_(layer), lay_(GptBlockLayout::of(s.cfg.arch)) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    ThreadScope scope(s_.threads);
    run_forward(p);
  }
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo&) override {
    check_params(p);
    ThreadScope scope(s_.threads);
    if (s_.cfg.run.checkpoint_activations) run_forward(p);  // recompute into the shared set
    run_backward(p, g);
  }

 private:
  void run_forward(std::span<const ParamView> p) {
    GptModel::State& s = s_;
    BlockActs& a = s.block_acts(l_);
    const int64_t M = s.M, C = s.C;
    const float* x = s.x(l_);
    float* y = s.x(l_ + 1);
    float* qkv = s.qkv.as<float>();
    norm_forward(s, p, lay_.ln1_w, lay_.ln1_b, x, a.h1.data(), a.mean1, a.rstd1);
    linear_forward(p, s.qkv_lin, GptLoraTarget::kQkv, a, a.h1.data(), qkv);
    qk_norm_forward(s, p, lay_, a, qkv);
    rotate_qk(s, qkv, false);
    if (s.cfg.run.attention == GptAttention::kFused)
      s.flash.forward(qkv, a.flash(), s.att_tiles.as<float>(), a.a.data());
    else
      s.attn.forward(qkv, a.attn(), s.attn_work(), a.a.data());
    // Residual: x2 = x + proj(a), fused as the GEMM's sum post-op on a copy of x.
    std::memcpy(a.x2.data(), x, sizeof(float) * M * C);
    linear_forward(p, s.proj_lin, GptLoraTarget::kProj, a, a.a.data(), a.x2.as<float>());
    norm_forward(s, p, lay_.ln2_w, lay_.ln2_b, a.x2.as<float>(), a.h2.data(), a.mean2, a.rstd2);
    linear_forward(p, s.fc_lin, GptLoraTarget::kFc, a, a.h2.data(), a.f.as<float>());
    if (s.cfg.arch.mlp == MlpKind::kSwiGLU)
      swiglu_forward_rows(a.f.as<float>(), M, s.F, a.g.data(), s.mm);
    else
      gelu_forward_save_grad(a.f.as<float>(), a.g.data(), s.mm, M * s.F);  // f := gelu'(f)
    std::memcpy(y, a.x2.data(), sizeof(float) * M * C);
    linear_forward(p, s.fcproj_lin, GptLoraTarget::kFcProj, a, a.g.data(), y);
  }

  // The linear `target`: y = x W^T + b (+= for the residual ones), from an int8 record through
  // the target's Int8Linear ([Note: int8 base compute]), then its LoRA adapter's y += s (x A^T) B^T
  // ([Note: LoRA]), keeping x A^T in the block set for backward.
  void linear_forward(std::span<const ParamView> p, Linear& lin, GptLoraTarget target, BlockActs& a,
                      const void* x, float* y) {
    GptModel::State& s = s_;
    const int t = static_cast<int>(target), kw = lay_.weight(target);  // a base linear
    const float* bias = s.small_f32(optional(p, lay_.bias(target)), 0);
    if (p[kw].dtype == DType::kI8)
      s.int8_lin[t].forward(x, int8_weight(p[kw]), bias, y);
    else
      lin.forward(x, s.weight_mm(p[kw]), bias, y);
    for (int k = 0; k < kNumGptLoraTargets; ++k) {
      const int i = s.lora_index[k];
      if (i < 0 || gpt_lora_base_linear(static_cast<GptLoraTarget>(k)) != target) continue;
      const auto w = s.lora_weights_mm(p[i], p[i + 1]);
      s.lora[k].forward(x, w[0], w[1], s.lora_t.as<float>(), s.lora_u(a, k), y + s.lora_offset[k]);
    }
  }

  Int8Weight int8_weight(const ParamView& w) const {
    ZS_CHECK(s_.cfg.adapters.int8.accept && w.row_scales != nullptr, ErrorCode::kInvalidArgument,
             "{}: an int8 view of '{}' but the model was not built to accept int8 weights "
             "(GptConfig::adapters.int8.accept)",
             name(), w.spec ? w.spec->name : "?");
    return {w.as<int8_t>(), w.row_scales};
  }

  // The backward of linear `target` (bias_cols output columns): dx = dy W (+ its adapter's
  // s v A), dW, db and the adapter's dA, dB for those wanted. dy32 is dy in fp32 (for the bias),
  // dy its mm copy, x the linear's saved input.
  void linear_backward(std::span<const ParamView> p, GradViews& g, Linear& lin,
                       GptLoraTarget target, const float* dy32, const void* dy, int bias_cols,
                       const void* x, float* dx, BlockActs& a) {
    GptModel::State& s = s_;
    const int kw = lay_.weight(target), kb = lay_.bias(target);
    if (p[kw].dtype == DType::kI8) {  // a frozen int8 weight: dx only
      ZS_CHECK(!g.wanted(static_cast<size_t>(kw)), ErrorCode::kInvalidArgument,
               "{}: a trainable parameter '{}' was handed over as int8", name(), p[kw].spec->name);
      s.int8_lin[static_cast<int>(target)].backward_data(dy, int8_weight(p[kw]), dx);
    } else {
      lin.backward(dy, x, s.weight_mm(p[kw]), dx, wanted_grad(g, kw));
    }
    if (float* db = wanted_grad(g, kb)) bias_backward(dy32, s.M, bias_cols, db);
    const int64_t e = static_cast<int64_t>(dtype_size(s.mm));
    for (int k = 0; k < kNumGptLoraTargets; ++k) {
      const int i = s.lora_index[k];
      if (i < 0 || gpt_lora_base_linear(static_cast<GptLoraTarget>(k)) != target) continue;
      const auto w = s.lora_weights_mm(p[i], p[i + 1]);
      const void* dy_part = static_cast<const char*>(dy) + s.lora_offset[k] * e;
      s.lora[k].backward(dy_part, x, s.lora_u(a, k), w[0], w[1], s.lora_t.as<float>(),
                         s.lora_t_mm.data(), dx, wanted_grad(g, i), wanted_grad(g, i + 1));
    }
  }

  // On entry s.dres = dL/d(block output); on exit dL/d(block input).
  void run_backward(std::span<const ParamView> p, GradViews& g) {
    mlp_backward(p, g);
    attention_backward(p, g);
  }

  // y = x2 + fc_proj(act(fc(norm2(x2)))): s.dres becomes dL/dx2.
  void mlp_backward(std::span<const ParamView> p, GradViews& g) {
    GptModel::State& s = s_;
    BlockActs& a = s.block_acts(l_);
    const int64_t M = s.M;
    float* dres = s.dres.as<float>();
    float* dwide = s.dwide.as<float>();
    float* dnarrow = s.dnarrow.as<float>();
    const bool swiglu = s.cfg.arch.mlp == MlpKind::kSwiGLU;
    float* dg = swiglu ? s.dmlp.as<float>() : dwide;  // [M, F]
    const void* dy = s.to_mm(dres, s.dnarrow_mm, M * s.C);
    linear_backward(p, g, s.fcproj_lin, GptLoraTarget::kFcProj, dres, dy, s.C, a.g.data(), dg, a);
    if (swiglu)
      swiglu_backward_rows(a.f.as<float>(), dg, M, s.F, dwide);  // d(gate | up) [M, 2F]
    else
      gelu_backward_saved(a.f.as<float>(), dwide, dwide, M * s.F);  // df
    const void* df = s.to_mm(dwide, s.dwide_mm, M * s.G);
    linear_backward(p, g, s.fc_lin, GptLoraTarget::kFc, dwide, df, s.G, a.h2.data(), dnarrow, a);
    norm_backward(s, p, g, lay_.ln2_w, lay_.ln2_b, a.x2.as<float>(), a.mean2, a.rstd2, dnarrow,
                  dres);
  }

  // x2 = x + proj(attn(rope(qk_norm(qkv(norm1(x)))))): s.dres becomes dL/dx.
  void attention_backward(std::span<const ParamView> p, GradViews& g) {
    GptModel::State& s = s_;
    BlockActs& a = s.block_acts(l_);
    const int64_t M = s.M;
    float* dres = s.dres.as<float>();
    float* dwide = s.dwide.as<float>();
    float* dnarrow = s.dnarrow.as<float>();
    const void* dx2 = s.to_mm(dres, s.dnarrow_mm, M * s.C);
    linear_backward(p, g, s.proj_lin, GptLoraTarget::kProj, dres, dx2, s.C, a.a.data(), dnarrow,
                    a);                               // da
    if (s.cfg.run.attention == GptAttention::kFused)  // dqkv [M, Q]
      s.flash.backward(dnarrow, a.flash(), a.a.data(), s.att_tiles.as<float>(), dwide);
    else
      s.attn.backward(dnarrow, a.attn(), s.attn_work(), dwide);
    rotate_qk(s, dwide, true);
    qk_norm_backward(s, p, g, lay_, a, dwide);
    const void* dqkv = s.to_mm(dwide, s.dwide_mm, M * s.Q);
    linear_backward(p, g, s.qkv_lin, GptLoraTarget::kQkv, dwide, dqkv, s.Q, a.h1.data(), dnarrow,
                    a);  // dh1
    norm_backward(s, p, g, lay_.ln1_w, lay_.ln1_b, s.x(l_), a.mean1, a.rstd1, dnarrow, dres);
  }

  GptModel::State& s_;
  int l_;
  GptBlockLayout lay_;
};

class HeadUnit : public GptUnit {
 public:
  explicit HeadUnit(GptModel::State& s)
      : GptUnit(s.cfg, 1 + s.L), s_(s), lay_(GptHeadLayout::of(s.cfg.arch)) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    ThreadScope scope(s_.threads);
    GptModel::State& s = s_;
    norm_forward(s, p, lay_.ln_w, lay_.ln_b, s.x(s.L), s.hf.data(), s.meanf, s.rstdf);
    const void* w = s.weight_mm(p[lay_.lm_head]);
    float* logits = s.logits.as<float>();  // [head rows, V]
    if (s.inference) {
      s.head.row_logits(s.hf.data(), w, s.inference_length - 1, logits, s.last_logits.as<float>());
      return;
    }
    s.loss =
        s.head.forward(s.hf.data(), w, s.targets.as<int32_t>(), logits, s.row_loss.as<float>());
  }
  // Seeds the gradient with info.loss_scale; must follow this micro-batch's training forward
  // (it consumes the probabilities in place).
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) override {
    check_params(p);
    check_backward(s_.inference);
    ThreadScope scope(s_.threads);
    GptModel::State& s = s_;
    float* dh = s.dnarrow.as<float>();
    s.head.backward(s.hf.data(), s.weight_mm(p[lay_.lm_head]), s.targets.as<int32_t>(),
                    info.loss_scale, s.logits.as<float>(), s.dwide_mm.data(),
                    s.row_loss.as<float>(), dh, wanted_grad(g, lay_.lm_head));
    float* dres = s.dres.as<float>();
    std::memset(dres, 0, sizeof(float) * s.M * s.C);
    norm_backward(s, p, g, lay_.ln_w, lay_.ln_b, s.x(s.L), s.meanf, s.rstdf, dh, dres);
  }

 private:
  GptModel::State& s_;
  GptHeadLayout lay_;
};

}  // namespace

std::vector<std::unique_ptr<Unit>> make_gpt_units(GptModel::State& s) {
  return gpt_unit_list<EmbedUnit, BlockUnit, HeadUnit>(s, s.L);
}

}  // namespace zs::nn
