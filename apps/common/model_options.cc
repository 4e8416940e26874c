#include "apps/common/model_options.h"

#include <cmath>
#include <span>

#include "core/error.h"

namespace po = boost::program_options;

namespace zs::apps {
namespace {

constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;

struct ArchitectureFlag {
  const char* name;
  const char* help;
  int nn::GptArchitecture::*field;  // where the trainer's default comes from
};

// In --help's order (the trainer's log header lists its options in that order too).
constexpr ArchitectureFlag kFlags[] = {
    {"layers", "transformer blocks", &nn::GptArchitecture::layers},
    {"heads", "attention heads", &nn::GptArchitecture::heads},
    {"width", "model width (divisible by heads)", &nn::GptArchitecture::width},
    {"context", "sequence length", &nn::GptArchitecture::context},
    {"vocab", "vocabulary size", &nn::GptArchitecture::vocab},
};

// The component flags, after --family, in --help's order.
constexpr const char* kComponentFlags[] = {
    "ffn",      "kv-heads",  "head-dim",   "qk-norm",       "norm",
    "norm-eps", "positions", "rope-theta", "rope-scaling",  "mlp",
    "qkv-bias", "proj-bias", "mlp-bias",   "tie-embeddings"};

std::span<const ArchitectureFlag> flags(bool with_vocab) {
  return std::span(kFlags).first(with_vocab ? std::size(kFlags) : std::size(kFlags) - 1);
}

bool given(const po::variables_map& vm, const char* name) {
  return vm.count(name) && !vm[name].defaulted();
}

void add_component_options(po::options_description& desc, bool with_defaults) {
  po::typed_value<std::string>* family = po::value<std::string>();
  if (with_defaults) family->default_value("gpt2");
  // clang-format off
  desc.add_options()
      ("family", family, "gpt2 | llama | qwen3: a preset of the components below (gpt2: LayerNorm, "
       "learned positions, GELU, biases; llama: RMSNorm, rotary, SwiGLU, no biases; qwen3: "
       "llama's with per-head q/k norms); a component flag overrides it; gpt is gpt2's other "
       "spelling")
      ("ffn", po::value<int>(), "MLP width in elements (default: 4 x width)")
      ("kv-heads", po::value<int>(), "key/value heads, dividing --heads (grouped-query "
       "attention; default: --heads)")
      ("head-dim", po::value<int>(), "each attention head's width; heads x head-dim need not be "
       "--width (Qwen3-0.6B: 16 x 128 on 1024; default: --width / --heads)")
      ("qk-norm", po::value<std::string>(), "on | off: RMSNorm over each head's q and k before "
       "RoPE, weights [head-dim] (Qwen3's q_norm / k_norm; default: the family's)")
      ("norm", po::value<std::string>(), "layernorm | rmsnorm (default: the family's)")
      ("norm-eps", po::value<float>(), "the norms' epsilon (default 1e-5)")
      ("positions", po::value<std::string>(), "learned | rotary (default: the family's)")
      ("rope-theta", po::value<float>(), "rotary base theta (default 10000)")
      ("rope-scaling", po::value<std::string>(), "none | linear:factor=F | "
       "llama3:factor=F,low=L,high=H,original=N: rotary frequencies stretched as transformers' "
       "rope_type linear or llama3 (Llama-3.1: llama3:factor=8,low=1,high=4,original=8192; "
       "default none; --init-from-hf: config.json's rope_scaling)")
      ("mlp", po::value<std::string>(), "gelu | swiglu (default: the family's)")
      ("qkv-bias", po::value<std::string>(), "on | off: biases of q, k, v (default: the family's)")
      ("proj-bias", po::value<std::string>(), "on | off: the attention output's bias (default: "
       "the family's)")
      ("mlp-bias", po::value<std::string>(), "on | off: the MLP's biases (default: the family's)")
      ("tie-embeddings", po::value<std::string>(), "on | off: the LM head is the token embedding, "
       "one parameter (default off; --init-from-hf: the directory's tie_word_embeddings)");
  // clang-format on
}

// The value of choice flag `name`: the index of its value in `choices`, refused naming both.
int choice(const po::variables_map& vm, const char* name, std::span<const char* const> choices) {
  const std::string v = vm[name].as<std::string>();
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (v == choices[i]) return static_cast<int>(i);
    list += (i > 0 ? ", " : "") + std::string(choices[i]);
  }
  fail(kBad, "--{} '{}' is not one of {}", name, v, list);
}

void apply_family(const std::string& family, nn::GptArchitecture& a) {
  const bool qwen3 = family == "qwen3";
  const bool llama = family == "llama" || qwen3;
  ZS_CHECK(llama || family == "gpt2" || family == "gpt", kBad,
           "--family '{}' is not one of gpt2, llama, qwen3 (gpt: gpt2)", family);
  a.qk_norm = qwen3;
  a.norm = llama ? nn::NormKind::kRMSNorm : nn::NormKind::kLayerNorm;
  a.positions = llama ? nn::PositionKind::kRotary : nn::PositionKind::kLearned;
  a.mlp = llama ? nn::MlpKind::kSwiGLU : nn::MlpKind::kGelu;
  a.qkv_bias = a.proj_bias = a.mlp_bias = !llama;
}

}  // namespace

