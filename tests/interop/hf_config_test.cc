// config.json <-> GptArchitecture for every family (interop/hf_config.h): config.json texts as
// transformers 4.x writes them for TinyLlama-1.1B, SmolLM-135M, Llama-3-8B, Mistral-7B-v0.1 and
// Qwen2-0.5B, and as transformers 5.x writes them (rope_parameters, dtype, head_dim, layer_types),
// parse to the architecture each model has; every field we do not compute is refused with its name
// and value; an export's config.json parses back to the same architecture.
#include <functional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "interop/hf_config.h"

namespace zs::nn {
namespace {

using nlohmann::json;

// Llama-3-8B's config.json as transformers 4.40 wrote it.
const char* kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.0.dev0", "use_cache": true, "vocab_size": 128256})";

// The same model as transformers 5.x writes it.
const char* kLlama3V5 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "dtype": "bfloat16", "eos_token_id": 128001, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 8192, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"},
  "tie_word_embeddings": false, "transformers_version": "5.0.0", "use_cache": true,
  "vocab_size": 128256})";

const char* kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 5632, "max_position_embeddings": 2048, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.35.0",
  "use_cache": true, "vocab_size": 32000})";

const char* kSmolLM = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "silu", "hidden_size": 576,
  "initializer_range": 0.02, "intermediate_size": 1536, "max_position_embeddings": 2048,
  "model_type": "llama", "num_attention_heads": 9, "num_hidden_layers": 30,
  "num_key_value_heads": 3, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
  "rope_theta": 10000.0, "tie_word_embeddings": true, "torch_dtype": "float32",
  "transformers_version": "4.40.1", "use_cache": true, "vocab_size": 49152})";

const char* kMistral = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2,
  "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

const char* kQwen2 = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
  "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
  "intermediate_size": 4864, "max_position_embeddings": 131072, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

// Qwen2-0.5B as transformers 5.x writes it: rope_parameters, dtype, layer_types.
std::string qwen2_v5() {
  json j = json::parse(kQwen2);
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "bfloat16";
  j["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  j["layer_types"] = json::array();
  for (int i = 0; i < 24; ++i) j["layer_types"].push_back("full_attention");
  j["sliding_window"] = nullptr;
  return j.dump();
}

const char* kGpt2V5 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "dtype": "float32", "embd_pdrop": 0.1, "eos_token_id": 50256,
  "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024,
  "n_embd": 768, "n_head": 12, "n_inner": null, "n_layer": 12, "n_positions": 1024,
  "reorder_and_upcast_attn": false, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false,
  "scale_attn_weights": true, "transformers_version": "5.0.0", "use_cache": true,
  "vocab_size": 50257})";

