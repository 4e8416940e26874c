#include "options.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include <fmt/format.h>

#include "apps/common/engine_options.h"
#include "apps/common/model_options.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors_shards.h"
#include "core/error.h"
#include "core/settings.h"
#include "dataset.h"
#include "ds_config.h"
#include "hf_architecture.h"
#include "model_description.h"
#include "models/gpt/gpt_activations.h"
#include "option_table.h"
#include "paths.h"
#include "planner/transformer_plan.h"

namespace po = boost::program_options;

namespace zs::train {
namespace {

// An option's value as JSON, for the log header and for comparing a DeepSpeed value with an
// explicit flag (the types zs_train's flags use).
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

// Merges the DeepSpeed file into vm under the rule of ds_config.h: an explicit flag that the
// file also sets must agree with it. Returns flag -> key path, for messages.
std::map<std::string, std::string> merge_ds_config(const DsConfig& ds, const std::string& path,
                                                   const po::options_description& all,
                                                   po::variables_map& vm) {
  std::map<std::string, std::string> from;  // flag -> key path
  std::map<std::string, nlohmann::ordered_json> value;
  for (const DsSetting& s : ds.settings) {
    std::vector<std::string> args = {"zs_train"};
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
    const auto& aliases = apps::run_flag_aliases();
    if (auto a = aliases.find(s.flag); a != aliases.end()) names.push_back(a->second);
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

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

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

// Reads the command line, then --config and --deepspeed-config, into vm (explicit flags first; a
// DeepSpeed value must agree with them). Returns false after --help. Fills o.ds_config,
// o.ds_train_batch_size, o.notes and `from_ds` (flag -> DeepSpeed key path).
bool read_flags(int argc, char** argv, const po::options_description& all, bool print_help,
                TrainOptions& o, po::variables_map& vm,
                std::map<std::string, std::string>& from_ds) {
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    if (vm.count("help")) {
      if (print_help) std::cout << all << "\n";
      return false;
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
  return true;
}

// The checkpoint a --resume or --resume-from run will continue, as far as the flags tell before
// the save directory is claimed; "" when none.
std::string checkpoint_to_continue(const CheckpointFlags& c) {
  if (!c.resume_from.empty()) return c.resume_from;
  if (c.resume && !c.save_dir.empty()) return latest_checkpoint(c.save_dir).value_or("");
  return "";
}

// --init-from-hf's architecture (config.json, the flags given override it). A full fine-tune
// resumed after that directory is gone takes it from the checkpoint, which holds every
// parameter; a LoRA run needs its frozen base and is refused saying so.
nn::GptArchitecture hf_or_resumed_architecture(const po::variables_map& vm, TrainOptions& o) {
  const std::string& dir = o.checkpoint.init_from_hf;
  std::error_code ec;
  const std::string resumed = checkpoint_to_continue(o.checkpoint);
  if (std::filesystem::exists(dir, ec) || resumed.empty()) return architecture_from_hf(vm, dir);
  const bool lora = vm.count("lora-rank") && vm["lora-rank"].as<int>() > 0;
  ZS_CHECK(!lora, ErrorCode::kInvalidArgument,
           "--init-from-hf {}: does not exist, and this LoRA run needs it: {} holds only the "
           "adapters, trained on that frozen base; give the base's directory",
           dir, resumed);
  po::variables_map given_flags;
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) given_flags.insert({name, value});
  const nn::GptArchitecture arch = apps::architecture_from_options(
      given_flags,
      architecture_from_description(read_checkpoint_info(resumed).model_description, resumed));
  o.notes.push_back(fmt::format(
      "--init-from-hf {} does not exist: the model is the one {} describes, and the checkpoint "
      "holds every parameter (the directory is not read when resuming)",
      dir, resumed));
  o.checkpoint.init_from_hf.clear();
  return arch;
}

// The flags' values onto TrainOptions' fields: the architecture, then the flags zs_plan shares
// (apps/common/engine_options.h: batch, engine, optimizer states, adapters), refusing what does not
// parse or contradicts them.
void resolve_flags(const po::variables_map& vm, const FlagName& flag, RawFlags& r,
                   TrainOptions& o) {
  // With --init-from-hf the flags given are checked over config.json's model, not the default
  // GPT-2 (whose learned positions would refuse --rope-theta and --rope-scaling).
  o.model.arch = o.checkpoint.init_from_hf.empty() ? zs_train_architecture(vm)
                                                   : hf_or_resumed_architecture(vm, o);
  if (!o.checkpoint.export_hf.empty()) check_hf_export(o.model.arch, o.checkpoint.export_hf);
  safetensors::parse_byte_size(o.checkpoint.export_shard_size, "--export-shard-size");
  apps::RunFlags f = apps::run_flags_from(
      vm, [&flag](const std::string& name) { return flag(name); }, o.engine);
  o.engine = f.engine;
  o.model.run.batch = f.batch;
  o.model.run.checkpoint_activations = f.checkpoint_activations;
  o.model.run.head_chunk = f.head_chunk;
  o.model.run.attention = f.attention;
  o.model.run.threads = f.threads;
  o.model.run.compute_dtype = o.engine.precision.param_dtype;
  o.model.adapters = f.adapters;
  o.gradient_accumulation_given = f.accumulation_given;
  o.global_micro_batches = f.global_micro_batches;
  o.device = f.device;
  o.collectives = f.collectives;
  if (!o.checkpoint.export_adapters.empty())
    check_peft_export(o.model, o.checkpoint.export_adapters);
  // A default that depends on the run's length follows it: only a value the user gave is refused.
  if (!given(vm, "warmup")) r.warmup = std::min(r.warmup, o.steps);
}

// Flags that apply to one choice of another (Adam's to AdamW, the floor to the cosine schedule),
// then the schedule onto the engine.
void configure_optimizer(const po::variables_map& vm, const FlagName& flag, RawFlags& r,
                         TrainOptions& o) {
  const bool sgd = o.engine.optimizer.kind == OptimizerKind::kSgd;
  for (const char* name : {"adam-eps", "beta1", "beta2", "weight-decay", "momentum"}) {
    const bool adam_flag = std::string(name) != "momentum";
    // SGD applies no weight decay: --weight-decay 0 says just that (scripts pass it for clarity).
    const bool no_decay =
        std::string(name) == "weight-decay" && o.engine.optimizer.adamw.weight_decay == 0.0f;
    ZS_CHECK(!given(vm, name) || adam_flag != sgd || no_decay, ErrorCode::kInvalidArgument,
             "{} applies to --optimizer {}, not {}{}", flag(name), adam_flag ? "adamw" : "sgd",
             optimizer_kind_name(o.engine.optimizer.kind),
             o.engine.optimizer.kind == OptimizerKind::kMuon ? " (Muon's is --muon-momentum)" : "");
  }
  if (r.schedule == "constant") {
    ZS_CHECK(!given(vm, "min-lr-ratio"), ErrorCode::kInvalidArgument,
             "{} applies to --lr-schedule cosine, not constant", flag("min-lr-ratio"));
    r.min_lr_ratio = 1.0f;  // cosine "decay" to 1 x lr is exactly constant (optim/lr_schedule.cc)
  } else {
    ZS_CHECK(r.schedule == "cosine", ErrorCode::kInvalidArgument,
             "{} '{}' is not one of cosine, constant", flag("lr-schedule"), r.schedule);
  }
  o.engine.optimizer.schedule.lr = r.lr;
  o.engine.optimizer.schedule.warmup_steps = r.warmup;
  o.engine.optimizer.schedule.total_steps = o.steps;
  o.engine.optimizer.schedule.min_ratio = r.min_lr_ratio;
}

// zs_train's own flags that refine another ([Note: dependent flags] in
// apps/common/engine_options.h): refused when given without it.
void check_dependent_flags(const po::variables_map& vm, const FlagName& flag,
                           const TrainOptions& o) {
  auto require = [&](const char* name, bool holds, const char* what) {
    ZS_CHECK(holds || !given(vm, name), ErrorCode::kInvalidArgument, "{} applies to {}", flag(name),
             what);
  };
  const CheckpointFlags& c = o.checkpoint;
  require("keep", !c.save_dir.empty(), "--save-dir, which is not given");
  require("save-async", !c.save_dir.empty(), "--save-dir, which is not given");
  require("save-memory-every", !c.save_dir.empty(), "--save-dir, which is not given");
  require("memory-dir", c.save_memory_every > 0, "--save-memory-every, which is not given");
  require("export-dtype",
          !c.export_safetensors.empty() || !c.export_hf.empty() || !c.export_adapters.empty(),
          "--export-safetensors, --export-hf or --export-adapters, none of which is given");
  require("sample-prompt", o.sample_tokens > 0, "the sample, and --sample-tokens 0 writes none");
}

// --optimizer-state-fp32's patterns against the model's parameter names (the planner's, which are
// the engine's): one that matches none is refused now, naming the flag, rather than at the
// memory plan.
void check_state_names(const FlagName& flag, const TrainOptions& o) {
  if (o.engine.optimizer.state_fp32.empty()) return;
  const nn::TransformerShape shape = nn::transformer_shape_of(o.model.arch, o.model.adapters);
  // With LoRA the base is frozen: a pattern naming it is told so.
  std::vector<std::vector<std::string>> frozen;
  if (o.model.adapters.lora.enabled())
    frozen = nn::transformer_model_desc(nn::transformer_shape_of(o.model.arch)).names;
  try {
    check_state_fp32_patterns(o.engine.optimizer, nn::transformer_model_desc(shape).names, frozen);
  } catch (const Error& e) {
    fail(ErrorCode::kInvalidArgument, "{}: {}", flag("optimizer-state-fp32"), e.what());
  }
}

// Every option's final value, in --help's order, for the log header.
void record_config(const po::options_description& all, const po::variables_map& vm,
                   const std::string& mode, const RawFlags& r, TrainOptions& o) {
  for (const auto& d : all.options()) {
    const std::string& name = d->long_name();
    if (name == "help") continue;
    o.config[name] = vm.count(name) ? any_json(vm[name].value()) : nullptr;
  }
  o.config["data"] = o.data.empty() ? nullptr : nlohmann::ordered_json(o.data);
  o.config["batch"] = o.model.run.batch;
  o.config["gradient-accumulation-steps"] = o.engine.micro_batches;
  o.config["deepspeed-config"] =
      o.ds_config.empty() ? nullptr : nlohmann::ordered_json(o.ds_config);
  o.config["json-log-mode"] = mode;
  o.config["warmup"] = r.warmup;
}

// --device cuda with a component the CUDA model lacks (it is GPT-2's): refused with the flags.
void check_cuda_components(const nn::GptConfig& model) {
  try {
    nn::check_gpt_cuda_components(nn::GptActivationDims::of(model));
  } catch (const Error& e) {
    throw Error(e.code(),
                fmt::format("--device cuda with family {}: {}", model.arch.family(), e.what()));
  }
}

}  // namespace

std::optional<TrainOptions> parse_options(int argc, char** argv, bool print_help) {
  TrainOptions o;
  o.watchdog_timeout_s = Settings::from_environment().watchdog_s.value_or(300.0);
  RawFlags r;
  const std::vector<FlagGroup> groups = zs_train_flags(o, r);
  po::options_description all(
      "zs_train: train a decoder-only transformer (GPT-2 or Llama family, --family) with "
      "zeroshard under mpirun\n"
      "usage: mpirun -np N zs_train [options]");
  declare_flags(all, groups);
  po::variables_map vm;
  std::map<std::string, std::string> from_ds;  // flag -> DeepSpeed key path
  if (!read_flags(argc, argv, all, print_help, o, vm, from_ds)) return std::nullopt;
  // "--clip" or "--clip (gradient_clipping in ds.json)": where a bad value came from.
  const FlagName flag{from_ds, o.ds_config};

  resolve_flags(vm, flag, r, o);
  check_flags(groups, ParsedFlags{vm, flag, o, r});  // ranges, before any work
  configure_optimizer(vm, flag, r, o);
  check_dependent_flags(vm, flag, o);
  if (o.device != "cpu") o.collectives = "flat";  // NCCL's own algorithms
  o.memory_check = vm["memory-check"].as<std::string>() == "on";
  configure_loss_scaler(vm, flag, vm["dtype"].as<std::string>(), o.engine);
  const std::string mode = configure_log_mode(vm, o);
  if (!vm.count("data") && o.train_shards.empty()) o.data = default_data_path();
  o.model.validate();
  o.engine.validate(apps::engine_key_namer(flag));
  check_state_names(flag, o);
  if (o.device == "cuda") check_cuda_components(o.model);
  record_config(all, vm, mode, r, o);
  return o;
}

void check_paths(const TrainOptions& o, bool root) {
  for (const PathFlag& f : path_flags()) {
    const auto it = o.config.find(f.name);
    if (it == o.config.end() || !it->is_string() || (!f.every_rank && !root)) continue;
    // A resumed full fine-tune whose --init-from-hf is gone (hf_or_resumed_architecture).
    if (std::string_view(f.name) == "init-from-hf" && o.checkpoint.init_from_hf.empty()) continue;
    check_path(f.name, it->get<std::string>(), f.use);
  }
  // The files a directory export writes, in a directory that exists: a directory or device of
  // that name would fail the export after training.
  if (!root) return;
  struct DirFiles {
    const std::string& dir;
    const char* flag;
    const char* files[2];
  };
  const DirFiles exports[] = {
      {o.checkpoint.export_hf, "export-hf", {"model.safetensors", "config.json"}},
      {o.checkpoint.export_adapters,
       "export-adapters",
       {"adapter_model.safetensors", "adapter_config.json"}}};
  for (const DirFiles& e : exports) {
    std::error_code ec;
    if (e.dir.empty() || !std::filesystem::is_directory(e.dir, ec)) continue;
    for (const char* file : e.files)
      check_path(e.flag, (std::filesystem::path(e.dir) / file).string(), PathUse::kWriteFile);
  }
}

void resolve_world_size(TrainOptions& o, int world_size) {
  apps::resolve_world(world_size, o.global_micro_batches, o.gradient_accumulation_given, o.engine);
  if (const auto it = o.config.find("gradient-accumulation-steps"); it != o.config.end())
    *it = o.engine.micro_batches;
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