const nn::GptArchitecture& default_architecture() {
  static const nn::GptArchitecture a = {
      .layers = 4, .heads = 4, .width = 128, .context = 128, .vocab = 256, .ffn_mult = 4};
  return a;
}

void add_architecture_options(po::options_description& desc, const nn::GptArchitecture* defaults,
                              bool with_vocab) {
  for (const ArchitectureFlag& f : flags(with_vocab)) {
    po::typed_value<int>* v = po::value<int>();
    if (defaults != nullptr) v->default_value(defaults->*f.field);
    desc.add_options()(f.name, v, f.help);
  }
  add_component_options(desc, defaults != nullptr);
}

bool component_options_given(const po::variables_map& vm) {
  if (given(vm, "family")) return true;
  for (const char* name : kComponentFlags)
    if (given(vm, name)) return true;
  return false;
}

bool architecture_options_given(const po::variables_map& vm) {
  for (const ArchitectureFlag& f : kFlags)
    if (given(vm, f.name)) return true;
  return component_options_given(vm);
}

void apply_architecture_option(const po::variables_map& vm, const std::string& name, int& field) {
  if (vm.count(name)) field = vm[name].as<int>();
}

void apply_component_options(const po::variables_map& vm, nn::GptArchitecture& a) {
  if (vm.count("family")) apply_family(vm["family"].as<std::string>(), a);
  apply_architecture_option(vm, "ffn", a.ffn);
  apply_architecture_option(vm, "kv-heads", a.kv_heads);
  apply_architecture_option(vm, "head-dim", a.head_dim_override);
  if (vm.count("norm-eps")) a.norm_eps = vm["norm-eps"].as<float>();
  if (vm.count("rope-theta")) a.rope_theta = vm["rope-theta"].as<float>();
  if (vm.count("rope-scaling")) {
    try {
      a.rope_scaling = nn::parse_rope_scaling(vm["rope-scaling"].as<std::string>());
    } catch (const Error& e) {
      fail(kBad, "--rope-scaling '{}': {}", vm["rope-scaling"].as<std::string>(), e.what());
    }
  }
  static constexpr const char* kNorms[] = {"layernorm", "rmsnorm"};
  static constexpr const char* kPositions[] = {"learned", "rotary"};
  static constexpr const char* kMlps[] = {"gelu", "swiglu"};
  static constexpr const char* kOnOff[] = {"off", "on"};
  if (vm.count("norm")) a.norm = static_cast<nn::NormKind>(choice(vm, "norm", kNorms));
  if (vm.count("positions"))
    a.positions = static_cast<nn::PositionKind>(choice(vm, "positions", kPositions));
  if (vm.count("mlp")) a.mlp = static_cast<nn::MlpKind>(choice(vm, "mlp", kMlps));
  if (vm.count("qkv-bias")) a.qkv_bias = choice(vm, "qkv-bias", kOnOff) == 1;
  if (vm.count("proj-bias")) a.proj_bias = choice(vm, "proj-bias", kOnOff) == 1;
  if (vm.count("mlp-bias")) a.mlp_bias = choice(vm, "mlp-bias", kOnOff) == 1;
  if (vm.count("qk-norm")) a.qk_norm = choice(vm, "qk-norm", kOnOff) == 1;
  if (vm.count("tie-embeddings")) a.tied_embeddings = choice(vm, "tie-embeddings", kOnOff) == 1;
}

