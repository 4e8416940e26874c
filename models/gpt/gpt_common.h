// Internal to nn/: the host-side pieces the CPU GPT (models/gpt/gpt_state.h, gpt_units.cc) and the
// CUDA GPT (models/gpt/cuda/gpt_cuda_state.h, gpt_cuda_units.cc) share: the buffer dimensions, the
// unit base (name, parameters, argument checks) and the unit list, and the layout of the ids the
// forward reads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "unit/unit.h"

namespace zs::nn {

// The dimensions of a GPT's buffers, from its (validated) config.
struct GptDims {
  explicit GptDims(const GptConfig& c);
  int B = 0;      // sequences per micro-batch
  int T = 0;      // context
  int C = 0;      // width
  int H = 0;      // heads
  int F = 0;      // FFN width (GptArchitecture::ffn_width())
  int KV = 0;     // key/value heads
  int hd = 0;     // head dim (GptArchitecture::head_dim())
  int D = 0;      // attention width H hd (C unless head_dim is set)
  int Q = 0;      // qkv columns: D + 2 KV hd
  int G = 0;      // fc columns: F (GELU) or 2F (SwiGLU's gate and up)
  int V = 0;      // vocabulary
  int L = 0;      // blocks
  int64_t M = 0;  // B * T rows
};

// A unit of a GPT model: its name and parameters from models/gpt/gpt_specs.h (unit 0 "embed", units
// 1..L "block.<l>", unit L + 1 "head"). The device classes add forward and backward.
class GptUnit : public Unit {
 public:
  GptUnit(const GptConfig& c, size_t index);
  std::string name() const final;
  std::vector<ParamSpec> param_specs() const final;

 protected:
  // Throws zs::Error(kInvalidArgument) naming the unit unless `params` holds its parameters.
  void check_params(std::span<const ParamView> params) const;
  // Throws zs::Error(kInvalidArgument) naming the unit when the last forward was an inference
  // forward (backward needs a training forward's activations).
  void check_backward(bool inference) const;

  const GptConfig config_;
  const size_t index_;
  const size_t num_params_;
};

// The units in their order: Embed(s), Block(s, l) for l in [0, layers), Head(s).
template <typename Embed, typename Block, typename Head, typename State>
std::vector<std::unique_ptr<Unit>> gpt_unit_list(State& s, int layers) {
  std::vector<std::unique_ptr<Unit>> units;
  units.push_back(std::make_unique<Embed>(s));
  for (int l = 0; l < layers; ++l) units.push_back(std::make_unique<Block>(s, l));
  units.push_back(std::make_unique<Head>(s));
  return units;
}

// One micro-batch `tokens` [batch][context + 1] as inputs [batch][context] (tokens[:, :-1]) and
// targets [batch][context] (tokens[:, 1:]).
void split_micro_batch(const int32_t* tokens, int batch, int context, int32_t* inputs,
                       int32_t* targets);

// [Note: inference shape] An inference forward runs the training shape (batch x context): row 0
// of the inputs holds the prompt padded with zeros, which causal attention never lets the
// prompt's positions see; every other input and every target is zero. The logits of position
// length - 1 are the result. `inputs` and `targets` hold M = batch * context ids each.
void fill_inference_ids(const int32_t* prompt, int length, int64_t M, int32_t* inputs,
                        int32_t* targets);

}  // namespace zs::nn
