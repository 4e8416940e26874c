// GptModel: buffers, ids, loss and logits. The units are in gpt_units.cc; the checks and
// bookkeeping both devices share in gpt_model_base.cc.
#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "core/error.h"
#include "models/gpt/gpt_activations.h"
#include "models/gpt/gpt_specs.h"
#include "models/gpt/gpt_state.h"
#include "nn/kernels.h"
#include "nn/threads.h"

namespace zs::nn {

std::vector<std::unique_ptr<Unit>> make_gpt_units(GptModel::State& s);  // gpt_units.cc

GptModel::State::State(const GptConfig& c, MemoryTracker* t) : GptDims(c), cfg(c), tracker(t) {
  // Every buffer from gpt_buffer_table() (models/gpt/gpt_buffers.h), which activation_plan(), the
  // planner and the CUDA model read too: the model and its plan cannot drift apart.
  const GptBufferTable table = gpt_buffer_table(GptActivationDims::of(c), DeviceKind::kCpu);
  mm = table.mm;
  threads = c.run.threads > 0 ? c.run.threads : default_threads();  // as the table's tiles
  allocate_gpt_buffers(table, *this, acts,
                       [&](int64_t bytes, GptBufferPart) { return act(bytes); });

  gemm_ws = std::make_unique<GemmWorkspace>(tracker);
  GemmWorkspace* ws = gemm_ws.get();
  const GptArchitecture& a = c.arch;
  qkv_lin = Linear(M, C, Q, a.qkv_bias, false, mm, tracker, ws);
  proj_lin = Linear(M, D, C, a.proj_bias, true, mm, tracker, ws);
  fc_lin = Linear(M, C, G, a.mlp_bias, false, mm, tracker, ws);
  fcproj_lin = Linear(M, F, C, a.mlp_bias, true, mm, tracker, ws);
  head = LmHead(M, C, V, table.head_rows, mm, tracker, ws);
  // D = H hd: the attention's q and output width.
  if (c.run.attention == GptAttention::kFused)
    flash = FlashAttention(B, T, D, H, KV, mm, threads);
  else
    attn = Attention(B, T, D, H, KV, mm, tracker, ws);
  if (c.adapters.lora.enabled()) {
    lora_rank = c.adapters.lora.rank;
    int slot = 0;
    for (int t = 0; t < kNumGptLoraTargets; ++t) {
      lora_index[t] = gpt_lora_param_index(c, static_cast<GptLoraTarget>(t));
      if (lora_index[t] < 0) continue;
      lora_slot[t] = slot++;
      const auto target = static_cast<GptLoraTarget>(t);
      int64_t in = 0, out = 0, base_in = 0, base_out = 0;
      gpt_lora_linear_shape(target, a, &in, &out);
      gpt_lora_linear_shape(gpt_lora_base_linear(target), a, &base_in, &base_out);
      lora_offset[t] = gpt_lora_row_offset(target, a);
      lora[t] =
          LoraAdapter(M, in, out, lora_rank, c.adapters.lora.scaling(), mm, tracker, ws, base_out);
    }
  }
  if (c.adapters.int8.accept) {
    int8_ws = std::make_unique<GemmWorkspace>(tracker);
    const GptActivationDims dims = GptActivationDims::of(c);
    for (int t = 0; t < kNumGptLinears; ++t) {
      int8_lin[t] = Int8Linear(gpt_int8_linear_desc(dims, static_cast<GptLoraTarget>(t)), tracker,
                               ws, int8_ws.get());
    }
    act_bytes += static_cast<int64_t>(int8_ws->size());
    for (const Int8Linear& l : int8_lin) act_bytes += l.scratchpad_bytes();
  }
  act_bytes += static_cast<int64_t>(gemm_ws->size());
  // [Note: GEMM scratchpads] in nn/gemm.h: oneDNN's, registered by each product.
  for (const Linear* l : {&qkv_lin, &proj_lin, &fc_lin, &fcproj_lin})
    act_bytes += l->scratchpad_bytes();
  act_bytes += head.scratchpad_bytes();
  act_bytes += attn.scratchpad_bytes();
  for (const LoraAdapter& l : lora) act_bytes += l.scratchpad_bytes();
}

Buffer GptModel::State::act(int64_t bytes) {
  act_bytes += bytes;
  return Buffer(static_cast<size_t>(bytes), MemCategory::kActivations, tracker);
}

AttentionWork GptModel::State::attn_work() {
  AttentionWork w;
  w.s = att_s.as<float>();
  w.o = att_o.as<float>();
  w.dom = att_dom.data();
  w.dsm = att_dsm.data();
  w.dq = att_dq.as<float>();
  w.dk = att_dk.as<float>();
  w.dv = att_dv.as<float>();
  return w;
}

const float* GptModel::State::small_f32(const ParamView* p, int slot) {
  if (p == nullptr) return nullptr;
  return small_f32(*p, slot);
}

const float* GptModel::State::small_f32(const ParamView& p, int slot) {
  if (p.dtype == DType::kF32) return p.as<float>();
  float* dst = pscratch.as<float>() + slot * std::max(G, Q);
  param_to_fp32(p, dst);
  return dst;
}

const void* GptModel::State::weight_mm(const ParamView& p) {
  if (p.dtype == mm) return p.data;
  param_to_fp32(p, wscratch.as<float>());
  return wscratch.data();
}

std::array<const void*, 2> GptModel::State::lora_weights_mm(const ParamView& a,
                                                            const ParamView& b) {
  if (a.dtype == mm && b.dtype == mm) return {a.data, b.data};
  float* a32 = lora_wscratch.as<float>();
  float* b32 = a32 + a.numel;
  param_to_fp32(a, a32);
  param_to_fp32(b, b32);
  return {a32, b32};
}

void* GptModel::State::lora_u(BlockActs& acts, int t) {
  const int64_t bytes = M * lora_rank * static_cast<int64_t>(dtype_size(mm));
  return static_cast<char*>(acts.lora_u.data()) + lora_slot[t] * bytes;
}

const void* GptModel::State::to_mm(const float* src, Buffer& dst, int64_t n) {
  if (mm == DType::kF32) return src;
  store_as(src, dst.data(), mm, 0, n);
  return dst.data();
}

GptModel::GptModel(const GptConfig& config, MemoryTracker* tracker) : GptModelBase(config) {
  threads_ = this->config().run.threads > 0 ? this->config().run.threads : default_threads();
  ThreadScope scope(threads_);  // primitives are created for the thread count they run with
  state_ = std::make_unique<State>(this->config(), tracker ? tracker : &MemoryTracker::process());
  state_->threads = threads_;
  set_units(make_gpt_units(*state_));
}

GptModel::~GptModel() = default;

double GptModel::loss() const { return state_->loss; }

int64_t GptModel::activation_bytes() const { return state_->act_bytes; }

ActivationPlan GptModel::activation_plan() const {
  GptActivationDims d = GptActivationDims::of(config());
  d.threads = threads_;  // the team its products were built for
  return gpt_activation_plan(d, DeviceKind::kCpu, this_process_cpu_gemm());
}

void GptModel::load_ids(const int32_t* tokens) {
  State& s = *state_;
  split_micro_batch(tokens, s.B, s.T, s.inputs.as<int32_t>(), s.targets.as<int32_t>());
  s.inference = false;
}

void GptModel::load_prompt(const int32_t* tokens, int length) {
  State& s = *state_;
  fill_inference_ids(tokens, length, s.M, s.inputs.as<int32_t>(), s.targets.as<int32_t>());
  s.inference = true;
  s.inference_length = length;
}

std::span<const float> GptModel::last_logits() const {
  return {state_->last_logits.as<float>(), static_cast<size_t>(state_->V)};
}

}  // namespace zs::nn
