#include "apps/common/engine_options.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "apps/common/state_options.h"
#include "core/error.h"

namespace po = boost::program_options;

namespace zs::apps {
namespace {

constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;

// The value of flag `name` as T (declared with a default, or given).
template <typename T>
T value(const po::variables_map& vm, const char* name) {
  return vm[name].as<T>();
}

// [Note: dependent flags] `name` given refines `parent`, which must hold (`holds`): refused
// "<name> applies to <what>" otherwise.
void require(const po::variables_map& vm, const FlagNamer& flag, const char* name, bool holds,
             const std::string& what) {
  ZS_CHECK(holds || !flag_given(vm, name), kBad, "{} applies to {}", flag(name), what);
}

// A compute or gradient dtype: fp32, bf16 or fp16 (with their long spellings).
DType float_dtype(const po::variables_map& vm, const FlagNamer& flag, const char* name) {
  const std::string s = value<std::string>(vm, name);
  if (s == "fp32" || s == "float32") return DType::kF32;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "fp16" || s == "float16") return DType::kF16;
  fail(kBad, "{} '{}' is not one of fp32, bf16, fp16", flag(name), s);
}

// A flag and its alias (both unbound, the canonical one with a default): one value, refused when
// both are given and disagree.
int resolve_alias(const po::variables_map& vm, const std::string& name) {
  const std::string& alias = run_flag_aliases().at(name);
  int v = vm[name].as<int>();
  if (flag_given(vm, alias)) {
    const int a = vm[alias].as<int>();
    ZS_CHECK(!flag_given(vm, name) || a == v, kBad,
             "--{} {} and --{} {} disagree: --{} is another name for --{}; give one of them", alias,
             a, name, v, alias, name);
    v = a;
  }
  return v;
}

// --head-chunk: auto, off or a row count N >= 1 (nn::GptRunSettings::head_chunk).
int64_t head_chunk(const po::variables_map& vm, const FlagNamer& flag) {
  const std::string s = value<std::string>(vm, "head-chunk");
  if (s == "auto") return nn::kGptHeadChunkAuto;
  if (s == "off") return nn::kGptHeadChunkOff;
  size_t used = 0;
  int64_t n = 0;
  try {
    n = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ZS_CHECK(used == s.size() && !s.empty() && s[0] != '+' && n >= 1, kBad,
           "{} '{}' is not auto, off or a number of token rows >= 1", flag("head-chunk"), s);
  return n;
}

void read_batch(const po::variables_map& vm, const FlagNamer& flag, RunFlags& f) {
  f.batch = resolve_alias(vm, "batch");
  ZS_CHECK(f.batch >= 1, kBad, "{} {} must be at least 1", flag("batch"), f.batch);
  EngineConfig& e = f.engine;  // micro_batches is checked by EngineConfig::validate
  e.micro_batches = value<int>(vm, "gradient-accumulation-steps");
  f.accumulation_given = flag_given(vm, "gradient-accumulation-steps");
  f.global_micro_batches = value<int>(vm, "global-micro-batches");
  ZS_CHECK(f.global_micro_batches >= 0, kBad, "{} {} is negative", flag("global-micro-batches"),
           f.global_micro_batches);
  e.world_invariant = value<bool>(vm, "world-invariant");
  f.checkpoint_activations = value<bool>(vm, "checkpoint-activations");
  f.head_chunk = head_chunk(vm, flag);
  const std::string attention = value<std::string>(vm, "attention");
  const std::optional<nn::GptAttention> kind = nn::gpt_attention_from_name(attention);
  ZS_CHECK(kind.has_value(), kBad, "{} '{}' is not fused or gemm", flag("attention"), attention);
  f.attention = *kind;
  f.threads = value<int>(vm, "threads");
  ZS_CHECK(f.threads >= 0 && f.threads <= 1024, kBad, "{} {} is outside 0..1024", flag("threads"),
           f.threads);
}

// --zero-quantized-weights, --zero-hpz-partition-size, --zero-quantized-gradients and the blocks.
// The rules are the engine's (validate_zeropp in runtime/engine_config.h), naming the flags.
void read_zeropp(const po::variables_map& vm, const FlagNamer& flag, RunFlags& f) {
  ZeroPPConfig& z = f.engine.zeropp;
  z.quantized_weights = value<bool>(vm, "zero-quantized-weights");
  z.quantized_weights_block = value<int64_t>(vm, "zero-quantized-weights-block");
  require(vm, flag, "zero-quantized-weights-block", z.quantized_weights,
          "--zero-quantized-weights, which is not given");
  z.hpz_partition_size = value<int>(vm, "zero-hpz-partition-size");
  z.quantized_gradients = value<bool>(vm, "zero-quantized-gradients");
  z.quantized_gradients_block = value<int64_t>(vm, "zero-quantized-gradients-block");
  require(vm, flag, "zero-quantized-gradients-block", z.quantized_gradients,
          "--zero-quantized-gradients, which is not given");
  validate_zeropp(f.engine.stage, z, engine_key_namer(flag));
}

void read_engine(const po::variables_map& vm, const FlagNamer& flag, RunFlags& f) {
  EngineConfig& e = f.engine;
  const int stage = value<int>(vm, "zero-stage");
  ZS_CHECK(stage >= 0 && stage <= 3, kBad, "{} {}: ZeRO stage {} is not one of 0, 1, 2, 3",
           flag("zero-stage"), stage, stage);
  e.stage = zero_stage_from_int(stage);
  e.precision.param_dtype = float_dtype(vm, flag, "dtype");
  e.precision.grad_dtype = float_dtype(vm, flag, "grad-dtype");
  e.prefetch = value<int>(vm, "prefetch");  // its range, and shard-group-size's: validate()
  require(vm, flag, "prefetch", e.stage == ZeroStage::k3,
          fmt::format("--zero-stage 3 (it gathers parameters ahead of use), not {}", stage));
  e.shard_group_size = value<int>(vm, "shard-group-size");
  read_zeropp(vm, flag, f);
  e.offload.optimizer = value<bool>(vm, "offload-optimizer");
  f.device = value<std::string>(vm, "device");
  ZS_CHECK(f.device == "cpu" || f.device == "cuda", kBad, "{} '{}' is not one of cpu, cuda",
           flag("device"), f.device);
  f.collectives = value<std::string>(vm, "collectives");
  ZS_CHECK(f.collectives == "flat" || f.collectives == "hierarchical", kBad,
           "{} '{}' is not one of flat, hierarchical", flag("collectives"), f.collectives);
  ZS_CHECK(f.collectives == "flat" || f.device == "cpu" || !flag_given(vm, "collectives"),
           ErrorCode::kUnsupported,
           "--collectives hierarchical is implemented for --device cpu only (MPI), not {}",
           f.device);
}

// --optimizer and the optimizer-state storage ([Note: optimizer state storage]): narrow states
// are AdamW's, on the CPU; the block and the code book refine int8 states.
void read_optimizer_states(const po::variables_map& vm, const FlagNamer& flag, RunFlags& f) {
  OptimizerConfig& opt = f.engine.optimizer;
  const std::string kind = value<std::string>(vm, "optimizer");
  ZS_CHECK(kind == "adamw" || kind == "sgd" || kind == "muon", kBad,
           "{} '{}' is not one of adamw, sgd, muon", flag("optimizer"), kind);
  opt.kind = kind == "adamw" ? OptimizerKind::kAdamW
             : kind == "sgd" ? OptimizerKind::kSgd
                             : OptimizerKind::kMuon;
  // [Note: Muon parameters]: its momentum in [0, 1) and steps in 1..100 (EngineConfig::validate
  // states the ranges; named here by flag).
  for (const char* name : {"muon-momentum", "muon-ns-steps"})
    require(vm, flag, name, opt.kind == OptimizerKind::kMuon, "--optimizer muon, not " + kind);
  opt.muon.momentum = value<float>(vm, "muon-momentum");
  ZS_CHECK(
      std::isfinite(opt.muon.momentum) && opt.muon.momentum >= 0.0f && opt.muon.momentum < 1.0f,
      kBad, "{} {} is outside [0, 1)", flag("muon-momentum"), opt.muon.momentum);
  opt.muon.ns_steps = value<int>(vm, "muon-ns-steps");
  ZS_CHECK(opt.muon.ns_steps >= 1 && opt.muon.ns_steps <= 100, kBad, "{} {} is outside 1..100",
           flag("muon-ns-steps"), opt.muon.ns_steps);
  const std::string d = value<std::string>(vm, "optimizer-state-dtype");
  ZS_CHECK(d == "fp32" || d == "bf16" || d == "int8", kBad,
           "{} '{}' is not one of fp32, bf16, int8", flag("optimizer-state-dtype"), d);
  ZS_CHECK(d == "fp32" || opt.kind == OptimizerKind::kAdamW, kBad,
           "{} {} applies to --optimizer adamw, not {} ({} keeps its momentum in fp32)",
           flag("optimizer-state-dtype"), d, kind, kind == "sgd" ? "SGD" : "Muon");
  ZS_CHECK(opt.kind != OptimizerKind::kMuon || !f.engine.offload.optimizer, kBad,
           "--optimizer muon with {} is not implemented: Muon's update runs on the resident "
           "states (drop {}, or use --optimizer adamw)",
           flag("offload-optimizer"), flag("offload-optimizer"));
  ZS_CHECK(opt.kind != OptimizerKind::kMuon || f.device == "cpu", kBad,
           "--optimizer muon is implemented on the CPU backend only, not --device {}", f.device);
  ZS_CHECK(d == "fp32" || f.device == "cpu", kBad,
           "{} {} is implemented on the CPU backend only, not --device {}",
           flag("optimizer-state-dtype"), d, f.device);
  const std::string int8_only = "--optimizer-state-dtype int8, not " + d;
  require(vm, flag, "optimizer-state-block", d == "int8", int8_only);
  require(vm, flag, "optimizer-state-code", d == "int8", int8_only);
  opt.state_block = value<int64_t>(vm, "optimizer-state-block");  // its range: validate()
  const std::string code = value<std::string>(vm, "optimizer-state-code");
  ZS_CHECK(code == "float8" || code == "dynamic", kBad, "{} '{}' is not one of float8, dynamic",
           flag("optimizer-state-code"), code);
  for (const char* name : {"optimizer-state-min-numel", "optimizer-state-fp32"}) {
    ZS_CHECK(!flag_given(vm, name) || d != "fp32", kBad,
             "{} applies to --optimizer-state-dtype bf16 or int8, not fp32 (every parameter keeps "
             "fp32 states)",
             flag(name));
  }
  opt.state_min_numel = value<int64_t>(vm, "optimizer-state-min-numel");
  opt.state_dtype = d == "int8"   ? optim::StateDType::kI8
                    : d == "bf16" ? optim::StateDType::kBF16
                                  : optim::StateDType::kF32;
  opt.state_code = parse_state_code(code.c_str());
  if (flag_given(vm, "optimizer-state-fp32"))
    opt.state_fp32 = split_state_patterns(flag("optimizer-state-fp32"),
                                          value<std::string>(vm, "optimizer-state-fp32"));
}

// LoRA ([Note: LoRA] in nn/gpt_adapters.h) and the frozen base's storage and int8 compute.
void read_finetune(const po::variables_map& vm, const FlagNamer& flag, RunFlags& f) {
  nn::GptLoraConfig& lora = f.adapters.lora;
  lora.rank = value<int>(vm, "lora-rank");
  for (const char* name : {"lora-alpha", "lora-targets"})
    require(vm, flag, name, lora.rank > 0, "LoRA adapters: give --lora-rank");
  lora.alpha = value<float>(vm, "lora-alpha");
  lora.targets = nn::parse_gpt_lora_targets(value<std::string>(vm, "lora-targets"));
  FrozenPolicy& frozen = f.engine.frozen;
  if (vm.count("base-dtype")) {
    const std::string b = value<std::string>(vm, "base-dtype");
    ZS_CHECK(b == "fp32" || b == "bf16" || b == "fp16" || b == "int8", kBad,
             "{} '{}' is not one of fp32, bf16, fp16, int8", flag("base-dtype"), b);
    ZS_CHECK(lora.rank > 0, kBad, "{} needs a frozen base: give --lora-rank", flag("base-dtype"));
    frozen.storage = b == "int8" ? DType::kI8 : float_dtype(vm, flag, "base-dtype");
  }
  const bool int8_base = frozen.storage == DType::kI8;
  for (const char* name : {"int8-compute", "int8-outlier-threshold"})
    require(vm, flag, name, int8_base, "an int8 base: give --base-dtype int8 (and --lora-rank)");
  using I8 = FrozenPolicy::Int8Compute;
  const std::string m = value<std::string>(vm, "int8-compute");
  ZS_CHECK(m == "auto" || m == "dequantize" || m == "int8-gemm", kBad,
           "{} '{}' is not one of auto, dequantize, int8-gemm", flag("int8-compute"), m);
  frozen.int8_compute = m == "dequantize"  ? I8::kDequantize
                        : m == "int8-gemm" ? I8::kInt8Gemm
                                           : I8::kAuto;
  const float threshold = value<float>(vm, "int8-outlier-threshold");
  ZS_CHECK(std::isfinite(threshold) && threshold >= 0.0f, kBad,
           "{} {} must be a finite number >= 0 (0 disables)", flag("int8-outlier-threshold"),
           threshold);
  // [Note: int8 base compute]: the model accepts int8 records unless told to dequantize; the
  // engine's policy decides whether it hands them over.
  f.adapters.int8.accept = int8_base && frozen.int8_compute != I8::kDequantize;
  f.adapters.int8.outlier_threshold = threshold;
}

}  // namespace

std::string plain_flag_name(const std::string& name) { return "--" + name; }

KeyNamer engine_key_namer(const FlagNamer& flag) {
  return [flag](std::string_view key) {
    if (key == "stage") return flag("zero-stage");
    if (key == "micro_batches") return flag("gradient-accumulation-steps");
    std::string dashed(key);  // optimizer.state_block -> optimizer-state-block
    std::replace_if(
        dashed.begin(), dashed.end(), [](char c) { return c == '_' || c == '.'; }, '-');
    return flag(dashed);
  };
}

bool flag_given(const po::variables_map& vm, const std::string& name) {
  return vm.count(name) && !vm[name].defaulted();
}

const std::map<std::string, std::string>& run_flag_aliases() {
  static const std::map<std::string, std::string> aliases = {{"batch", "micro-batch-size"}};
  return aliases;
}

void add_batch_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
      ("batch", po::value<int>()->default_value(16),
       "micro-batch: sequences per rank per forward/backward (DeepSpeed's "
       "train_micro_batch_size_per_gpu)")
      ("micro-batch-size", po::value<int>(), "alias of --batch")
      ("gradient-accumulation-steps", po::value<int>()->default_value(1),
       "micro-batches accumulated per optimizer step")
      ("global-micro-batches", po::value<int>()->default_value(0),
       "micro-batches per optimizer step over all ranks: each rank takes M / ranks of them, so the "
       "step is the same at any world size (0: --gradient-accumulation-steps per rank)")
      ("world-invariant", po::bool_switch(),
       "the same bits at any power-of-two world size: each micro-batch reduced over the ranks and "
       "the micro-batches summed on the rank in one fixed binary tree, loss and gradient norm "
       "summed exactly (docs/engine.md; with --global-micro-batches and the same --threads at "
       "every world size; CPU, fp32 gradients)")
      ("checkpoint-activations", po::bool_switch(),
       "recompute each block's forward in backward (less activation memory)")
      ("head-chunk", po::value<std::string>()->default_value("auto"),
       "the LM head and its loss over chunks of N token rows, so the fp32 logits [batch x "
       "context, vocab] are never whole: auto (chunk when they would exceed 256 MiB, in chunks "
       "of 32 MiB / (4 vocab) rows), off, or N (CPU only; the loss and every gradient but the "
       "LM head weight's are the same bits; docs/memory.md)")
      ("attention",
       po::value<std::string>()->default_value(
           std::string(nn::gpt_attention_name(nn::GptRunSettings{}.attention))),
       "the CPU attention kernel: fused (64 x 64 tiles with an online softmax: no [batch, heads, "
       "context, context] scores kept, the same bits at any thread count and ISA) or gemm "
       "(batched GEMMs over the whole scores, kept for backward; faster at short contexts); the "
       "CUDA model has its own")
      ("threads", po::value<int>()->default_value(0),
       "compute threads per rank (0: cores / ranks on this node); oneDNN sizes its GEMM "
       "scratchpads for them");
  // clang-format on
}

