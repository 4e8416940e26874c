// The Llama-form architectures the model, engine and planner tests run GptModel on ([Note:
// architecture components] in models/gpt/gpt_architecture.h): every component of the Llama family
// alone and together, at test sizes. Each case keeps the caller's sizes (layers, width, heads,
// context, vocab) and sets the components. tiny_config() is the small GPT the engine and planner
// tests share.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "models/gpt/gpt_config.h"

namespace zs::nn::testing {

struct ArchCase {
  std::string name;      // a gtest-safe name: letters, digits and '_'
  GptArchitecture arch;  // the components; sizes from the caller's base
};
// gtest prints a case by its name.
inline void PrintTo(const ArchCase& c, std::ostream* os) { *os << c.name; }

// Llama's components on `base`: RMSNorm (eps 1e-6), rotary positions (theta 10000), SwiGLU, no
// biases, kv_heads key/value heads, ffn elements of intermediate size (0: keep base's).
inline GptArchitecture llama_form(GptArchitecture base, int kv_heads, int ffn = 0) {
  base.norm = NormKind::kRMSNorm;
  base.norm_eps = 1e-6f;
  base.positions = PositionKind::kRotary;
  base.rope_theta = 10000.0f;
  base.mlp = MlpKind::kSwiGLU;
  base.qkv_bias = base.proj_bias = base.mlp_bias = false;
  base.kv_heads = kv_heads;
  if (ffn > 0) base.ffn = ffn;
  return base;
}

// Qwen3's components on `base`: Llama's with 2 key/value heads, per-head q/k RMSNorm, rope theta
// 1e6, tied embeddings, and a head_dim 4 wider than width / heads (Qwen3-0.6B's 16 heads of 128
// on a width of 1024: heads x head_dim is not the width).
inline GptArchitecture qwen3_form(GptArchitecture base) {
  GptArchitecture a = llama_form(base, 2);
  a.qk_norm = true;
  a.head_dim_override = base.width / base.heads + 4;
  a.rope_theta = 1e6f;
  a.tied_embeddings = true;
  return a;
}

// On `base` (heads even, head_dim even): all-Llama with one and
// two key/value heads, multi-head Llama, Qwen2-like (qkv biases only, theta 1e6), GPT-2 with two
// key/value heads, GPT-2 with an ffn that is not a multiple of the width, and Llama with that ffn;
// then tied embeddings (Llama, GPT-2) and Qwen3 (qwen3_form, last).
inline std::vector<ArchCase> llama_form_cases(const GptArchitecture& base) {
  const int odd_ffn = base.width * 5 / 2 + 4;  // not a multiple of the width
  std::vector<ArchCase> v;
  v.push_back({"llama_kv1", llama_form(base, 1)});
  v.push_back({"llama_kv2", llama_form(base, 2, odd_ffn)});
  v.push_back({"llama_mha", llama_form(base, 0)});
  GptArchitecture qwen = llama_form(base, 2);
  qwen.qkv_bias = true;
  qwen.rope_theta = 1e6f;
  v.push_back({"qwen2", qwen});
  GptArchitecture gqa = base;
  gqa.kv_heads = 2;
  v.push_back({"gpt2_kv2", gqa});
  GptArchitecture ffn = base;
  ffn.ffn = odd_ffn;
  v.push_back({"gpt2_ffn", ffn});
  // Tied input/output embeddings ([Note: tied parameters]): Llama with 2 key/value heads (as
  // SmolLM) and GPT-2 (as its checkpoints).
  GptArchitecture llama_tied = llama_form(base, 2);
  llama_tied.tied_embeddings = true;
  v.push_back({"llama_tied", llama_tied});
  GptArchitecture gpt2_tied = base;
  gpt2_tied.tied_embeddings = true;
  v.push_back({"gpt2_tied", gpt2_tied});
  v.push_back({"qwen3", qwen3_form(base)});
  return v;
}

// GPT-2's components (named "gpt2") on `base`, then the llama_form_cases() named in `names`.
inline std::vector<ArchCase> gpt2_and(const GptArchitecture& base,
                                      const std::vector<std::string>& names) {
  GptArchitecture gpt2;
  gpt2.layers = base.layers, gpt2.heads = base.heads, gpt2.width = base.width;
  gpt2.context = base.context, gpt2.vocab = base.vocab;
  std::vector<ArchCase> v{{"gpt2", gpt2}};
  for (const ArchCase& a : llama_form_cases(base))
    for (const std::string& n : names)
      if (a.name == n) v.push_back(a);
  return v;
}

// The cases the engine and LoRA/int8 planner tests run: "gpt2", "llama_kv2" (2 key/value heads of
// 4, ffn 84: not a multiple of the width), "qwen2" (qkv biases), "llama_tied" (tied embeddings)
// and "qwen3" (q/k norms, 4 heads of 12 on a width of 32), for tiny_config().
inline std::vector<ArchCase> tiny_archs() {
  GptArchitecture base;
  base.width = 32;
  base.heads = 4;
  return gpt2_and(base, {"llama_kv2", "qwen2", "llama_tied", "qwen3"});
}

// A tiny GPT of `arch`'s components: 2 layers, width 32, 2 heads of 16 for "gpt2" and 4 of 8
// otherwise, context 16, vocabulary 64, batch 2, one thread, compute dtype `dt`.
inline GptConfig tiny_config(const ArchCase& arch, DType dt) {
  GptConfig c;
  c.arch = arch.arch;
  c.arch.layers = 2;
  c.arch.heads = arch.name == "gpt2" ? 2 : 4;
  c.arch.width = 32;
  c.arch.context = 16;
  c.arch.vocab = 64;
  c.run.batch = 2;
  c.run.threads = 1;
  c.run.compute_dtype = dt;
  return c;
}

}  // namespace zs::nn::testing
