// The units of CudaGptModel: embeddings, transformer blocks, head (names, parameters and checks
// from GptUnit, models/gpt/gpt_common.h, as the CPU model's). Each forward/backward only enqueues
// work on the model's stream over the buffers of CudaGptModel::State
// (models/gpt/cuda/gpt_cuda_state.h).
#include <string>

#include "core/error.h"
#include "device/cuda/cuda_error.h"
#include "models/gpt/cuda/gpt_cuda_state.h"
#include "models/gpt/gpt_specs.h"
#include "nn/cuda/kernels.h"

namespace zs::nn {

// The CUDA model is GPT-2's (check_gpt_cuda_components, models/gpt/gpt_activations.h): every block
// parameter is present, at the indices GptBlockLayout::of() gives a GPT-2 architecture.
enum Gpt2BlockParam : int {
  kLn1W,
  kLn1B,
  kQkvW,
  kQkvB,
  kProjW,
  kProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kFcProjW,
  kFcProjB
};

namespace {

using State = CudaGptModel::State;

// GptUnit with the device's check: the engine hands every view in the compute dtype.
class CudaGptUnit : public GptUnit {
 public:
  CudaGptUnit(const State& s, size_t index) : GptUnit(s.cfg, index), mm_(s.mm) {}

 protected:
  // The parameter count, and every view in the compute dtype.
  void check_params(std::span<const ParamView> params) const {
    GptUnit::check_params(params);
    for (const ParamView& p : params) {
      ZS_CHECK(p.dtype == mm_, ErrorCode::kInvalidArgument,
               "{}: parameter '{}' given in {}, the model computes in {}", name(),
               p.spec ? p.spec->name : std::string("?"), dtype_name(p.dtype), dtype_name(mm_));
    }
  }

 private:
  DType mm_;
};

class EmbedUnit : public CudaGptUnit {
 public:
  explicit EmbedUnit(State& s) : CudaGptUnit(s, 0), s_(s) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    cuda_check(gpu::embedding_forward(s_.inputs(), s_.B, s_.T, s_.C, p[0].data, p[1].data, s_.mm,
                                      s_.x(0), s_.stream),
               "embedding_forward");
  }
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo&) override {
    check_params(p);
    check_backward(s_.inference);
    cuda_check(gpu::embedding_backward(s_.emb_order(), s_.emb_row_ids(), s_.emb_offsets(),
                                       s_.emb_rows, s_.B, s_.T, s_.C, s_.dres.as<float>(),
                                       g.grad(0), g.grad(1), s_.stream),
               "embedding_backward");
  }

 private:
  State& s_;
};