void add_engine_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
      ("zero-stage", po::value<int>()->default_value(3), "ZeRO stage: 0, 1, 2 or 3")
      ("dtype", po::value<std::string>()->default_value("bf16"),
       "compute dtype: fp32, bf16 or fp16")
      ("grad-dtype", po::value<std::string>()->default_value("fp32"),
       "accumulated-gradient and reduction dtype: fp32 or the compute dtype")
      ("prefetch", po::value<int>()->default_value(1),
       "units gathered ahead of use in stage 3 (0: none)")
      ("shard-group-size", po::value<int>()->default_value(0),
       "hybrid sharding (HSDP): shard the model states over groups of this many ranks and "
       "replicate across groups, e.g. the ranks of one node (0: all ranks; must divide them)")
      ("zero-quantized-weights", po::bool_switch(),
       "ZeRO++ qwZ (stage 3): gather parameters as int8 codes with one fp32 scale per "
       "--zero-quantized-weights-block elements, 1 + 4/B bytes per element instead of the "
       "compute dtype's, dequantized before compute (CPU only)")
      ("zero-quantized-weights-block", po::value<int64_t>()->default_value(256),
       "elements per fp32 scale of --zero-quantized-weights: a power of two in 32..65536 (the "
       "layout alignment becomes a multiple of it)")
      ("zero-hpz-partition-size", po::value<int>()->default_value(1),
       "ZeRO++ hpZ (stage 3): groups of this many consecutive ranks (a node's, or a divisor of "
       "it) keep a secondary shard of the parameters from the forward gather, so the backward "
       "gathers within the node; costs (params / K) x compute-dtype bytes per rank (1: off; "
       "CPU only; needs more than one node)")
      ("zero-quantized-gradients", po::bool_switch(),
       "ZeRO++ qgZ (stages 2-3): reduce-scatter gradients as int8 codes with one fp32 scale per "
       "--zero-quantized-gradients-block elements, in two all-to-alls (within each node, then "
       "across nodes) with fp32 sums (CPU only)")
      ("zero-quantized-gradients-block", po::value<int64_t>()->default_value(256),
       "elements per fp32 scale of --zero-quantized-gradients: a power of two in 32..65536 (the "
       "layout alignment becomes a multiple of it)")
      ("collectives", po::value<std::string>()->default_value("hierarchical"),
       "hierarchical: the engine's all-rank collectives in two levels, within each node then "
       "across nodes, where the job spans nodes of more than one rank each (elsewhere they are "
       "flat); or flat: always one level (docs/scaling.md)")
      ("offload-optimizer", po::bool_switch(),
       "keep the fp32 master and Adam state in host memory and update them with the CPU Adam")
      ("device", po::value<std::string>()->default_value("cpu"),
       "cpu | cuda: the CPU engine and GPT, or one GPU per rank with NCCL (needs a CUDA build, "
       "docs/gpu.md)");
  // clang-format on
}

