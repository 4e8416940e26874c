#include "options.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "core/settings.h"
#include "dataset.h"
#include "ds_config.h"
#include "examples/model_options.h"
#include "paths.h"

namespace po = boost::program_options;

namespace zs::train {
namespace {

// train_gpt's byte-level GPT: the architecture flags' defaults.
const nn::GptArchitecture kArchitecture = {
    .layers = 4, .heads = 4, .width = 128, .context = 128, .vocab = 256, .ffn_mult = 4};

// An option's value as JSON, for the log header and for comparing a DeepSpeed value with an
// explicit flag (the types train_gpt's flags use).
nlohmann::ordered_json any_json(const boost::any& v) {
  if (v.empty()) return nullptr;
  if (auto* p = boost::any_cast<int>(&v)) return *p;
  if (auto* p = boost::any_cast<int64_t>(&v)) return *p;
  if (auto* p = boost::any_cast<uint64_t>(&v)) return *p;
  // A float as its shortest decimal (2e-3, not 0.0020000000949949026).
  if (auto* p = boost::any_cast<float>(&v)) return std::stod(fmt::format("{}", *p));
  if (auto* p = boost::any_cast<double>(&v)) return *p;
  if (auto* p = boost::any_cast<bool>(&v)) return *p;
  if (auto* p = boost::any_cast<std::string>(&v)) return *p;
  return "(unprintable)";
}

bool given(const po::variables_map& vm, const std::string& name) {
  return vm.count(name) && !vm[name].defaulted();
}

// Flags with a second spelling: the canonical name first.
const std::map<std::string, std::string> kAliases = {
    {"gradient-accumulation-steps", "micro-batches"}, {"batch", "micro-batch-size"}};

// Merges the DeepSpeed file into vm under the rule of ds_config.h: an explicit flag that the
// file also sets must agree with it. Returns flag -> key path, for messages.
std::map<std::string, std::string> merge_ds_config(const DsConfig& ds, const std::string& path,
                                                   const po::options_description& all,
                                                   po::variables_map& vm) {
  std::map<std::string, std::string> from;  // flag -> key path
  std::map<std::string, nlohmann::ordered_json> value;
  for (const DsSetting& s : ds.settings) {
    std::vector<std::string> args = {"train_gpt"};
    if (!s.is_switch) {
      args.insert(args.end(), {"--" + s.flag, s.value});
    } else if (s.value == "true") {
      args.push_back("--" + s.flag);
    }
    po::variables_map one;
    po::parsed_options parsed(&all);
    try {
      parsed = po::command_line_parser(args).options(all).run();
      po::store(parsed, one);
    } catch (const po::error& e) {
      fail(ErrorCode::kInvalidArgument, "--deepspeed-config {}: {}: {}", path, s.key, e.what());
    }
    const nlohmann::ordered_json v = any_json(one[s.flag].value());
    if (auto it = from.find(s.flag); it != from.end() && value[s.flag] != v) {
      fail(ErrorCode::kInvalidArgument, "--deepspeed-config {}: {} = {} and {} = {} disagree", path,
           it->second, value[s.flag].dump(), s.key, v.dump());
    }
    std::vector<std::string> names = {s.flag};
    if (auto a = kAliases.find(s.flag); a != kAliases.end()) names.push_back(a->second);
    for (const std::string& n : names) {
      if (given(vm, n) && any_json(vm[n].value()) != v) {
        fail(ErrorCode::kInvalidArgument,
             "--deepspeed-config {}: {} = {} conflicts with --{} {} given explicitly (the file "
             "and the flags must agree: remove one or make them equal)",
             path, s.key, v.dump(), n, any_json(vm[n].value()).dump());
      }
    }
    from[s.flag] = s.key;
    value[s.flag] = v;
    po::store(parsed, vm);  // explicit flags were stored first and stay (they are equal)
  }
  return from;
}

// Resolves a flag and its alias (both unbound, the canonical one with a default).
int resolve_alias(const po::variables_map& vm, const std::string& name,
                  std::vector<std::string>& notes, const char* note) {
  const std::string& alias = kAliases.at(name);
  int v = vm[name].as<int>();
  if (given(vm, alias)) {
    const int a = vm[alias].as<int>();
    ZS_CHECK(!given(vm, name) || a == v, ErrorCode::kInvalidArgument,
             "--{} {} and --{} {} disagree: --{} is another name for --{}; give one of them", alias,
             a, name, v, alias, name);
    v = a;
    if (note != nullptr) notes.emplace_back(note);
  }
  return v;
}

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

// "--clip", or "--clip (gradient_clipping in ds.json)" for a value that came from the
// DeepSpeed file: where a bad value came from.
struct FlagName {
  const std::map<std::string, std::string>& from_ds;  // flag -> key path
  const std::string& file;
  std::string operator()(const std::string& name) const {
    auto it = from_ds.find(name);
    return it == from_ds.end() ? "--" + name
                               : fmt::format("--{} ({} in {})", name, it->second, file);
  }
};

// The loss scaler: set only when a scaler flag is given, so that the engine's own choice (dynamic
// for fp16, none otherwise) stays the default.
void configure_loss_scaler(const po::variables_map& vm, const FlagName& flag,
                           const std::string& dtype, EngineConfig& engine) {
  const char* scaler_flags[] = {"loss-scale", "initial-scale-power", "loss-scale-window",
                                "hysteresis", "min-loss-scale"};
  const char* first_scaler_flag = nullptr;
  for (const char* name : scaler_flags) {
    if (first_scaler_flag == nullptr && given(vm, name)) first_scaler_flag = name;
  }
  if (first_scaler_flag != nullptr) {
    ZS_CHECK(engine.precision.param_dtype == DType::kF16, ErrorCode::kInvalidArgument,
             "{} applies to --dtype fp16 only ({} trains without loss scaling)",
             flag(first_scaler_flag), dtype);
    const float scale = vm["loss-scale"].as<float>();
    const int power = vm["initial-scale-power"].as<int>();
    const int64_t window = vm["loss-scale-window"].as<int64_t>();
    const int hysteresis = vm["hysteresis"].as<int>();
    const float min_scale = vm["min-loss-scale"].as<float>();
    ZS_CHECK(finite_at_least(scale, 0.0), ErrorCode::kInvalidArgument,
             "{} {} must be 0 (dynamic) or a finite number > 0 (static)", flag("loss-scale"),
             scale);
    ZS_CHECK(power >= 0 && power <= 127, ErrorCode::kInvalidArgument, "{} {} is outside 0..127",
             flag("initial-scale-power"), power);
    ZS_CHECK(window >= 1, ErrorCode::kInvalidArgument, "{} {} must be at least 1",
             flag("loss-scale-window"), window);
    ZS_CHECK(hysteresis >= 1, ErrorCode::kInvalidArgument, "{} {} must be at least 1",
             flag("hysteresis"), hysteresis);
    const float initial = scale > 0 ? scale : std::ldexp(1.0f, power);
    ZS_CHECK(std::isfinite(min_scale) && min_scale > 0.0f && min_scale <= initial,
             ErrorCode::kInvalidArgument, "{} {} is outside (0, {}] (the initial scale)",
             flag("min-loss-scale"), min_scale, initial);
    if (scale > 0) {
      for (const char* dyn :
           {"initial-scale-power", "loss-scale-window", "hysteresis", "min-loss-scale"}) {
        ZS_CHECK(!given(vm, dyn), ErrorCode::kInvalidArgument,
                 "{} applies to the dynamic scaler (--loss-scale 0), not a static {} {}", flag(dyn),
                 flag("loss-scale"), scale);
      }
    }
    engine.loss_scale_set = true;
    engine.loss_scale = optim::LossScalerConfig{};
    engine.loss_scale.dynamic = scale == 0;
    engine.loss_scale.initial = initial;
    engine.loss_scale.growth_interval = window;
    engine.loss_scale.hysteresis = hysteresis;
    engine.loss_scale.min_scale = min_scale;
  }
}

// The log file's policy (run_log.h): new, or append when resuming, unless --json-log-mode says.
std::string configure_log_mode(const po::variables_map& vm, TrainOptions& o) {
  const bool resuming = o.checkpoint.resume || !o.checkpoint.resume_from.empty();
  std::string mode = resuming ? "append" : "new";
  if (vm.count("json-log-mode")) {
    mode = vm["json-log-mode"].as<std::string>();
    ZS_CHECK(!o.json_log.empty(), ErrorCode::kInvalidArgument,
             "--json-log-mode applies to --json-log, which is not given");
  }
  if (mode == "new") {
    o.json_log_mode = LogMode::kNew;
  } else if (mode == "append") {
    o.json_log_mode = LogMode::kAppend;
  } else if (mode == "overwrite") {
    o.json_log_mode = LogMode::kOverwrite;
  } else {
    fail(ErrorCode::kInvalidArgument, "--json-log-mode '{}' is not one of new, append, overwrite",
         mode);
  }
  return mode;
}

}  // namespace

std::optional<TrainOptions> parse_options(int argc, char** argv, bool print_help) {
  TrainOptions o;
  o.watchdog_timeout_s = Settings::from_environment().watchdog_s.value_or(300.0);
  std::string dtype = "bf16", grad_dtype = "fp32", optimizer = "adamw", config_file, schedule;
  int stage = 3;
  float lr = 2e-3f, min_lr_ratio = 0.1f;
  int64_t warmup = 50;
  bool checkpoint_activations = false, offload = false;

  po::options_description general("General");
  general.add_options()("help,h", "print this help and exit")(
      "config", po::value(&config_file),
      "read options from FILE (lines `name = value`); "
      "command-line flags win")(
      "deepspeed-config", po::value(&o.ds_config),
      "read a DeepSpeed ds_config.json (ZeRO stage, bf16/fp16 and loss scaling, micro-batch, "
      "accumulation, clipping, optimizer, scheduler; README); a flag the file also sets must "
      "agree with it")("ds-config", po::value<std::string>(), "alias of --deepspeed-config")(
      "data", po::value(&o.data),
      "training text: a file or a directory of files (byte-level tokens, vocabulary 256); "
      "default: the corpus shipped with zeroshard (../share/zeroshard/corpus.txt from the "
      "program)")("steps", po::value(&o.steps)->default_value(o.steps), "optimizer steps")(
      "seed", po::value(&o.engine.seed)->default_value(o.engine.seed),
      "seed for initialisation, data sampling and generation")(
      "json-log", po::value(&o.json_log),
      "write JSON records here: a header (configuration, versions, machine), one per step, a "
      "final one (README)")("json-log-mode", po::value<std::string>(),
                            "when --json-log exists: new (refuse), append or overwrite; "
                            "default: new, append when resuming")(
      "log-every", po::value(&o.log_every)->default_value(1), "print every N steps")(
      "memory-check", po::value<std::string>()->default_value("on"),
      "on: before any work, refuse a run whose memory plan (zs_plan's) and text do not fit the "
      "memory this node and process have available; off: start anyway")(
      "watchdog-timeout", po::value(&o.watchdog_timeout_s)->default_value(o.watchdog_timeout_s),
      "seconds a collective may wait before the watchdog ends a hung job, naming where each rank "
      "is (0: off; default ZS_WATCHDOG_S, else 300)")(
      "eval-every", po::value(&o.eval_every)->default_value(o.eval_every),
      "validation loss every N steps (0: only at the end)")(
      "eval-batches", po::value(&o.eval_batches)->default_value(o.eval_batches),
      "validation micro-batches per rank")(
      "val-fraction", po::value(&o.val_fraction)->default_value(o.val_fraction, "0.1"),
      "share of the text held out for validation")(
      "sample-tokens", po::value(&o.sample_tokens)->default_value(o.sample_tokens),
      "bytes of text to generate at the end (0: none)")(
      "sample-prompt", po::value(&o.sample_prompt)->default_value(o.sample_prompt),
      "prompt for the generated sample");

  po::options_description model("Model and batch");
  examples::add_architecture_options(model, &kArchitecture, false);
  model.add_options()("batch", po::value<int>()->default_value(16),
                      "micro-batch: sequences per rank per forward/backward (DeepSpeed's "
                      "train_micro_batch_size_per_gpu)")("micro-batch-size", po::value<int>(),
                                                         "alias of --batch")(
      "gradient-accumulation-steps", po::value<int>()->default_value(1),
      "micro-batches accumulated per optimizer step")(
      "micro-batches", po::value<int>(),
      "deprecated alias of --gradient-accumulation-steps (not the micro-batch size)")(
      "checkpoint-activations", po::bool_switch(&checkpoint_activations),
      "recompute each block's forward in backward (less activation memory)")(
      "threads", po::value(&o.model.run.threads)->default_value(0),
      "compute threads per rank (0: cores / ranks on this node)");

  po::options_description engine("Sharding and precision");
  engine.add_options()("zero-stage", po::value(&stage)->default_value(3),
                       "ZeRO stage: 0, 1, 2 or 3")("dtype", po::value(&dtype)->default_value(dtype),
                                                   "compute dtype: fp32, bf16 or fp16")(
      "grad-dtype", po::value(&grad_dtype)->default_value(grad_dtype),
      "accumulated-gradient and reduction dtype: fp32 or the compute dtype")(
      "prefetch", po::value(&o.engine.prefetch)->default_value(1),
      "units gathered ahead of use in stage 3 (0: none)")(
      "shard-group-size", po::value(&o.engine.shard_group_size)->default_value(0),
      "hybrid sharding (HSDP): shard the model states over groups of this many ranks and "
      "replicate across groups, e.g. the ranks of one node (0: all ranks; must divide them)")(
      "collectives", po::value(&o.collectives)->default_value(o.collectives),
      "hierarchical: the engine's all-rank collectives in two levels, within each node then "
      "across nodes, where the job spans nodes of more than one rank each (elsewhere they are "
      "flat); or flat: always one level (docs/scaling.md)")(
      "offload-optimizer", po::bool_switch(&offload),
      "keep the fp32 master and Adam state in host memory and update them with the CPU Adam")(
      "device", po::value(&o.device)->default_value(o.device),
      "cpu, or cuda (one GPU per rank, NCCL; needs a CUDA build, docs/gpu.md)")(
      "peak-tflops", po::value(&o.peak_tflops)->default_value(0.0, "0"),
      "per-rank peak TFLOP/s for the MFU figure (0: known GPUs only)");

  po::options_description scaler("Loss scaling (--dtype fp16 only; default: dynamic)");
  scaler.add_options()("loss-scale", po::value<float>()->default_value(0.0f, "0"),
                       "0: dynamic; > 0: this static scale")(
      "initial-scale-power", po::value<int>()->default_value(16),
      "dynamic scaler starts at 2^N (0..127)")(
      "loss-scale-window", po::value<int64_t>()->default_value(2000),
      "double the scale after this many overflow-free steps")(
      "hysteresis", po::value<int>()->default_value(1),
      "halve the scale after this many overflows")("min-loss-scale",
                                                   po::value<float>()->default_value(1.0f, "1"),
                                                   "the dynamic scale never goes below this");

  po::options_description optim("Optimizer");
  optim.add_options()("optimizer", po::value(&optimizer)->default_value(optimizer), "adamw or sgd")(
      "lr", po::value(&lr)->default_value(lr, "2e-3"), "peak learning rate")(
      "lr-schedule", po::value(&schedule)->default_value("cosine"),
      "cosine (decay to --min-lr-ratio x --lr at --steps) or constant, after the linear "
      "warm-up")(
      "warmup", po::value(&warmup)->default_value(warmup),
      "linear warm-up steps (0..--steps; default 50, or --steps when the run is shorter)")(
      "min-lr-ratio", po::value(&min_lr_ratio)->default_value(min_lr_ratio, "0.1"),
      "cosine decay floor as a fraction of --lr (0..1)")(
      "weight-decay", po::value(&o.engine.optimizer.adamw.weight_decay)->default_value(0.1f, "0.1"),
      "AdamW decoupled weight decay (2-D weights only)")(
      "beta1", po::value(&o.engine.optimizer.adamw.beta1)->default_value(0.9f, "0.9"),
      "Adam beta1, in [0, 1)")(
      "beta2", po::value(&o.engine.optimizer.adamw.beta2)->default_value(0.95f, "0.95"),
      "Adam beta2, in [0, 1)")(
      "adam-eps", po::value(&o.engine.optimizer.adamw.eps)->default_value(1e-8f, "1e-8"),
      "Adam epsilon (> 0)")(
      "momentum", po::value(&o.engine.optimizer.sgd.momentum)->default_value(0.9f, "0.9"),
      "SGD momentum, in [0, 1)")("clip", po::value(&o.engine.clip_norm)->default_value(1.0f, "1"),
                                 "clip the global gradient norm to this (0: off)");

  po::options_description ckpt("Checkpoints");
  add_checkpoint_flags(ckpt, o.checkpoint);
  po::options_description hf("Hugging Face interop");
  add_hf_flags(hf, o.checkpoint);
  std::string lora_targets = "qkv,proj,fc,fc_proj", base_dtype, int8_compute = "auto";
  float outlier_threshold = 6.0f;
  po::options_description finetune("Fine-tuning (LoRA, frozen base; docs/finetune.md)");
  finetune.add_options()("lora-rank", po::value(&o.model.adapters.lora.rank)->default_value(0),
                         "LoRA adapter rank r (0: off); the base is frozen, only adapters train")(
      "lora-alpha", po::value(&o.model.adapters.lora.alpha)->default_value(8.0f, "8"),
      "LoRA alpha: the adapters are scaled by alpha / r")(
      "lora-targets", po::value(&lora_targets)->default_value(lora_targets),
      "comma-separated linears to adapt: qkv, proj, fc, fc_proj")(
      "base-dtype", po::value(&base_dtype),
      "storage of the frozen base: fp32, bf16, fp16 or int8 (vector-wise, one scale per row); "
      "default: the compute dtype")(
      "int8-compute", po::value(&int8_compute)->default_value(int8_compute),
      "with --base-dtype int8, how the base linears compute: int8-gemm (int8 x int8 products, "
      "needs VNNI), dequantize (into the compute dtype first), auto (int8-gemm where the CPU has "
      "VNNI under the ISA caps)")(
      "int8-outlier-threshold", po::value(&outlier_threshold)->default_value(6.0f, "6"),
      "int8 GEMM: activation columns with max |x| above this are computed in fp32 against the "
      "dequantized weight columns (LLM.int8()'s decomposition); 0 disables")(
      "export-adapters", po::value(&o.checkpoint.export_adapters),
      "at the end, write the adapters alone in Hugging Face PEFT's layout to this directory "
      "(adapter_model.safetensors in --export-dtype, adapter_config.json)");

  po::options_description all(
      "train_gpt: train a byte-level GPT with zeroshard under mpirun\n"
      "usage: mpirun -np N train_gpt [options]");
  all.add(general).add(model).add(engine).add(scaler).add(optim).add(ckpt).add(hf).add(finetune);

  po::variables_map vm;
  std::map<std::string, std::string> from_ds;  // flag -> DeepSpeed key path
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    if (vm.count("help")) {
      if (print_help) std::cout << all << "\n";
      return std::nullopt;
    }
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      check_path("config", path, PathUse::kReadFile);
      std::ifstream in(path);
      ZS_CHECK(in.good(), ErrorCode::kNotFound, "--config {} cannot be read", path);
      po::store(po::parse_config_file(in, all), vm);
    }
    // An empty path is never "not given" (paths.h): refused for every path flag, here, before
    // anything is read.
    for (const PathFlag& f : path_flags()) {
      if (vm.count(f.name) && vm[f.name].as<std::string>().empty()) check_path(f.name, "", f.use);
    }
    if (vm.count("ds-config")) {
      const std::string alias = vm["ds-config"].as<std::string>();
      ZS_CHECK(!vm.count("deepspeed-config") || vm["deepspeed-config"].as<std::string>() == alias,
               ErrorCode::kInvalidArgument,
               "--ds-config and --deepspeed-config name different files: give one");
      o.ds_config = alias;
    } else if (vm.count("deepspeed-config")) {
      o.ds_config = vm["deepspeed-config"].as<std::string>();
    }
    if (!o.ds_config.empty()) {
      check_path("deepspeed-config", o.ds_config, PathUse::kReadFile);
      const DsConfig ds = read_ds_config(o.ds_config);
      from_ds = merge_ds_config(ds, o.ds_config, all, vm);
      o.ds_train_batch_size = ds.train_batch_size;
      for (const std::string& n : ds.notes) o.notes.push_back("--deepspeed-config: " + n);
    }
    po::notify(vm);
  } catch (const po::error& e) {
    fail(ErrorCode::kInvalidArgument, "{} (see --help)", e.what());
  }

  // "--clip" or "--clip (gradient_clipping in ds.json)": where a bad value came from.
  const FlagName flag{from_ds, o.ds_config};

  o.model.arch = examples::architecture_from_options(vm, kArchitecture);
  o.model.run.batch = resolve_alias(vm, "batch", o.notes, nullptr);
  o.engine.micro_batches = resolve_alias(
      vm, "gradient-accumulation-steps", o.notes,
      "--micro-batches is deprecated: it sets the gradient-accumulation steps per optimizer step; "
      "use --gradient-accumulation-steps (DeepSpeed's gradient_accumulation_steps). The per-rank "
      "micro-batch size is --batch (alias --micro-batch-size).");
  o.engine.stage = zero_stage_from_int(stage);
  o.engine.precision.param_dtype = parse_dtype(dtype);
  o.engine.precision.grad_dtype = parse_dtype(grad_dtype);
  o.engine.offload.optimizer = offload;
  o.model.run.compute_dtype = o.engine.precision.param_dtype;
  o.model.adapters.lora.targets = nn::parse_gpt_lora_targets(lora_targets);
  if (!base_dtype.empty()) {
    o.engine.frozen.storage = base_dtype == "int8" ? DType::kI8 : parse_dtype(base_dtype);
    ZS_CHECK(o.model.adapters.lora.rank > 0, ErrorCode::kInvalidArgument,
             "--base-dtype {} needs a frozen base: give --lora-rank", base_dtype);
  }
  {
    using I8 = FrozenPolicy::Int8Compute;
    const std::map<std::string, I8> modes = {
        {"auto", I8::kAuto}, {"dequantize", I8::kDequantize}, {"int8-gemm", I8::kInt8Gemm}};
    const auto m = modes.find(int8_compute);
    ZS_CHECK(m != modes.end(), ErrorCode::kInvalidArgument,
             "--int8-compute {} is not one of auto, dequantize, int8-gemm", int8_compute);
    ZS_CHECK(
        std::isfinite(outlier_threshold) && outlier_threshold >= 0.0f, ErrorCode::kInvalidArgument,
        "--int8-outlier-threshold {} must be a finite number >= 0 (0 disables)", outlier_threshold);
    const bool int8_base = o.engine.frozen.storage == DType::kI8;
    for (const char* f : {"int8-compute", "int8-outlier-threshold"}) {
      ZS_CHECK(int8_base || !given(vm, f), ErrorCode::kInvalidArgument,
               "--{} applies to an int8 base: give --base-dtype int8 (and --lora-rank)", f);
    }
    o.engine.frozen.int8_compute = m->second;
    // [Note: int8 base compute]: the model accepts int8 records unless told to dequantize.
    o.model.adapters.int8.accept = int8_base && m->second != I8::kDequantize;
    o.model.adapters.int8.outlier_threshold = outlier_threshold;
  }
  o.model.run.checkpoint_activations = checkpoint_activations;
  if (optimizer == "adamw") {
    o.engine.optimizer.kind = OptimizerKind::kAdamW;
  } else if (optimizer == "sgd") {
    o.engine.optimizer.kind = OptimizerKind::kSgd;
  } else {
    fail(ErrorCode::kInvalidArgument, "{} '{}' is not one of adamw, sgd", flag("optimizer"),
         optimizer);
  }

  // Ranges, before any work (each message names the flag and what is allowed).
  ZS_CHECK(o.steps >= 1, ErrorCode::kInvalidArgument, "{} {} must be at least 1", flag("steps"),
           o.steps);
  // A default that depends on the run's length follows it: only a value the user gave is refused.
  if (!given(vm, "warmup")) warmup = std::min(warmup, o.steps);
  ZS_CHECK(warmup >= 0 && warmup <= o.steps, ErrorCode::kInvalidArgument,
           "{} {} is outside 0..{} (it may not be longer than the run, --steps {})", flag("warmup"),
           warmup, o.steps, o.steps);
  ZS_CHECK(finite_at_least(lr, 0.0), ErrorCode::kInvalidArgument,
           "{} {} must be a finite number >= 0", flag("lr"), lr);
  ZS_CHECK(min_lr_ratio >= 0.0f && min_lr_ratio <= 1.0f, ErrorCode::kInvalidArgument,
           "{} {} is outside [0, 1]", flag("min-lr-ratio"), min_lr_ratio);
  const auto& adam = o.engine.optimizer.adamw;
  for (const auto& [name, b] : {std::pair{"beta1", adam.beta1}, std::pair{"beta2", adam.beta2},
                                std::pair{"momentum", o.engine.optimizer.sgd.momentum}}) {
    ZS_CHECK(b >= 0.0f && b < 1.0f, ErrorCode::kInvalidArgument, "{} {} is outside [0, 1)",
             flag(name), b);
  }
  ZS_CHECK(std::isfinite(adam.eps) && adam.eps > 0.0f, ErrorCode::kInvalidArgument,
           "{} {} must be a finite number > 0", flag("adam-eps"), adam.eps);
  ZS_CHECK(finite_at_least(adam.weight_decay, 0.0), ErrorCode::kInvalidArgument,
           "{} {} must be a finite number >= 0", flag("weight-decay"), adam.weight_decay);
  ZS_CHECK(finite_at_least(o.engine.clip_norm, 0.0), ErrorCode::kInvalidArgument,
           "{} {} must be a finite number >= 0 (0: no clipping)", flag("clip"), o.engine.clip_norm);
  ZS_CHECK(o.model.run.batch >= 1, ErrorCode::kInvalidArgument, "{} {} must be at least 1",
           flag("batch"), o.model.run.batch);
  ZS_CHECK(o.engine.micro_batches >= 1, ErrorCode::kInvalidArgument,
           "{} {} must be at least 1 (micro-batches per optimizer step)",
           given(vm, "micro-batches") ? "--micro-batches" : flag("gradient-accumulation-steps"),
           o.engine.micro_batches);
  ZS_CHECK(o.val_fraction > 0.0 && o.val_fraction < 0.5, ErrorCode::kInvalidArgument,
           "--val-fraction {} must be in (0, 0.5)", o.val_fraction);
  ZS_CHECK(o.eval_every >= 0, ErrorCode::kInvalidArgument, "--eval-every must be >= 0");
  ZS_CHECK(o.eval_batches >= 1 && o.eval_batches <= 100000, ErrorCode::kInvalidArgument,
           "--eval-batches {} is outside 1..100000", o.eval_batches);
  ZS_CHECK(o.log_every >= 1, ErrorCode::kInvalidArgument, "{} must be >= 1", flag("log-every"));
  ZS_CHECK(std::isfinite(o.watchdog_timeout_s) && o.watchdog_timeout_s >= 0 &&
               o.watchdog_timeout_s <= 1e7,
           ErrorCode::kInvalidArgument, "--watchdog-timeout {} is outside [0, 1e7] seconds",
           o.watchdog_timeout_s);
  ZS_CHECK(o.sample_tokens >= 0 && o.sample_tokens <= 1000000, ErrorCode::kInvalidArgument,
           "--sample-tokens {} is outside 0..1000000", o.sample_tokens);
  ZS_CHECK(o.sample_tokens == 0 || !o.sample_prompt.empty(), ErrorCode::kInvalidArgument,
           "--sample-prompt is empty: the sample continues a prompt of at least one byte (or "
           "give --sample-tokens 0 for no sample)");

  // Combinations.
  const bool sgd = o.engine.optimizer.kind == OptimizerKind::kSgd;
  for (const char* name : {"adam-eps", "beta1", "beta2", "momentum"}) {
    const bool adam_flag = std::string(name) != "momentum";
    ZS_CHECK(!given(vm, name) || adam_flag != sgd, ErrorCode::kInvalidArgument,
             "{} applies to --optimizer {}, not {}", flag(name), adam_flag ? "adamw" : "sgd",
             optimizer);
  }
  if (schedule == "constant") {
    ZS_CHECK(!given(vm, "min-lr-ratio"), ErrorCode::kInvalidArgument,
             "{} applies to --lr-schedule cosine, not constant", flag("min-lr-ratio"));
    min_lr_ratio = 1.0f;  // cosine "decay" to 1 x lr is exactly constant (optim/lr_schedule.cc)
  } else {
    ZS_CHECK(schedule == "cosine", ErrorCode::kInvalidArgument,
             "{} '{}' is not one of cosine, constant", flag("lr-schedule"), schedule);
  }
  o.engine.optimizer.schedule.lr = lr;
  o.engine.optimizer.schedule.warmup_steps = warmup;
  o.engine.optimizer.schedule.total_steps = o.steps;
  o.engine.optimizer.schedule.min_ratio = min_lr_ratio;

  ZS_CHECK(o.collectives == "flat" || o.collectives == "hierarchical", ErrorCode::kInvalidArgument,
           "--collectives '{}' is not one of flat, hierarchical", o.collectives);
  ZS_CHECK(o.collectives == "flat" || o.device == "cpu" || !given(vm, "collectives"),
           ErrorCode::kUnsupported,
           "--collectives hierarchical is implemented for --device cpu only (MPI), not {}",
           o.device);
  if (o.device != "cpu") o.collectives = "flat";  // NCCL's own algorithms

  const std::string memory_check = vm["memory-check"].as<std::string>();
  ZS_CHECK(memory_check == "on" || memory_check == "off", ErrorCode::kInvalidArgument,
           "--memory-check '{}' is not one of on, off", memory_check);
  o.memory_check = memory_check == "on";

  configure_loss_scaler(vm, flag, dtype, o.engine);
  const std::string mode = configure_log_mode(vm, o);

  if (!vm.count("data")) o.data = default_data_path();
  o.model.validate();
  o.engine.validate();

  // Every option's final value, in --help's order, for the log header.
  for (const auto& d : all.options()) {
    const std::string& name = d->long_name();
    if (name == "help") continue;
    o.config[name] = vm.count(name) ? any_json(vm[name].value()) : nullptr;
  }
  o.config["data"] = o.data;
  o.config["batch"] = o.model.run.batch;
  o.config["gradient-accumulation-steps"] = o.engine.micro_batches;
  o.config["deepspeed-config"] =
      o.ds_config.empty() ? nullptr : nlohmann::ordered_json(o.ds_config);
  o.config["json-log-mode"] = mode;
  o.config["warmup"] = warmup;
  return o;
}

void check_paths(const TrainOptions& o, bool root) {
  for (const PathFlag& f : path_flags()) {
    const auto it = o.config.find(f.name);
    if (it == o.config.end() || !it->is_string() || (!f.every_rank && !root)) continue;
    check_path(f.name, it->get<std::string>(), f.use);
  }
}

void check_world_size(const TrainOptions& o, int world_size) {
  const int S = o.engine.shard_group_size;
  ZS_CHECK(S <= world_size && world_size % std::max(S, 1) == 0, ErrorCode::kInvalidArgument,
           "--shard-group-size {} does not divide the {} ranks (0: all ranks)", S, world_size);
  if (!o.ds_train_batch_size) return;
  const int64_t product =
      static_cast<int64_t>(o.model.run.batch) * o.engine.micro_batches * world_size;
  ZS_CHECK(*o.ds_train_batch_size == product, ErrorCode::kInvalidArgument,
           "--deepspeed-config {}: train_batch_size = {} is not micro-batch {} x gradient "
           "accumulation {} x world size {} = {}",
           o.ds_config, *o.ds_train_batch_size, o.model.run.batch, o.engine.micro_batches,
           world_size, product);
}

}  // namespace zs::train