class BlockUnit : public CudaGptUnit {
 public:
  BlockUnit(State& s, int layer) : CudaGptUnit(s, 1 + layer), s_(s), l_(layer) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    run_forward(p);
  }
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo&) override {
    check_params(p);
    if (s_.cfg.run.checkpoint_activations) run_forward(p);  // recompute into the shared set
    run_backward(p, g);
  }

 private:
  void run_forward(std::span<const ParamView> p) {
    State& s = s_;
    CudaBlockActs& a = s.block_acts(l_);
    const int64_t M = s.M, C = s.C, F = s.F;
    cudaStream_t st = s.stream;
    const float* x = s.x(l_);
    float* y = s.x(l_ + 1);
    float* tmp = s.dnarrow.as<float>();  // free during forward (and before a block's backward)
    cuda_check(
        gpu::layernorm_forward(x, s.small_f32(p[kLn1W], 0), s.small_f32(p[kLn1B], 1), M, s.C,
                               a.h1.data(), s.mm, a.mean1.as<float>(), a.rstd1.as<float>(), st),
        "layernorm_forward");
    s.qkv_lin.forward(a.h1.data(), p[kQkvW].data, s.small_f32(p[kQkvB], 2), s.qkv.as<float>(), st);
    s.attn.forward(s.qkv.as<float>(), a.attn(), s.attn_work(), a.a.data(), st);
    // Residual: x2 = x + (a proj^T + b).
    s.proj_lin.forward(a.a.data(), p[kProjW].data, s.small_f32(p[kProjB], 3), tmp, st);
    cuda_check(gpu::residual_add(x, tmp, a.x2.as<float>(), M * C, st), "residual_add");
    cuda_check(gpu::layernorm_forward(a.x2.as<float>(), s.small_f32(p[kLn2W], 0),
                                      s.small_f32(p[kLn2B], 1), M, s.C, a.h2.data(), s.mm,
                                      a.mean2.as<float>(), a.rstd2.as<float>(), st),
               "layernorm_forward");
    s.fc_lin.forward(a.h2.data(), p[kFcW].data, s.small_f32(p[kFcB], 2), a.f.as<float>(), st);
    cuda_check(gpu::gelu_forward(a.f.as<float>(), a.g.data(), s.mm, M * F, st), "gelu_forward");
    // Residual: y = x2 + (g fc_proj^T + b).
    s.fcproj_lin.forward(a.g.data(), p[kFcProjW].data, s.small_f32(p[kFcProjB], 3), tmp, st);
    cuda_check(gpu::residual_add(a.x2.as<float>(), tmp, y, M * C, st), "residual_add");
  }

  // On entry s.dres = dL/d(block output); on exit dL/d(block input).
  void run_backward(std::span<const ParamView> p, GradViews& g) {
    State& s = s_;
    CudaBlockActs& a = s.block_acts(l_);
    const int64_t M = s.M;
    const int C = s.C, F = s.F;
    cudaStream_t st = s.stream;
    float* dres = s.dres.as<float>();
    float* dwide = s.dwide.as<float>();
    float* dnarrow = s.dnarrow.as<float>();
    float* bscratch = s.bias_scratch.as<float>();

    // MLP: y = x2 + fc_proj(gelu(fc(ln2(x2)))).
    const void* dy = s.to_mm(dres, s.dnarrow_mm, M * C);
    s.fcproj_lin.backward_data(dy, p[kFcProjW].data, dwide, st);  // dg [M, F]
    s.fcproj_lin.backward_weight(dy, a.g.data(), g.grad(kFcProjW), st);
    cuda_check(gpu::bias_backward(dres, M, C, g.grad(kFcProjB), bscratch, st), "bias_backward");
    cuda_check(gpu::gelu_backward(a.f.as<float>(), dwide, dwide, M * F, st), "gelu_backward");
    const void* df = s.to_mm(dwide, s.dwide_mm, M * F);
    s.fc_lin.backward_data(df, p[kFcW].data, dnarrow, st);  // dh2
    s.fc_lin.backward_weight(df, a.h2.data(), g.grad(kFcW), st);
    cuda_check(gpu::bias_backward(dwide, M, F, g.grad(kFcB), bscratch, st), "bias_backward");
    cuda_check(gpu::layernorm_backward(a.x2.as<float>(), s.small_f32(p[kLn2W], 0),
                                       a.mean2.as<float>(), a.rstd2.as<float>(), dnarrow, M, C,
                                       dres, g.grad(kLn2W), g.grad(kLn2B), bscratch, st),
               "layernorm_backward");

    // Attention: x2 = x + proj(attn(qkv(ln1(x)))).
    const void* dx2 = s.to_mm(dres, s.dnarrow_mm, M * C);
    s.proj_lin.backward_data(dx2, p[kProjW].data, dnarrow, st);  // da
    s.proj_lin.backward_weight(dx2, a.a.data(), g.grad(kProjW), st);
    cuda_check(gpu::bias_backward(dres, M, C, g.grad(kProjB), bscratch, st), "bias_backward");
    s.attn.backward(dnarrow, a.attn(), s.attn_work(), dwide, st);  // dqkv [M, 3C]
    const void* dqkv = s.to_mm(dwide, s.dwide_mm, M * 3 * C);
    s.qkv_lin.backward_data(dqkv, p[kQkvW].data, dnarrow, st);  // dh1
    s.qkv_lin.backward_weight(dqkv, a.h1.data(), g.grad(kQkvW), st);
    cuda_check(gpu::bias_backward(dwide, M, 3 * C, g.grad(kQkvB), bscratch, st), "bias_backward");
    cuda_check(gpu::layernorm_backward(s.x(l_), s.small_f32(p[kLn1W], 0), a.mean1.as<float>(),
                                       a.rstd1.as<float>(), dnarrow, M, C, dres, g.grad(kLn1W),
                                       g.grad(kLn1B), bscratch, st),
               "layernorm_backward");
  }

  State& s_;
  int l_;
};