// The Llama-family architecture with these dimensions.
GptArchitecture llama(int layers, int heads, int kv, int width, int ffn, int vocab, int context,
                      float theta, float eps) {
  GptArchitecture a;
  a.layers = layers;
  a.heads = heads;
  a.kv_heads = kv;
  a.width = width;
  a.ffn = ffn;
  a.vocab = vocab;
  a.context = context;
  a.norm = NormKind::kRMSNorm;
  a.norm_eps = eps;
  a.positions = PositionKind::kRotary;
  a.rope_theta = theta;
  a.mlp = MlpKind::kSwiGLU;
  a.qkv_bias = a.proj_bias = a.mlp_bias = false;
  return a;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(HfConfig, ParsesEachFamilyAsTransformers4Writes) {
  const HfConfig l3 = parse_hf_config(kLlama3, "l3");
  EXPECT_EQ(l3.family, HfFamily::kLlama);
  EXPECT_EQ(l3.arch, llama(32, 32, 8, 4096, 14336, 128256, 8192, 500000.0f, 1e-5f));
  EXPECT_EQ(l3.max_positions, 8192);
  EXPECT_FALSE(l3.tied);
  const HfConfig tiny = parse_hf_config(kTinyLlama, "tiny");
  EXPECT_EQ(tiny.arch, llama(22, 32, 4, 2048, 5632, 32000, 2048, 10000.0f, 1e-5f));
  const HfConfig smol = parse_hf_config(kSmolLM, "smol");
  GptArchitecture s = llama(30, 9, 3, 576, 1536, 49152, 2048, 10000.0f, 1e-5f);
  s.tied_embeddings = true;  // one parameter
  EXPECT_EQ(smol.arch, s);
  EXPECT_TRUE(smol.tied);
  const HfConfig mistral = parse_hf_config(kMistral, "mistral");
  EXPECT_EQ(mistral.family, HfFamily::kMistral);
  EXPECT_EQ(mistral.arch, llama(32, 32, 8, 4096, 14336, 32000, 32768, 10000.0f, 1e-5f));
  EXPECT_EQ(mistral.sliding_window, 4096);
  const HfConfig qwen = parse_hf_config(kQwen2, "qwen");
  EXPECT_EQ(qwen.family, HfFamily::kQwen2);
  GptArchitecture q = llama(24, 14, 2, 896, 4864, 151936, 131072, 1000000.0f, 1e-6f);
  q.qkv_bias = true;  // Qwen2: q/k/v biases only
  q.tied_embeddings = true;
  EXPECT_EQ(qwen.arch, q);
  EXPECT_TRUE(qwen.tied);
  EXPECT_EQ(qwen.sliding_window, 0);  // present, but inactive without use_sliding_window
}

TEST(HfConfig, ParsesTransformers5Spellings) {
  EXPECT_EQ(parse_hf_config(kLlama3V5, "v5").arch, parse_hf_config(kLlama3, "v4").arch);
  EXPECT_EQ(parse_hf_config(qwen2_v5(), "v5").arch, parse_hf_config(kQwen2, "v4").arch);
  const HfConfig gpt2 = parse_hf_config(kGpt2V5, "gpt2");
  EXPECT_EQ(gpt2.family, HfFamily::kGpt2);
  GptArchitecture g;  // GPT-2 small: our default components
  g.layers = g.heads = 12;
  g.width = 768;
  g.context = 1024;
  g.vocab = 50257;
  g.tied_embeddings = true;
  EXPECT_EQ(gpt2.arch, g);
  EXPECT_TRUE(gpt2.tied);
}

TEST(HfConfig, RunContext) {
  const HfConfig l3 = parse_hf_config(kLlama3, "l3.json");
  EXPECT_EQ(hf_run_architecture(l3, 256, "x").context, 256);
  EXPECT_NE(error_of([&] {
              hf_run_architecture(l3, 8193, "l3.json");
            }).find("l3.json: \"max_position_embeddings\" is 8192, the run's context 8193"),
            std::string::npos);
  const HfConfig mistral = parse_hf_config(kMistral, "m.json");
  EXPECT_EQ(hf_run_architecture(mistral, 4096, "x").context, 4096);
  EXPECT_NE(error_of([&] {
              hf_run_architecture(mistral, 4097, "m.json");
            }).find("m.json: \"sliding_window\" is 4096, shorter than the run's context 4097"),
            std::string::npos);
  const HfConfig gpt2 = parse_hf_config(kGpt2V5, "g.json");
  EXPECT_NE(error_of([&] {
              hf_run_architecture(gpt2, 512, "g.json");
            }).find("g.json: \"n_positions\" is 1024, the model's context is 512"),
            std::string::npos);
  GptArchitecture model = hf_run_architecture(l3, 128, "x");
  EXPECT_NO_THROW(check_hf_config(l3, model, "x"));
  model.kv_heads = 32;
  EXPECT_NE(error_of([&] {
              check_hf_config(l3, model, "c");
            }).find("c: \"num_key_value_heads\" is 8, the model's kv heads is 32"),
            std::string::npos);
  model = hf_run_architecture(l3, 128, "x");
  model.rope_theta = 10000.0f;
  EXPECT_NE(error_of([&] {
              check_hf_config(l3, model, "c");
            }).find("c: \"rope_theta\" is 500000, the model's rope_theta is 10000"),
            std::string::npos);
  model = hf_run_architecture(l3, 128, "x");
  model.mlp = MlpKind::kGelu;
  EXPECT_NE(
      error_of([&] { check_hf_config(l3, model, "c"); }).find("c: \"model_type\" is \"llama\""),
      std::string::npos);
}

TEST(HfConfig, RefusesWhatTheDecoderDoesNotComputeNamingTheField) {
  struct Case {
    const char* base;
    std::function<void(json&)> edit;
    std::string needle;
  };
  const Case cases[] = {
      {kLlama3, [](json& j) { j["model_type"] = "phi"; }, "\"model_type\" is \"phi\""},
      {kLlama3, [](json& j) { j["architectures"] = {"LlamaModel"}; },
       "\"model_type\" is \"llama\" but \"architectures\" is [\"LlamaModel\"]"},
      {kLlama3, [](json& j) { j["hidden_act"] = "gelu"; }, "\"hidden_act\" is \"gelu\""},
      {kLlama3V5, [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.5; },
       "\"rope_parameters.partial_rotary_factor\" is 0.5"},
      {kQwen2, [](json& j) { j["use_sliding_window"] = true; }, "\"use_sliding_window\" is true"},
      {kLlama3,
       [](json& j) {
         j["layer_types"] = {"full_attention", "sliding_attention"};
       },
       "\"layer_types\" holds \"sliding_attention\""},
      {kMistral, [](json& j) { j["num_local_experts"] = 8; }, "\"num_local_experts\" is 8"},
      {kQwen2, [](json& j) { j["num_experts"] = 60; }, "\"num_experts\" is 60"},
      {kLlama3, [](json& j) { j["head_dim"] = 0; }, "\"head_dim\" is 0"},
      {kLlama3, [](json& j) { j.erase("hidden_size"); }, "\"hidden_size\" is missing"},
      {kLlama3, [](json& j) { j["num_key_value_heads"] = 5; },
       "gpt config: kv_heads 5 must divide heads 32"},
      {kGpt2V5, [](json& j) { j["activation_function"] = "relu"; },
       "\"activation_function\" is \"relu\""},
      {kGpt2V5, [](json& j) { j["scale_attn_by_inverse_layer_idx"] = true; },
       "\"scale_attn_by_inverse_layer_idx\" is true"},
  };
  for (const Case& c : cases) {
    json j = json::parse(c.base);
    c.edit(j);
    const std::string msg = error_of([&] { parse_hf_config(j.dump(), "dir/config.json"); });
    EXPECT_NE(msg.find("dir/config.json: " + c.needle), std::string::npos) << msg;
  }
  EXPECT_NE(error_of([] { parse_hf_config("[1]", "x"); }).find("x: not a JSON object"),
            std::string::npos);
}

// Qwen3-0.6B's config.json (transformers 4.51): 16 heads of head_dim 128 on a width of 1024.
const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

GptArchitecture qwen3_0_6b() {
  GptArchitecture a = llama(28, 16, 8, 1024, 3072, 151936, 40960, 1e6f, 1e-6f);
  a.head_dim_override = 128;
  a.qk_norm = true;
  a.tied_embeddings = true;
  return a;
}

TEST(HfConfig, ParsesQwen3WithItsHeadDimAndQkNorms) {
  const HfConfig q = parse_hf_config(kQwen3, "qwen3");
  EXPECT_EQ(q.family, HfFamily::kQwen3);
  EXPECT_EQ(q.arch, qwen3_0_6b());
  EXPECT_EQ(q.arch.head_dim(), 128);
  EXPECT_EQ(q.arch.attn_width(), 2048);
  EXPECT_EQ(q.arch.family(), "qwen3");
  EXPECT_TRUE(q.tied);
  EXPECT_EQ(q.sliding_window, 0);
  // Qwen3Config's head_dim is 128 when config.json has none, not hidden_size / heads (64).
  json j = json::parse(kQwen3);
  j.erase("head_dim");
  EXPECT_EQ(parse_hf_config(j.dump(), "q").arch, qwen3_0_6b());
  // head_dim equal to hidden_size / heads is no override.
  j["head_dim"] = 64;
  EXPECT_EQ(parse_hf_config(j.dump(), "q").arch.head_dim_override, 0);
  // attention_bias: q/k/v and o biases.
  j = json::parse(kQwen3);
  j["attention_bias"] = true;
  const GptArchitecture b = parse_hf_config(j.dump(), "q").arch;
  EXPECT_TRUE(b.qkv_bias && b.proj_bias && !b.mlp_bias);
  // The architectures class alone names the family.
  j = json::parse(kQwen3);
  j.erase("model_type");
  EXPECT_EQ(parse_hf_config(j.dump(), "q").family, HfFamily::kQwen3);
  // A Llama config.json with an explicit head_dim apart from hidden_size / heads.
  j = json::parse(kLlama3);
  j["head_dim"] = 256;
  const GptArchitecture l = parse_hf_config(j.dump(), "l").arch;
  EXPECT_EQ(l.head_dim_override, 256);
  EXPECT_FALSE(l.qk_norm);
  EXPECT_EQ(l.qkv_rows(), 32 * 256 + 2 * 8 * 256);
  // check_hf_config names head_dim and the q/k norms.
  const GptArchitecture run = hf_run_architecture(q, 256, "x");
  GptArchitecture model = run;
  model.head_dim_override = 64;
  EXPECT_NE(error_of([&] {
              check_hf_config(q, model, "c");
            }).find("c: \"head_dim\" is 128, the model's head dim is 64"),
            std::string::npos);
  model = run;
  model.qk_norm = false;
  EXPECT_NE(error_of([&] { check_hf_config(q, model, "c"); }).find("qk_norm true), the model"),
            std::string::npos);
  EXPECT_NO_THROW(check_hf_config(q, run, "c"));
}

TEST(HfConfig, RefusesGemmaNamingWhatItLacks) {
  json g = json::parse(kLlama3);
  g["model_type"] = "gemma";
  g["architectures"] = {"GemmaForCausalLM"};
  g["hidden_activation"] = "gelu_pytorch_tanh";
  std::string msg = error_of([&] { parse_hf_config(g.dump(), "g/config.json"); });
  for (const char* part : {"g/config.json: \"model_type\" is \"gemma\" (GemmaForCausalLM)", "GeGLU",
                           "hidden_activation", "sqrt(hidden_size)", "(1 + weight)"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
  EXPECT_EQ(msg.find("softcapping"), std::string::npos) << msg;
  for (const char* type : {"gemma2", "gemma3_text"}) {
    g["model_type"] = type;
    g.erase("architectures");
    msg = error_of([&] { parse_hf_config(g.dump(), "g"); });
    for (const char* part :
         {"GeGLU", "attn_logit_softcapping", "final_logit_softcapping", "sliding-window layers"})
      EXPECT_NE(msg.find(part), std::string::npos) << part << " in " << msg;
  }
  g.erase("model_type");
  g["architectures"] = {"Gemma2ForCausalLM"};
  EXPECT_NE(error_of([&] { parse_hf_config(g.dump(), "g"); }).find("Gemma2ForCausalLM"),
            std::string::npos);
}

TEST(HfConfig, MistralSlidingWindowNullOrCoveringTheContextChangesNothing) {
  json m = json::parse(kMistral);
  m["sliding_window"] = nullptr;
  const HfConfig none = parse_hf_config(m.dump(), "m");
  EXPECT_EQ(none.sliding_window, 0);
  EXPECT_EQ(hf_run_architecture(none, 32768, "m").context, 32768);
  const HfConfig w = parse_hf_config(kMistral, "m");
  EXPECT_EQ(hf_run_architecture(w, 4096, "m"), hf_run_architecture(none, 4096, "m"));
  const std::string msg = error_of([&] { hf_run_architecture(w, 8192, "m/config.json"); });
  EXPECT_NE(msg.find("m/config.json: \"sliding_window\" is 4096, shorter than the run's context "
                     "8192 (--context)"),
            std::string::npos)
      << msg;
}

TEST(HfConfig, ExportConfigParsesBackForEachFamily) {
  GptArchitecture l = llama(2, 4, 2, 64, 160, 300, 32, 10000.0f, 1e-6f);
  GptArchitecture q = l;
  q.qkv_bias = true;
  GptArchitecture lb = l;
  lb.qkv_bias = lb.proj_bias = lb.mlp_bias = true;  // attention_bias and mlp_bias
  GptArchitecture q3 = l;  // Qwen3: q/k norms, 4 heads of 24 on a width of 64
  q3.qk_norm = true;
  q3.head_dim_override = 24;
  GptArchitecture q3b = q3;  // with attention_bias, and head_dim = width / heads
  q3b.qkv_bias = q3b.proj_bias = true;
  q3b.head_dim_override = 0;
  GptArchitecture lh = l;  // Llama with an explicit head_dim
  lh.head_dim_override = 8;
  const std::pair<GptArchitecture, HfFamily> cases[] = {
      {l, HfFamily::kLlama},  {q, HfFamily::kQwen2},   {lb, HfFamily::kLlama},
      {q3, HfFamily::kQwen3}, {q3b, HfFamily::kQwen3}, {lh, HfFamily::kLlama}};
  for (const auto& [arch, family] : cases) {
    EXPECT_EQ(hf_family_of(arch), family);
    const std::string text = hf_config_json(arch, DType::kBF16);
    const HfConfig back = parse_hf_config(text, "x");
    EXPECT_EQ(back.family, family);
    EXPECT_EQ(back.arch, arch) << text;
    EXPECT_FALSE(back.tied);
    const json j = json::parse(text);
    EXPECT_EQ(j.at("architectures"), json::array({hf_class_name(family)}));
    EXPECT_EQ(j.at("torch_dtype"), "bfloat16");
    EXPECT_EQ(j.at("rms_norm_eps"), 1e-6);
    EXPECT_EQ(j.at("rope_theta"), 10000.0);
  }
  GptArchitecture mix = l;
  mix.positions = PositionKind::kLearned;
  EXPECT_NE(error_of([&] { hf_family_of(mix); }).find("the model's positions is learned"),
            std::string::npos);
  mix = l;
  mix.proj_bias = true;
  EXPECT_NE(error_of([&] { hf_config_json(mix); }).find("the model's proj_bias is on"),
            std::string::npos);
  mix = q3;
  mix.mlp_bias = true;
  EXPECT_NE(error_of([&] { hf_family_of(mix); }).find("Qwen3ForCausalLM needs no MLP bias"),
            std::string::npos);
  GptArchitecture gpt2_qk;
  gpt2_qk.qk_norm = true;
  EXPECT_NE(error_of([&] { hf_family_of(gpt2_qk); }).find("the model's qk_norm is on"),
            std::string::npos);
  // Qwen3's head_dim is written even when it is width / heads (Qwen3Config's default is 128).
  EXPECT_EQ(json::parse(hf_config_json(q3b)).at("head_dim"), 16);
  EXPECT_FALSE(json::parse(hf_config_json(l)).contains("head_dim"));
  GptArchitecture gqa_gpt2;
  gqa_gpt2.kv_heads = 2;
  EXPECT_NE(error_of([&] { hf_family_of(gqa_gpt2); }).find("the model's kv_heads is 2"),
            std::string::npos);
  EXPECT_EQ(hf_family_of(GptArchitecture{}), HfFamily::kGpt2);
}

// Llama-3.2-1B's config.json (transformers 4.45): rope_scaling llama3, tied embeddings.
const char* kLlama32 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

const RopeScaling kLlama32Scaling = {RopeScalingKind::kLlama3, 32.0, 1.0, 4.0, 8192};

TEST(HfConfig, RopeScalingLlama3AndLinearInBothForms) {
  const HfConfig c = parse_hf_config(kLlama32, "x");
  EXPECT_EQ(c.arch.rope_scaling, kLlama32Scaling);
  EXPECT_EQ(c.arch.rope_theta, 500000.0f);
  EXPECT_EQ(c.max_positions, 131072);
  EXPECT_TRUE(c.tied);
  // transformers 5.x: rope_parameters holds theta, type and the scaling's fields.
  json v5 = json::parse(kLlama32);
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 500000.0},
                           {"factor", 32.0},          {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const HfConfig c5 = parse_hf_config(v5.dump(), "x");
  EXPECT_EQ(c5.arch, c.arch);
  EXPECT_STREQ(c5.rope_field, "rope_parameters");
  // linear, as 4.36 writes it ("type") and as later versions do ("rope_type").
  json lin = json::parse(kLlama3);
  lin["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  const RopeScaling linear4 = {RopeScalingKind::kLinear, 4.0};
  EXPECT_EQ(parse_hf_config(lin.dump(), "x").arch.rope_scaling, linear4);
  lin["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}, {"type", "linear"}};
  EXPECT_EQ(parse_hf_config(lin.dump(), "x").arch.rope_scaling, linear4);
  lin["rope_scaling"] = {{"rope_type", "default"}};  // no scaling
  EXPECT_FALSE(parse_hf_config(lin.dump(), "x").arch.rope_scaling.enabled());
}

TEST(HfConfig, RopeScalingRefusalsNameTheFieldAndValue) {
  struct Case {
    std::function<void(json&)> edit;
    std::string needle;
  };
  auto scaling = [](json v) { return [v](json& j) { j["rope_scaling"] = v; }; };
  const Case cases[] = {
      {scaling({{"rope_type", "dynamic"}, {"factor", 2.0}}),
       "\"rope_scaling.rope_type\" is \"dynamic\"; zeroshard's rotary positions implement "
       "rope_type default, linear and llama3"},
      {scaling({{"type", "yarn"}, {"factor", 4.0}}), "\"rope_scaling.type\" is \"yarn\""},
      {scaling({{"rope_type", "longrope"}}), "\"rope_scaling.rope_type\" is \"longrope\""},
      {scaling({{"factor", 8.0}}),
       "\"rope_scaling\" is {\"factor\":8.0}; its \"rope_type\" is "
       "missing"},
      {scaling({{"rope_type", "linear"}}), "\"rope_scaling.factor\" is missing"},
      {scaling({{"rope_type", "linear"}, {"factor", "4"}}),
       "\"rope_scaling.factor\" is \"4\", a number expected"},
      {scaling({{"rope_type", "linear"}, {"factor", 0.5}}),
       "\"rope_scaling\" is {\"factor\":0.5,\"rope_type\":\"linear\"}: rope scaling: linear "
       "factor 0.5 must be finite and at least 1"},
      {scaling({{"rope_type", "linear"}, {"factor", 2.0}, {"type", "llama3"}}),
       "\"rope_scaling.type\" is \"llama3\" but \"rope_scaling.rope_type\" is \"linear\""},
      {scaling({{"rope_type", "llama3"},
                {"factor", 8.0},
                {"low_freq_factor", 1.0},
                {"high_freq_factor", 4.0}}),
       "\"rope_scaling.original_max_position_embeddings\" is missing"},
      {scaling({{"rope_type", "llama3"},
                {"factor", 8.0},
                {"low_freq_factor", 4.0},
                {"high_freq_factor", 1.0},
                {"original_max_position_embeddings", 8192}}),
       "\"rope_scaling\" is {\"factor\":8.0,\"high_freq_factor\":1.0,\"low_freq_factor\":4.0,"
       "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}: rope scaling: llama3 "
       "high_freq_factor 1 must be finite and above low_freq_factor 4"},
      {scaling({{"rope_type", "llama3"},
                {"factor", 8.0},
                {"low_freq_factor", 1.0},
                {"high_freq_factor", 4.0},
                {"original_max_position_embeddings", 8192.5}}),
       "\"rope_scaling.original_max_position_embeddings\" is 8192.5, a positive integer"},
      {scaling({{"rope_type", "linear"}, {"factor", 2.0}, {"attention_factor", 1.5}}),
       "\"rope_scaling.attention_factor\" is 1.5; zeroshard's rope_type linear takes factor"},
      {scaling("llama3"), "\"rope_scaling\" is \"llama3\", an object expected"},
      {[](json& j) {
         j["rope_parameters"] = {{"rope_theta", 5e5}, {"rope_type", "yarn"}, {"factor", 4.0}};
       },
       "\"rope_parameters.rope_type\" is \"yarn\""},
      {[](json& j) {
         j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
         j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 4.0}};
       },
       "\"rope_scaling\" is {\"factor\":2.0,\"rope_type\":\"linear\"} but \"rope_parameters\" is"},
  };
  for (const Case& c : cases) {
    json j = json::parse(kLlama3);
    c.edit(j);
    const std::string msg = error_of([&] { parse_hf_config(j.dump(), "dir/config.json"); });
    EXPECT_NE(msg.find("dir/config.json: " + c.needle), std::string::npos) << msg;
  }
}

TEST(HfConfig, RopeScalingExportsAndIsCompared) {
  const HfConfig c = parse_hf_config(kLlama32, "x");
  GptArchitecture a = hf_run_architecture(c, 256, "x");
  EXPECT_EQ(a.rope_scaling, kLlama32Scaling);
  const json j = json::parse(hf_config_json(a));
  EXPECT_EQ(j.at("rope_scaling"), json({{"rope_type", "llama3"},
                                        {"factor", 32.0},
                                        {"low_freq_factor", 1.0},
                                        {"high_freq_factor", 4.0},
                                        {"original_max_position_embeddings", 8192}}));
  EXPECT_EQ(parse_hf_config(j.dump(), "x").arch.rope_scaling, kLlama32Scaling);
  GptArchitecture lin = a;
  lin.rope_scaling = {RopeScalingKind::kLinear, 4.0};
  EXPECT_EQ(json::parse(hf_config_json(lin)).at("rope_scaling"),
            json({{"rope_type", "linear"}, {"factor", 4.0}}));
  GptArchitecture qwen = lin;
  qwen.qkv_bias = true;  // Qwen2ForCausalLM carries rope_scaling too
  EXPECT_EQ(parse_hf_config(hf_config_json(qwen), "x").arch.rope_scaling, lin.rope_scaling);
  GptArchitecture none = a;
  none.rope_scaling = {};
  EXPECT_TRUE(json::parse(hf_config_json(none)).at("rope_scaling").is_null());
  EXPECT_NE(error_of([&] { check_hf_config(c, none, "c"); })
                .find("c: \"rope_scaling\" is llama3:factor=32,low=1,high=4,original=8192, the "
                      "model's rope scaling is none"),
            std::string::npos);
}

}  // namespace
}  // namespace zs::nn
