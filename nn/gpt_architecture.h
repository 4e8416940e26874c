// The architecture of zeroshard's GPT (nn/gpt_model_base.h): what a Hugging Face GPT-2 config.json
// describes (n_layer, n_head, n_embd, n_positions, vocab_size, n_inner) and nothing of a run. The
// run's settings (nn/gpt_config.h: GptRunSettings) and the adapters (nn/gpt_adapters.h) are apart.
#pragma once

#include <cstdint>

namespace zs::nn {

struct GptArchitecture {
  int layers = 4;     // L: blocks (n_layer)
  int heads = 4;      // H (n_head)
  int width = 256;    // C (n_embd); must divide by heads
  int context = 128;  // T: sequence length of training and the largest inference length
  int vocab = 256;    // V (vocab_size)
  int ffn_mult = 4;   // F = ffn_mult * width (n_inner / n_embd)

  // F in elements.
  int ffn_width() const { return ffn_mult * width; }
  // Throws zs::Error(kInvalidArgument) "gpt config: ..." naming the first bad field.
  void validate() const;
  // Parameter elements of the base model (embeddings, blocks, head), no adapters, no padding.
  int64_t num_params() const;
  // Parameter elements of one base block (layer norms, qkv, proj, fc, fc_proj with biases).
  int64_t num_block_params() const;

  bool operator==(const GptArchitecture&) const = default;
};

}  // namespace zs::nn