void add_optimizer_state_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
      ("optimizer", po::value<std::string>()->default_value("adamw"),
       "adamw, sgd or muon: Muon (momentum, Newton-Schulz orthogonalisation, Moonlight's scale) "
       "for the 2-D parameters of the transformer blocks and AdamW for every other parameter "
       "(docs/optimizers.md; CPU, fp32 states, no offload)")
      ("muon-momentum", po::value<float>()->default_value(0.95f, "0.95"),
       "--optimizer muon: the momentum of its Nesterov momentum buffer, in [0, 1)")
      ("muon-ns-steps", po::value<int>()->default_value(5),
       "--optimizer muon: Newton-Schulz iterations per step, 1..100")
      ("optimizer-state-dtype", po::value<std::string>()->default_value("fp32"),
       "storage of AdamW's m and v: fp32, bf16 (rounded to nearest even) or int8 (8-bit block-wise "
       "codes, one fp32 scale per --optimizer-state-block elements: 2 + 8/B bytes per parameter "
       "instead of 8); parameters under --optimizer-state-min-numel elements or named by "
       "--optimizer-state-fp32 keep fp32 states (CPU only)")
      ("optimizer-state-block", po::value<int64_t>()->default_value(256),
       "elements per scale of int8 optimizer states: a power of two >= 64")
      ("optimizer-state-code", po::value<std::string>()->default_value("float8"),
       "code book of int8 optimizer states: float8 (3 mantissa bits, E4M3 for m and E5M3 for v "
       "under the block's absmax; the fast kernels) or dynamic (bitsandbytes' dynamic map)")
      ("optimizer-state-min-numel", po::value<int64_t>()->default_value(4096),
       "parameters with fewer elements keep fp32 optimizer states (bitsandbytes' min_8bit_size)")
      ("optimizer-state-fp32", po::value<std::string>(),
       "PATTERN[,PATTERN...]: parameters that keep fp32 optimizer states, by name as checkpoints "
       "spell them (embed.wte, block.0.qkv.weight, head.lm_head.weight); shell globs (fnmatch: "
       "'*' spans dots, e.g. '*.wte'); each must match a trainable parameter");
  // clang-format on
}

