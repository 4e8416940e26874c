// The units of GptModel: embeddings, transformer blocks, head (names, parameters and checks from
// GptUnit, nn/gpt_common.h). Each forward/backward runs on the buffers of GptModel::State (see
// [Note: block activations] in gpt_state.h).
#include <cstring>

#include "nn/gpt_specs.h"
#include "nn/gpt_state.h"
#include "nn/kernels.h"
#include "nn/threads.h"

namespace zs::nn {

namespace {

// The span of parameter i's gradient, or null when it is frozen (GradViews::wanted): the kernels
// skip a null gradient, so no work is spent on a frozen parameter.
float* wanted_grad(GradViews& g, size_t i) { return g.wanted(i) ? g.grad(i) : nullptr; }

class EmbedUnit : public GptUnit {
 public:
  explicit EmbedUnit(GptModel::State& s) : GptUnit(s.cfg, 0), s_(s) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    ThreadScope scope(s_.threads);
    embedding_forward(s_.inputs.as<int32_t>(), s_.B, s_.T, s_.C, p[0], p[1], s_.x(0));
  }
  // Frozen wte and wpe (a LoRA fine-tune): nothing to do.
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo&) override {
    check_params(p);
    if (!g.wanted(0) && !g.wanted(1)) return;
    ThreadScope scope(s_.threads);
    embedding_backward(s_.inputs.as<int32_t>(), s_.B, s_.T, s_.C, s_.dres.as<float>(),
                       wanted_grad(g, 0), wanted_grad(g, 1));
  }

 private:
  GptModel::State& s_;
};

