// Rope scaling: how a rotary model's inverse frequencies are stretched to reach past the context it
// was pretrained at, as Hugging Face transformers computes them (modeling_rope_utils.py,
// ROPE_INIT_FUNCTIONS). Two kinds are implemented, the ones Llama checkpoints carry:
//   linear  inv_freq[i] / factor (_compute_linear_scaling_rope_parameters; Llama-2 long-context
//           fine-tunes).
//   llama3  Llama-3.1/3.2's (_compute_llama3_parameters): frequencies whose wavelength 2 pi /
//           inv_freq is above original / low_freq_factor are divided by factor, those below
//           original / high_freq_factor are kept, those between are blended with
//           s = (original / wavelength - low) / (high - low): (1 - s) inv_freq / factor +
//           s inv_freq.
// Neither scales the attention (transformers' attention_factor is 1 for both). The text form,
// also --rope-scaling's value and the checkpoints' description: "none", "linear:factor=F",
// "llama3:factor=F,low=L,high=H,original=N".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zs::nn {

enum class RopeScalingKind : uint8_t { kNone, kLinear, kLlama3 };

struct RopeScaling {
  RopeScalingKind kind = RopeScalingKind::kNone;
  // Doubles, as config.json's numbers are in Python: transformers takes low / high / original in
  // double and rounds factor to fp32 where it meets the fp32 frequencies. Kinds that do not use
  // a field keep its default, so that == compares what is computed.
  double factor = 1.0;            // linear, llama3: "factor"
  double low_freq_factor = 1.0;   // llama3: "low_freq_factor"
  double high_freq_factor = 4.0;  // llama3: "high_freq_factor"
  int original_context = 8192;    // llama3: "original_max_position_embeddings"

  bool enabled() const { return kind != RopeScalingKind::kNone; }
  // Throws zs::Error(kInvalidArgument) "rope scaling: ..." naming the first bad field: factor
  // finite and at least 1; llama3's low_freq_factor above 0, high_freq_factor above it,
  // original_context positive.
  void validate() const;
  bool operator==(const RopeScaling&) const = default;
};

const char* rope_scaling_kind_name(RopeScalingKind k);  // "none", "linear", "llama3"

// The text form ("none", "linear:factor=4", "llama3:factor=32,low=1,high=4,original=8192"), the
// numbers in their shortest decimal form.
std::string rope_scaling_text(const RopeScaling& s);
// The inverse of rope_scaling_text, validated. Every field of the kind is required, in any order,
// once. Throws zs::Error(kInvalidArgument) naming what is wrong (the caller names the flag).
RopeScaling parse_rope_scaling(const std::string& text);

// The inverse frequencies [hd / 2] of rotary positions with base `theta`, scaled by `s`, each step
// in fp32 as transformers computes them (the Python scalars in double, rounded where they meet
// the fp32 tensor). rope_forward and rope_backward rotate by t * rope_inv_freq(...)[i].
std::vector<float> rope_inv_freq(int hd, float theta, const RopeScaling& s = {});

}  // namespace zs::nn