class HeadUnit : public CudaGptUnit {
 public:
  explicit HeadUnit(State& s) : CudaGptUnit(s, 1 + s.L), s_(s) {}
  void forward(std::span<const ParamView> p, const StepInfo&) override {
    check_params(p);
    State& s = s_;
    cudaStream_t st = s.stream;
    cuda_check(
        gpu::layernorm_forward(s.x(s.L), s.small_f32(p[0], 0), s.small_f32(p[1], 1), s.M, s.C,
                               s.hf.data(), s.mm, s.meanf.as<float>(), s.rstdf.as<float>(), st),
        "layernorm_forward");
    float* logits = s.logits.as<float>();
    s.head_lin.forward(s.hf.data(), p[2].data, nullptr, logits, st);
    if (s.inference) {
      cuda_check(cudaMemcpyAsync(s.logits_host.data(),
                                 logits + static_cast<int64_t>(s.inference_length - 1) * s.V,
                                 sizeof(float) * s.V, cudaMemcpyDeviceToHost, st),
                 "logits read-back");
      cuda_check(cudaEventRecord(s.logits_ready.get(), st), "cudaEventRecord");
      return;
    }
    // The logits become probabilities in place; backward turns them into dlogits. The per-row
    // losses go to the host now; loss() waits for them.
    cuda_check(gpu::cross_entropy_forward(logits, s.targets(), s.M, s.V, logits,
                                          s.row_loss.as<float>(), st),
               "cross_entropy_forward");
    cuda_check(cudaMemcpyAsync(s.row_loss_host.data(), s.row_loss.data(), sizeof(float) * s.M,
                               cudaMemcpyDeviceToHost, st),
               "loss read-back");
    cuda_check(cudaEventRecord(s.loss_ready.get(), st), "cudaEventRecord");
    s.have_loss = true;
  }
  // Seeds the gradient with info.loss_scale; must follow this micro-batch's training forward
  // (it consumes the probabilities in place).
  void backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) override {
    check_params(p);
    check_backward(s_.inference);
    State& s = s_;
    cudaStream_t st = s.stream;
    float* dlogits = s.logits.as<float>();
    cuda_check(
        gpu::cross_entropy_backward(dlogits, s.targets(), s.M, s.V, info.loss_scale, dlogits, st),
        "cross_entropy_backward");
    const void* dl = s.to_mm(dlogits, s.dwide_mm, s.M * s.V);
    float* dh = s.dnarrow.as<float>();
    s.head_lin.backward_data(dl, p[2].data, dh, st);
    s.head_lin.backward_weight(dl, s.hf.data(), g.grad(2), st);
    float* dres = s.dres.as<float>();
    cuda_check(cudaMemsetAsync(dres, 0, sizeof(float) * s.M * s.C, st), "cudaMemsetAsync");
    cuda_check(gpu::layernorm_backward(s.x(s.L), s.small_f32(p[0], 0), s.meanf.as<float>(),
                                       s.rstdf.as<float>(), dh, s.M, s.C, dres, g.grad(0),
                                       g.grad(1), s.bias_scratch.as<float>(), st),
               "layernorm_backward");
  }

 private:
  State& s_;
};

}  // namespace

std::vector<std::unique_ptr<Unit>> make_cuda_gpt_units(CudaGptModel::State& s) {
  return gpt_unit_list<EmbedUnit, BlockUnit, HeadUnit>(s, s.L);
}

}  // namespace zs::nn