class BlockUnit : public GptUnit {
 public:
  BlockUnit(GptModel::State& s, int layer) : GptUnit(s.cfg, 1 + layer), s_(s), l_(layer) {}
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
    const int64_t M = s.M, C = s.C, F = s.F;
    const float* x = s.x(l_);
    float* y = s.x(l_ + 1);
    layernorm_forward(x, s.small_f32(p[kLn1W], 0), s.small_f32(p[kLn1B], 1), M, C, a.h1.data(),
                      s.mm, a.mean1.as<float>(), a.rstd1.as<float>());
    base_forward(p, s.qkv_lin, GptLoraTarget::kQkv, kQkvW, kQkvB, a.h1.data(), s.qkv.as<float>());
    lora_forward(p, GptLoraTarget::kQkv, a, a.h1.data(), s.qkv.as<float>());
    s.attn.forward(s.qkv.as<float>(), a.attn(), s.attn_work(), a.a.data());
    // Residual: x2 = x + proj(a), fused as the GEMM's sum post-op on a copy of x.
    std::memcpy(a.x2.data(), x, sizeof(float) * M * C);
    base_forward(p, s.proj_lin, GptLoraTarget::kProj, kProjW, kProjB, a.a.data(), a.x2.as<float>());
    lora_forward(p, GptLoraTarget::kProj, a, a.a.data(), a.x2.as<float>());
    layernorm_forward(a.x2.as<float>(), s.small_f32(p[kLn2W], 0), s.small_f32(p[kLn2B], 1), M, C,
                      a.h2.data(), s.mm, a.mean2.as<float>(), a.rstd2.as<float>());
    base_forward(p, s.fc_lin, GptLoraTarget::kFc, kFcW, kFcB, a.h2.data(), a.f.as<float>());
    lora_forward(p, GptLoraTarget::kFc, a, a.h2.data(), a.f.as<float>());
    gelu_forward_save_grad(a.f.as<float>(), a.g.data(), s.mm, M * F);  // f := gelu'(f)
    std::memcpy(y, a.x2.data(), sizeof(float) * M * C);
    base_forward(p, s.fcproj_lin, GptLoraTarget::kFcProj, kFcProjW, kFcProjB, a.g.data(), y);
    lora_forward(p, GptLoraTarget::kFcProj, a, a.g.data(), y);
  }

  // The base linear of `target` (weight kw, bias kb): y = x W^T + b (+= for the residual ones),
  // from an int8 record through the target's Int8Linear ([Note: int8 base compute]).
  void base_forward(std::span<const ParamView> p, Linear& lin, GptLoraTarget target, int kw, int kb,
                    const void* x, float* y) {
    GptModel::State& s = s_;
    if (p[kw].dtype == DType::kI8) {
      s.int8_lin[static_cast<int>(target)].forward(x, int8_weight(p[kw]), s.small_f32(p[kb], 0), y);
      return;
    }
    lin.forward(x, s.weight_mm(p[kw]), s.small_f32(p[kb], 0), y);
  }

  Int8Weight int8_weight(const ParamView& w) const {
    ZS_CHECK(s_.cfg.adapters.int8.accept && w.row_scales != nullptr, ErrorCode::kInvalidArgument,
             "{}: an int8 view of '{}' but the model was not built to accept int8 weights "
             "(GptConfig::adapters.int8.accept)",
             name(), w.spec ? w.spec->name : "?");
    return {w.as<int8_t>(), w.row_scales};
  }

  // [Note: LoRA] y += s (x A^T) B^T after the base linear of `target`, keeping x A^T in the block
  // set for backward; nothing when the linear has no adapter.
  void lora_forward(std::span<const ParamView> p, GptLoraTarget target, BlockActs& a, const void* x,
                    float* y) {
    GptModel::State& s = s_;
    const int t = static_cast<int>(target), i = s.lora_index[t];
    if (i < 0) return;
    const auto w = s.lora_weights_mm(p[i], p[i + 1]);
    s.lora[t].forward(x, w[0], w[1], s.lora_t.as<float>(), s.lora_u(a, t), y);
  }

  // The backward of linear `target` (weight parameter kw, bias kb; bias_cols columns): dx = dy W
  // (+ its adapter's s v A), dW, db and the adapter's dA, dB for those wanted. dy32 is dy in fp32
  // (for the bias), dy its mm copy, x the linear's saved input.
  void linear_backward(std::span<const ParamView> p, GradViews& g, Linear& lin,
                       GptLoraTarget target, int kw, int kb, const float* dy32, const void* dy,
                       int bias_cols, const void* x, float* dx, BlockActs& a) {
    GptModel::State& s = s_;
    if (p[kw].dtype == DType::kI8) {  // a frozen int8 weight: dx only
      ZS_CHECK(!g.wanted(kw), ErrorCode::kInvalidArgument,
               "{}: a trainable parameter '{}' was handed over as int8", name(), p[kw].spec->name);
      s.int8_lin[static_cast<int>(target)].backward_data(dy, int8_weight(p[kw]), dx);
    } else {
      lin.backward(dy, x, s.weight_mm(p[kw]), dx, wanted_grad(g, kw));
    }
    if (g.wanted(kb)) bias_backward(dy32, s.M, bias_cols, g.grad(kb));
    const int t = static_cast<int>(target), i = s.lora_index[t];
    if (i < 0) return;
    const auto w = s.lora_weights_mm(p[i], p[i + 1]);
    s.lora[t].backward(dy, x, s.lora_u(a, t), w[0], w[1], s.lora_t.as<float>(), s.lora_t_mm.data(),
                       dx, wanted_grad(g, i), wanted_grad(g, i + 1));
  }

  // On entry s.dres = dL/d(block output); on exit dL/d(block input).
  void run_backward(std::span<const ParamView> p, GradViews& g) {
    GptModel::State& s = s_;
    BlockActs& a = s.block_acts(l_);
    const int64_t M = s.M;
    const int C = s.C, F = s.F;
    float* dres = s.dres.as<float>();
    float* dwide = s.dwide.as<float>();
    float* dnarrow = s.dnarrow.as<float>();

    // MLP: y = x2 + fc_proj(gelu(fc(ln2(x2)))).
    const void* dy = s.to_mm(dres, s.dnarrow_mm, M * C);
    linear_backward(p, g, s.fcproj_lin, GptLoraTarget::kFcProj, kFcProjW, kFcProjB, dres, dy, C,
                    a.g.data(), dwide, a);                      // dg [M, F]
    gelu_backward_saved(a.f.as<float>(), dwide, dwide, M * F);  // df
    const void* df = s.to_mm(dwide, s.dwide_mm, M * F);
    linear_backward(p, g, s.fc_lin, GptLoraTarget::kFc, kFcW, kFcB, dwide, df, F, a.h2.data(),
                    dnarrow, a);  // dh2
    layernorm_backward(a.x2.as<float>(), s.small_f32(p[kLn2W], 0), a.mean2.as<float>(),
                       a.rstd2.as<float>(), dnarrow, M, C, dres, wanted_grad(g, kLn2W),
                       wanted_grad(g, kLn2B));

    // Attention: x2 = x + proj(attn(qkv(ln1(x)))).
    const void* dx2 = s.to_mm(dres, s.dnarrow_mm, M * C);
    linear_backward(p, g, s.proj_lin, GptLoraTarget::kProj, kProjW, kProjB, dres, dx2, C,
                    a.a.data(), dnarrow, a);                   // da
    s.attn.backward(dnarrow, a.attn(), s.attn_work(), dwide);  // dqkv [M, 3C]
    const void* dqkv = s.to_mm(dwide, s.dwide_mm, M * 3 * C);
    linear_backward(p, g, s.qkv_lin, GptLoraTarget::kQkv, kQkvW, kQkvB, dwide, dqkv, 3 * C,
                    a.h1.data(), dnarrow, a);  // dh1
    layernorm_backward(s.x(l_), s.small_f32(p[kLn1W], 0), a.mean1.as<float>(), a.rstd1.as<float>(),
                       dnarrow, M, C, dres, wanted_grad(g, kLn1W), wanted_grad(g, kLn1B));
  }

  GptModel::State& s_;
  int l_;
};

