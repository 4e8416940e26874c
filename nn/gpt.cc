// GptModel: configuration, buffers, token handling. The units are in gpt_units.cc.
#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "core/error.h"
#include "nn/gpt_activations.h"
#include "nn/gpt_state.h"
#include "nn/kernels.h"
#include "nn/threads.h"

namespace zs::nn {

std::vector<std::unique_ptr<Unit>> make_gpt_units(GptModel::State& s);  // gpt_units.cc

void GptConfig::validate() const {
  auto pos = [](int v, const char* name) {
    ZS_CHECK(v > 0, ErrorCode::kInvalidArgument, "gpt config: {} must be positive, got {}", name,
             v);
  };
  pos(layers, "layers");
  pos(heads, "heads");
  pos(width, "width");
  pos(context, "context");
  pos(vocab, "vocab");
  pos(batch, "batch");
  pos(ffn_mult, "ffn_mult");
  ZS_CHECK(width % heads == 0, ErrorCode::kInvalidArgument,
           "gpt config: width {} must divide by heads {}", width, heads);
  // The layer norm's row buffers bound the width; the vocabulary is unbounded (GPT-2's 50257).
  ZS_CHECK(width <= kMaxRow, ErrorCode::kInvalidArgument, "gpt config: width {} must be at most {}",
           width, kMaxRow);
  ZS_CHECK(
      compute_dtype == DType::kF32 || compute_dtype == DType::kBF16 || compute_dtype == DType::kF16,
      ErrorCode::kInvalidArgument, "gpt config: compute dtype must be fp32, bf16 or fp16, got {}",
      dtype_name(compute_dtype));
  ZS_CHECK(threads >= 0, ErrorCode::kInvalidArgument, "gpt config: threads {} < 0", threads);
}

int64_t GptConfig::num_params() const {
  const int64_t C = width, F = static_cast<int64_t>(ffn_mult) * width, V = vocab, T = context;
  const int64_t embed = V * C + T * C;
  const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + F * C + F + C * F + C;
  const int64_t head = 2 * C + V * C;
  return embed + layers * block + head;
}

GptModel::State::State(const GptConfig& c, MemoryTracker* t) : cfg(c), tracker(t) {
  B = c.batch;
  T = c.context;
  C = c.width;
  H = c.heads;
  F = c.ffn_mult * c.width;
  V = c.vocab;
  L = c.layers;
  M = static_cast<int64_t>(B) * T;
  // Every size from gpt_cpu_bytes() (nn/gpt_activations.h), which activation_plan() and the
  // planner read too: the model and its plan cannot drift apart.
  const GptCpuBytes n = gpt_cpu_bytes(GptActivationDims::of(c));
  mm = n.mm;
  inputs = act(n.inputs);
  targets = act(n.targets);
  xs = act(n.xs);
  acts.resize(static_cast<size_t>(n.block_sets));
  for (BlockActs& a : acts) a.allocate(n.block, [&](int64_t b) { return act(b); });
  hf = act(n.hf);
  meanf = act(n.meanf);
  rstdf = act(n.rstdf);
  logits = act(n.logits);
  row_loss = act(n.row_loss);
  last_logits = act(n.last_logits);

  qkv = act(n.qkv);
  att_s = act(n.att_s);
  att_o = act(n.att_o);
  att_dom = act(n.att_dom);
  if (n.att_dsm > 0) att_dsm = act(n.att_dsm);
  att_dq = act(n.att_dq);
  att_dk = act(n.att_dk);
  att_dv = act(n.att_dv);
  dres = act(n.dres);
  dwide = act(n.dwide);
  if (n.dwide_mm > 0) dwide_mm = act(n.dwide_mm);
  dnarrow = act(n.dnarrow);
  if (n.dnarrow_mm > 0) dnarrow_mm = act(n.dnarrow_mm);
  if (n.wscratch > 0) wscratch = act(n.wscratch);
  pscratch = act(n.pscratch);

  gemm_ws = std::make_unique<GemmWorkspace>(tracker);
  GemmWorkspace* ws = gemm_ws.get();
  qkv_lin = Linear(M, C, 3 * C, true, false, mm, tracker, ws);
  proj_lin = Linear(M, C, C, true, true, mm, tracker, ws);
  fc_lin = Linear(M, C, F, true, false, mm, tracker, ws);
  fcproj_lin = Linear(M, F, C, true, true, mm, tracker, ws);
  head_lin = Linear(M, C, V, false, false, mm, tracker, ws);
  attn = Attention(B, T, C, H, mm, tracker, ws);
  act_bytes += static_cast<int64_t>(gemm_ws->size());
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

const float* GptModel::State::small_f32(const ParamView& p, int slot) {
  if (p.dtype == DType::kF32) return p.as<float>();
  float* dst = pscratch.as<float>() + slot * std::max<int64_t>(F, 3 * C);
  param_to_fp32(p, dst);
  return dst;
}

const void* GptModel::State::weight_mm(const ParamView& p) {
  if (p.dtype == mm) return p.data;
  param_to_fp32(p, wscratch.as<float>());
  return wscratch.data();
}

const void* GptModel::State::to_mm(const float* src, Buffer& dst, int64_t n) {
  if (mm == DType::kF32) return src;
  store_as(src, dst.data(), mm, 0, n);
  return dst.data();
}

GptModel::GptModel(const GptConfig& config, MemoryTracker* tracker) : config_(config) {
  config_.validate();
  threads_ = config_.threads > 0 ? config_.threads : default_threads();
  ThreadScope scope(threads_);  // primitives are created for the thread count they run with
  state_ = std::make_unique<State>(config_, tracker ? tracker : &MemoryTracker::process());
  state_->threads = threads_;
  units_ = make_gpt_units(*state_);
}

GptModel::~GptModel() = default;

size_t GptModel::num_units() const { return units_.size(); }

Unit& GptModel::unit(size_t i) {
  ZS_CHECK(i < units_.size(), ErrorCode::kInvalidArgument, "gpt: unit {} of {}", i, units_.size());
  return *units_[i];
}

double GptModel::loss() const { return state_->loss; }

int64_t GptModel::activation_bytes() const { return state_->act_bytes; }

ActivationPlan GptModel::activation_plan() const {
  return gpt_activation_plan(config(), DeviceKind::kCpu, this_process_cpu_gemm());
}

void GptModel::set_tokens(std::span<const int32_t> tokens) {
  const int64_t per_mb = static_cast<int64_t>(config_.batch) * (config_.context + 1);
  ZS_CHECK(!tokens.empty() && static_cast<int64_t>(tokens.size()) % per_mb == 0,
           ErrorCode::kInvalidArgument,
           "gpt: {} tokens is not a whole number of micro-batches of {} x {}", tokens.size(),
           config_.batch, config_.context + 1);
  for (size_t i = 0; i < tokens.size(); ++i)
    ZS_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab, ErrorCode::kInvalidArgument,
             "gpt: token {} at index {} outside [0, {})", tokens[i], i, config_.vocab);
  state_->tokens = tokens;
  num_token_mb_ = static_cast<int>(static_cast<int64_t>(tokens.size()) / per_mb);
}

void GptModel::load_micro_batch(int index) {
  ZS_CHECK(index >= 0 && index < num_token_mb_, ErrorCode::kInvalidArgument,
           "gpt: micro-batch {} requested, {} set by set_tokens()", index, num_token_mb_);
  State& s = *state_;
  const int T = s.T;
  const int32_t* src = s.tokens.data() + static_cast<int64_t>(index) * s.B * (T + 1);
  int32_t* in = s.inputs.as<int32_t>();
  int32_t* tg = s.targets.as<int32_t>();
  for (int b = 0; b < s.B; ++b) {
    std::memcpy(in + static_cast<int64_t>(b) * T, src + static_cast<int64_t>(b) * (T + 1),
                sizeof(int32_t) * T);
    std::memcpy(tg + static_cast<int64_t>(b) * T, src + static_cast<int64_t>(b) * (T + 1) + 1,
                sizeof(int32_t) * T);
  }
  s.inference = false;
}

void GptModel::set_inference_input(const int32_t* tokens, int length) {
  State& s = *state_;
  ZS_CHECK(length >= 1 && length <= s.T, ErrorCode::kInvalidArgument,
           "gpt: inference length {} outside [1, {}]", length, s.T);
  for (int i = 0; i < length; ++i)
    ZS_CHECK(tokens[i] >= 0 && tokens[i] < s.V, ErrorCode::kInvalidArgument,
             "gpt: token {} at index {} outside [0, {})", tokens[i], i, s.V);
  // [Note: inference shape] The forward runs the training shape (batch x context): row 0 holds
  // the prompt padded with zeros, which causal attention never lets the prompt's positions see.
  int32_t* in = s.inputs.as<int32_t>();
  std::fill(in, in + s.M, 0);
  std::memcpy(in, tokens, sizeof(int32_t) * length);
  std::fill(s.targets.as<int32_t>(), s.targets.as<int32_t>() + s.M, 0);
  s.inference = true;
  s.inference_length = length;
}

std::span<const float> GptModel::last_logits() const {
  return {state_->last_logits.as<float>(), static_cast<size_t>(state_->V)};
}

}  // namespace zs::nn