void check_architecture(const po::variables_map& vm, const nn::GptArchitecture& a) {
  ZS_CHECK(!vm.count("ffn") || (a.ffn >= 1 && a.ffn <= 64 * a.width), kBad,
           "--ffn {} is outside 1..64 x --width ({})", a.ffn, 64 * a.width);
  ZS_CHECK(std::isfinite(a.norm_eps) && a.norm_eps > 0.0f && a.norm_eps < 1.0f, kBad,
           "--norm-eps {} is outside (0, 1)", a.norm_eps);
  ZS_CHECK(!vm.count("head-dim") || (a.head_dim_override >= 1 && a.head_dim_override <= 16384),
           kBad, "--head-dim {} is outside 1..16384", a.head_dim_override);
  const bool divides =
      a.head_dim_override > 0 || (a.heads > 0 && a.width > 0 && a.width % a.heads == 0);
  ZS_CHECK(!vm.count("kv-heads") || (a.kv_heads >= 1 && a.heads > 0 && a.kv_heads <= a.heads &&
                                     a.heads % a.kv_heads == 0),
           kBad,
           "--kv-heads {} does not divide --heads {} (each key/value head serves a group "
           "of query heads)",
           a.kv_heads, a.heads);
  // [Note: dependent flags] in apps/common/engine_options.h: the theta of learned positions would
  // be stored and never used.
  ZS_CHECK(!vm.count("rope-theta") || a.positions == nn::PositionKind::kRotary, kBad,
           "--rope-theta applies to rotary positions (--positions rotary or --family llama), not "
           "learned ones");
  ZS_CHECK(!vm.count("rope-scaling") || a.positions == nn::PositionKind::kRotary, kBad,
           "--rope-scaling applies to rotary positions (--positions rotary or --family llama), "
           "not learned ones");
  if (a.positions == nn::PositionKind::kRotary) {
    const std::string from =
        given(vm, "positions")
            ? std::string("--positions rotary")
            : "--family " + (vm.count("family") ? vm["family"].as<std::string>() : "llama");
    ZS_CHECK(std::isfinite(a.rope_theta) && a.rope_theta > 1.0f, kBad,
             "--rope-theta {} must be finite and above 1", a.rope_theta);
    if (a.head_dim_override > 0) {
      ZS_CHECK(a.head_dim() % 2 == 0, kBad,
               "rotary positions ({}) need an even head dim: --head-dim {}", from, a.head_dim());
    } else {
      ZS_CHECK(!divides || a.head_dim() % 2 == 0, kBad,
               "rotary positions ({}) need an even head dim: --width {} / --heads {} = {}", from,
               a.width, a.heads, a.head_dim());
    }
  }
}

nn::GptArchitecture architecture_from_options(const po::variables_map& vm,
                                              nn::GptArchitecture base) {
  apply_architecture_options(vm, base);
  apply_component_options(vm, base);
  check_architecture(vm, base);
  return base;
}

}  // namespace zs::apps