class HeadUnit : public GptUnit {
 public:
  explicit HeadUnit(GptModel::State& s) : GptUnit(s.cfg, 1 + s.L), s_(s) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    ThreadScope scope(s_.threads);
    GptModel::State& s = s_;
    layernorm_forward(s.x(s.L), s.small_f32(p[0], 0), s.small_f32(p[1], 1), s.M, s.C, s.hf.data(),
                      s.mm, s.meanf.as<float>(), s.rstdf.as<float>());
    float* logits = s.logits.as<float>();
    s.head_lin.forward(s.hf.data(), s.weight_mm(p[2]), nullptr, logits);
    if (s.inference) {
      std::memcpy(s.last_logits.data(), logits + static_cast<int64_t>(s.inference_length - 1) * s.V,
                  sizeof(float) * s.V);
      return;
    }
    // The logits become probabilities in place; backward turns them into dlogits.
    s.loss = cross_entropy_forward(logits, s.targets.as<int32_t>(), s.M, s.V, logits,
                                   s.row_loss.as<float>());
  }
  // Seeds the gradient with info.loss_scale; must follow this micro-batch's training forward
  // (it consumes the probabilities in place).
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) override {
    check_params(p);
    check_backward(s_.inference);
    ThreadScope scope(s_.threads);
    GptModel::State& s = s_;
    float* dlogits = s.logits.as<float>();
    cross_entropy_backward(dlogits, s.targets.as<int32_t>(), s.M, s.V, info.loss_scale, dlogits);
    const void* dl = s.to_mm(dlogits, s.dwide_mm, s.M * s.V);
    float* dh = s.dnarrow.as<float>();
    s.head_lin.backward(dl, s.hf.data(), s.weight_mm(p[2]), dh, wanted_grad(g, 2));
    float* dres = s.dres.as<float>();
    std::memset(dres, 0, sizeof(float) * s.M * s.C);
    layernorm_backward(s.x(s.L), s.small_f32(p[0], 0), s.meanf.as<float>(), s.rstdf.as<float>(), dh,
                       s.M, s.C, dres, wanted_grad(g, 0), wanted_grad(g, 1));
  }

 private:
  GptModel::State& s_;
};

}  // namespace

std::vector<std::unique_ptr<Unit>> make_gpt_units(GptModel::State& s) {
  return gpt_unit_list<EmbedUnit, BlockUnit, HeadUnit>(s, s.L);
}

}  // namespace zs::nn