void add_finetune_options(po::options_description& desc) {
  // clang-format off
  desc.add_options()
      ("lora-rank", po::value<int>()->default_value(0),
       "LoRA adapter rank r (0: off); the base is frozen, only adapters train")
      ("lora-alpha", po::value<float>()->default_value(8.0f, "8"),
       "LoRA alpha: the adapters are scaled by alpha / r")
      ("lora-targets", po::value<std::string>()->default_value("qkv,proj,fc,fc_proj"),
       "comma-separated linears to adapt: qkv, proj, fc, fc_proj")
      ("base-dtype", po::value<std::string>(),
       "storage of the frozen base: fp32, bf16, fp16 or int8 (vector-wise, one scale per row); "
       "default: the compute dtype")
      ("int8-compute", po::value<std::string>()->default_value("auto"),
       "with --base-dtype int8, how the base linears compute: int8-gemm (int8 x int8 products, "
       "needs VNNI), dequantize (into the compute dtype first), auto (int8-gemm where the CPU has "
       "VNNI under the ISA caps)")
      ("int8-outlier-threshold", po::value<float>()->default_value(6.0f, "6"),
       "int8 GEMM: activation columns with max |x| above this are computed in fp32 against the "
       "dequantized weight columns (LLM.int8()'s decomposition); 0 disables");
  // clang-format on
}

