#include "option_table.h"

#include <cmath>

#include <fmt/format.h>

#include "apps/common/engine_options.h"
#include "apps/common/model_options.h"
#include "core/error.h"

namespace po = boost::program_options;

namespace zs::train {
namespace {

using Parsed = ParsedFlags;
constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;

bool finite_at_least(double v, double lo) { return std::isfinite(v) && v >= lo; }

// A check that `value` (float) lies in [0, 1), for the betas and the momentum.
std::function<void(const Parsed&)> unit_interval(const char* name, const float& value) {
  return [name, &value](const Parsed& p) {
    ZS_CHECK(value >= 0.0f && value < 1.0f, kBad, "{} {} is outside [0, 1)", p.flag(name), value);
  };
}

std::vector<Flag> run_flags(TrainOptions& o, RawFlags& r) {
  return {
      {"help,h", nullptr, "print this help and exit", {}},
      {"config",
       po::value(&r.config_file),
       "read options from FILE (lines `name = value`); command-line flags win",
       {}},
      {"deepspeed-config",
       po::value(&o.ds_config),
       "read a DeepSpeed ds_config.json (ZeRO stage, bf16/fp16 and loss scaling, micro-batch, "
       "accumulation, clipping, optimizer, scheduler; docs/running.md); a flag the file also sets "
       "must "
       "agree with it",
       {}},
      {"ds-config", po::value<std::string>(), "alias of --deepspeed-config", {}},
      {"steps", po::value(&o.steps)->default_value(o.steps), "optimizer steps",
       [](const Parsed& p) {
         ZS_CHECK(p.o.steps >= 1, kBad, "{} {} must be at least 1", p.flag("steps"), p.o.steps);
       }},
      {"seed",
       po::value(&o.engine.seed)->default_value(o.engine.seed),
       "seed for initialisation, data sampling and generation",
       {}},
      {"json-log",
       po::value(&o.json_log),
       "write JSON records here: a header (configuration, versions, machine), one per step, a "
       "final one (docs/running.md)",
       {}},
      {"json-log-mode",
       po::value<std::string>(),
       "when --json-log exists: new (refuse), append or overwrite; default: new, append when "
       "resuming",
       {}},
      {"log-every", po::value(&o.log_every)->default_value(1), "print every N steps",
       [](const Parsed& p) {
         ZS_CHECK(p.o.log_every >= 1, kBad, "{} must be >= 1", p.flag("log-every"));
       }},
      {"memory-check", po::value<std::string>()->default_value("on"),
       "on: before any work, refuse a run whose memory plan (zs_plan's) and text do not fit the "
       "memory this node and process have available; off: start anyway",
       [](const Parsed& p) {
         const std::string v = p.vm["memory-check"].as<std::string>();
         ZS_CHECK(v == "on" || v == "off", kBad, "--memory-check '{}' is not one of on, off", v);
       }},
      {"watchdog-timeout", po::value(&o.watchdog_timeout_s)->default_value(o.watchdog_timeout_s),
       "seconds a collective may wait before the watchdog ends a hung job, naming where each rank "
       "is (0: off; default ZS_WATCHDOG_S, else 300)",
       [](const Parsed& p) {
         const double t = p.o.watchdog_timeout_s;
         ZS_CHECK(std::isfinite(t) && t >= 0 && t <= 1e7, kBad,
                  "--watchdog-timeout {} is outside [0, 1e7] seconds", t);
       }},
  };
}

// One data source: bytes (--data) or token shards (token_shards.h).
std::vector<Flag> data_flags(TrainOptions& o) {
  return {
      {"data", po::value(&o.data),
       "training text: a file or a directory of files (byte-level tokens, vocabulary 256); "
       "default: the corpus shipped with zeroshard (../share/zeroshard/corpus.txt from the "
       "program)",
       [](const Parsed& p) {
         ZS_CHECK(!given(p.vm, "data") || p.o.train_shards.empty(), kBad,
                  "--data and --train-shards name two data sources: give one");
         if (p.o.train_shards.empty() && p.o.model.arch.vocab < 256) {
           // Name what the user gave: the vocabulary's source and the data's.
           const int v = p.o.model.arch.vocab;
           const std::string vocab =
               given(p.vm, "vocab") || p.o.checkpoint.init_from_hf.empty()
                   ? fmt::format("--vocab {}", v)
                   : fmt::format("--init-from-hf {}: config.json's vocab_size {}",
                                 p.o.checkpoint.init_from_hf, v);
           const std::string data = given(p.vm, "data")
                                        ? "byte data (--data)"
                                        : "byte data (the shipped corpus: no --data or "
                                          "--train-shards given)";
           fail(kBad,
                "{} is too small for {}: bytes need 256; give --train-shards of tokens "
                "below {}",
                vocab, data, v);
         }
       }},
      {"train-shards", po::value(&o.train_shards),
       "training tokens instead of --data: llm.c's token shards (uint16 or uint32), a file or a "
       "glob of files read in name order; every token must be below --vocab",
       [](const Parsed& p) {
         ZS_CHECK(p.o.train_shards.empty() || !given(p.vm, "sample-prompt"), kBad,
                  "--sample-prompt is text, and token shards have no tokenizer here: the sample "
                  "of a --train-shards run starts from the first validation token");
       }},
      {"val-shards", po::value(&o.val_shards),
       "validation tokens for --train-shards (a file or a glob); default: the last "
       "--val-fraction of the training tokens",
       [](const Parsed& p) {
         ZS_CHECK(p.o.val_shards.empty() || !p.o.train_shards.empty(), kBad,
                  "--val-shards needs --train-shards (byte data holds out --val-fraction)");
         ZS_CHECK(p.o.val_shards.empty() || !given(p.vm, "val-fraction"), kBad,
                  "--val-fraction and --val-shards both choose the validation set: give one");
       }},
  };
}

std::vector<Flag> eval_flags(TrainOptions& o) {
  return {
      {"eval-every", po::value(&o.eval_every)->default_value(o.eval_every),
       "validation loss every N steps (0: only at the end)",
       [](const Parsed& p) { ZS_CHECK(p.o.eval_every >= 0, kBad, "--eval-every must be >= 0"); }},
      {"eval-batches", po::value(&o.eval_batches)->default_value(o.eval_batches),
       "validation micro-batches per rank (with --world-invariant: over all ranks)",
       [](const Parsed& p) {
         ZS_CHECK(p.o.eval_batches >= 1 && p.o.eval_batches <= 100000, kBad,
                  "--eval-batches {} is outside 1..100000", p.o.eval_batches);
       }},
      {"val-fraction", po::value(&o.val_fraction)->default_value(o.val_fraction, "0.1"),
       "share of the text held out for validation",
       [](const Parsed& p) {
         ZS_CHECK(p.o.val_fraction > 0.0 && p.o.val_fraction < 0.5, kBad,
                  "--val-fraction {} must be in (0, 0.5)", p.o.val_fraction);
       }},
      {"sample-tokens", po::value(&o.sample_tokens)->default_value(o.sample_tokens),
       "bytes of text to generate at the end (0: none)",
       [](const Parsed& p) {
         ZS_CHECK(p.o.sample_tokens >= 0 && p.o.sample_tokens <= 1000000, kBad,
                  "--sample-tokens {} is outside 0..1000000", p.o.sample_tokens);
       }},
      {"sample-prompt", po::value(&o.sample_prompt)->default_value(o.sample_prompt),
       "prompt for the generated sample",
       [](const Parsed& p) {
         ZS_CHECK(p.o.sample_tokens == 0 || !p.o.sample_prompt.empty(), kBad,
                  "--sample-prompt is empty: the sample continues a prompt of at least one byte "
                  "(or give --sample-tokens 0 for no sample)");
       }},
  };
}

// After the engine flags zs_plan shares (apps/common/engine_options.h).
std::vector<Flag> engine_flags(TrainOptions& o) {
  return {
      {"peak-tflops",
       po::value(&o.peak_tflops)->default_value(0.0, "0"),
       "per-rank peak TFLOP/s for the MFU figure (0: known GPUs only)",
       {}},
  };
}

// Checked together by configure_loss_scaler() (options.cc): they apply to fp16 only.
std::vector<Flag> scaler_flags() {
  return {
      {"loss-scale",
       po::value<float>()->default_value(0.0f, "0"),
       "0: dynamic; > 0: this static scale",
       {}},
      {"initial-scale-power",
       po::value<int>()->default_value(16),
       "dynamic scaler starts at 2^N (0..127)",
       {}},
      {"loss-scale-window",
       po::value<int64_t>()->default_value(2000),
       "double the scale after this many overflow-free steps",
       {}},
      {"hysteresis",
       po::value<int>()->default_value(1),
       "halve the scale after this many overflows",
       {}},
      {"min-loss-scale",
       po::value<float>()->default_value(1.0f, "1"),
       "the dynamic scale never goes below this",
       {}},
  };
}

// After --optimizer and the state flags zs_plan shares (apps/common/engine_options.h).
std::vector<Flag> optimizer_flags(TrainOptions& o, RawFlags& r) {
  OptimizerConfig& opt = o.engine.optimizer;
  return {
      {"lr", po::value(&r.lr)->default_value(r.lr, "2e-3"), "peak learning rate",
       [](const Parsed& p) {
         ZS_CHECK(finite_at_least(p.raw.lr, 0.0), kBad, "{} {} must be a finite number >= 0",
                  p.flag("lr"), p.raw.lr);
       }},
      {"lr-schedule",
       po::value(&r.schedule)->default_value("cosine"),
       "cosine (decay to --min-lr-ratio x --lr at --steps) or constant, after the linear warm-up",
       {}},
      {"warmup", po::value(&r.warmup)->default_value(r.warmup),
       "linear warm-up steps (0..--steps; default 50, or --steps when the run is shorter)",
       [](const Parsed& p) {
         const int64_t w = p.raw.warmup, steps = p.o.steps;
         ZS_CHECK(w >= 0 && w <= steps, kBad,
                  "{} {} is outside 0..{} (it may not be longer than the run, --steps {})",
                  p.flag("warmup"), w, steps, steps);
       }},
      {"min-lr-ratio", po::value(&r.min_lr_ratio)->default_value(r.min_lr_ratio, "0.1"),
       "cosine decay floor as a fraction of --lr (0..1)",
       [](const Parsed& p) {
         const float m = p.raw.min_lr_ratio;
         ZS_CHECK(m >= 0.0f && m <= 1.0f, kBad, "{} {} is outside [0, 1]", p.flag("min-lr-ratio"),
                  m);
       }},
      {"weight-decay", po::value(&opt.adamw.weight_decay)->default_value(0.1f, "0.1"),
       "AdamW decoupled weight decay (2-D weights only)",
       [&wd = opt.adamw.weight_decay](const Parsed& p) {
         ZS_CHECK(finite_at_least(wd, 0.0), kBad, "{} {} must be a finite number >= 0",
                  p.flag("weight-decay"), wd);
       }},
      {"beta1", po::value(&opt.adamw.beta1)->default_value(0.9f, "0.9"), "Adam beta1, in [0, 1)",
       unit_interval("beta1", opt.adamw.beta1)},
      {"beta2", po::value(&opt.adamw.beta2)->default_value(0.95f, "0.95"), "Adam beta2, in [0, 1)",
       unit_interval("beta2", opt.adamw.beta2)},
      {"adam-eps", po::value(&opt.adamw.eps)->default_value(1e-8f, "1e-8"), "Adam epsilon (> 0)",
       [&eps = opt.adamw.eps](const Parsed& p) {
         ZS_CHECK(std::isfinite(eps) && eps > 0.0f, kBad, "{} {} must be a finite number > 0",
                  p.flag("adam-eps"), eps);
       }},
      {"momentum", po::value(&opt.sgd.momentum)->default_value(0.9f, "0.9"),
       "SGD momentum, in [0, 1)", unit_interval("momentum", opt.sgd.momentum)},
      {"clip", po::value(&o.engine.clip_norm)->default_value(1.0f, "1"),
       "clip the global gradient norm to this (0: off)",
       [&clip = o.engine.clip_norm](const Parsed& p) {
         ZS_CHECK(finite_at_least(clip, 0.0), kBad,
                  "{} {} must be a finite number >= 0 (0: no clipping)", p.flag("clip"), clip);
       }},
  };
}

// After the LoRA and frozen-base flags zs_plan shares (apps/common/engine_options.h).
std::vector<Flag> finetune_flags(TrainOptions& o) {
  return {
      {"export-adapters", po::value(&o.checkpoint.export_adapters),
       "at the end, write the adapters alone in Hugging Face PEFT's layout to this directory "
       "(adapter_model.safetensors in --export-dtype, adapter_config.json)",
       [](const Parsed& p) {
         // [Note: dependent flags] in apps/common/engine_options.h.
         ZS_CHECK(p.o.checkpoint.export_adapters.empty() || p.o.model.adapters.lora.rank > 0, kBad,
                  "--export-adapters writes LoRA adapters: give --lora-rank");
       }},
  };
}

}  // namespace

bool given(const po::variables_map& vm, const std::string& name) {
  return vm.count(name) && !vm[name].defaulted();
}

std::string FlagName::operator()(const std::string& name) const {
  auto it = from_ds.find(name);
  return it == from_ds.end() ? "--" + name : fmt::format("--{} ({} in {})", name, it->second, file);
}

std::vector<FlagGroup> zs_train_flags(TrainOptions& o, RawFlags& r) {
  std::vector<Flag> general = run_flags(o, r);
  for (Flag& f : eval_flags(o)) general.push_back(std::move(f));
  CheckpointFlags& ck = o.checkpoint;
  auto architecture = [](po::options_description& d) {
    apps::add_architecture_options(d, &apps::default_architecture(), true);
  };
  return {
      {"Run", {}, std::move(general)},
      {"Data", {}, data_flags(o)},
      {"Model (dimensions, then --family's components; a component flag overrides the family)",
       architecture,
       {}},
      {"Batch and compute", apps::add_batch_options, {}},
      {"Engine: sharding and precision", apps::add_engine_options, engine_flags(o)},
      {"Loss scaling (--dtype fp16 only; default: dynamic)", {}, scaler_flags()},
      {"Optimizer", apps::add_optimizer_state_options, optimizer_flags(o, r)},
      {"Checkpoints", [&ck](po::options_description& d) { add_checkpoint_flags(d, ck); }, {}},
      {"Hugging Face interop", [&ck](po::options_description& d) { add_hf_flags(d, ck); }, {}},
      {"Fine-tuning (LoRA, frozen base; docs/finetune.md)", apps::add_finetune_options,
       finetune_flags(o)},
  };
}

nn::GptArchitecture zs_train_architecture(const po::variables_map& vm) {
  return apps::architecture_from_options(vm, apps::default_architecture());
}

void declare_flags(po::options_description& all, const std::vector<FlagGroup>& groups) {
  for (const FlagGroup& g : groups) {
    po::options_description section(g.caption);
    if (g.declare) g.declare(section);
    for (const Flag& f : g.flags) {
      if (f.value == nullptr) {
        section.add_options()(f.name, f.help);
      } else {
        section.add_options()(f.name, f.value, f.help);
      }
    }
    all.add(section);
  }
}

void check_flags(const std::vector<FlagGroup>& groups, const ParsedFlags& parsed) {
  for (const FlagGroup& g : groups)
    for (const Flag& f : g.flags)
      if (f.check) f.check(parsed);
}

}  // namespace zs::train