RunFlags run_flags_from(const po::variables_map& vm, const FlagNamer& flag, EngineConfig engine) {
  RunFlags f;
  f.engine = std::move(engine);
  read_batch(vm, flag, f);
  read_engine(vm, flag, f);
  read_optimizer_states(vm, flag, f);
  read_finetune(vm, flag, f);
  return f;
}

void resolve_world(int world, int global_micro_batches, bool accumulation_given,
                   EngineConfig& engine) {
  // [Note: world-invariant reduction]: the step's micro-batches must not depend on the world
  // size, so the mode needs them given over all ranks.
  ZS_CHECK(!engine.world_invariant || global_micro_batches > 0, kBad,
           "--world-invariant needs --global-micro-batches M, the micro-batches per step over all "
           "ranks, the same at every world size (--global-micro-batches {} is this run's {} per "
           "rank at {} ranks)",
           static_cast<int64_t>(engine.micro_batches) * world, engine.micro_batches, world);
  if (const int M = global_micro_batches; M > 0) {
    ZS_CHECK(M % world == 0, kBad, "--global-micro-batches {} is not a multiple of the {} ranks", M,
             world);
    const int k = M / world;
    ZS_CHECK(!accumulation_given || engine.micro_batches == k, kBad,
             "--global-micro-batches {} at {} ranks is {} micro-batches per rank, not the {} of "
             "--gradient-accumulation-steps: give one of them",
             M, world, k, engine.micro_batches);
    engine.micro_batches = k;
  }
  const int S = engine.shard_group_size;
  ZS_CHECK(S <= world && world % std::max(S, 1) == 0, kBad,
           "--shard-group-size {} does not divide the {} ranks (0: all ranks)", S, world);
}

}  // namespace zs::apps
