#include "options.h"

#include <fstream>
#include <iostream>

#include "core/error.h"
#include "dataset.h"

namespace po = boost::program_options;

namespace zs::train {

std::optional<TrainOptions> parse_options(int argc, char** argv, bool print_help) {
  TrainOptions o;
  std::string dtype = "bf16", grad_dtype = "fp32", optimizer = "adamw", config_file;
  int stage = 3;
  float lr = 2e-3f, min_lr_ratio = 0.1f;
  int64_t warmup = 50;
  bool checkpoint_activations = false, offload = false;

  po::options_description general("General");
  general.add_options()("help,h", "print this help and exit")(
      "config", po::value(&config_file),
      "read options from FILE (lines `name = value`); "
      "command-line flags win")(
      "data", po::value(&o.data),
      "training text: a file or a directory of files (byte-level tokens, vocabulary 256); "
      "default: the corpus shipped with zeroshard (../share/zeroshard/corpus.txt from the "
      "program)")("steps", po::value(&o.steps)->default_value(o.steps), "optimizer steps")(
      "seed", po::value(&o.engine.seed)->default_value(o.engine.seed),
      "seed for initialisation, data sampling and generation")(
      "json-log", po::value(&o.json_log), "write one JSON object per step (and a final one) here")(
      "log-every", po::value(&o.log_every)->default_value(1), "print every N steps")(
      "eval-every", po::value(&o.eval_every)->default_value(o.eval_every),
      "validation loss every N steps (0: only at the end)")(
      "eval-batches", po::value(&o.eval_batches)->default_value(o.eval_batches),
      "validation micro-batches per rank")(
      "val-fraction", po::value(&o.val_fraction)->default_value(o.val_fraction),
      "share of the text held out for validation")(
      "sample-tokens", po::value(&o.sample_tokens)->default_value(o.sample_tokens),
      "bytes of text to generate at the end (0: none)")(
      "sample-prompt", po::value(&o.sample_prompt)->default_value(o.sample_prompt),
      "prompt for the generated sample");

  po::options_description model("Model and batch");
  model.add_options()("layers", po::value(&o.model.layers)->default_value(4), "transformer blocks")(
      "heads", po::value(&o.model.heads)->default_value(4), "attention heads")(
      "width", po::value(&o.model.width)->default_value(128), "model width (divisible by heads)")(
      "context", po::value(&o.model.context)->default_value(128), "sequence length")(
      "batch", po::value(&o.model.batch)->default_value(16), "sequences per rank per micro-batch")(
      "micro-batches", po::value(&o.engine.micro_batches)->default_value(1),
      "gradient accumulation: micro-batches per optimizer step")(
      "checkpoint-activations", po::bool_switch(&checkpoint_activations),
      "recompute each block's forward in backward (less activation memory)")(
      "threads", po::value(&o.model.threads)->default_value(0),
      "compute threads per rank (0: cores / ranks on this node)");

  po::options_description engine("Sharding and precision");
  engine.add_options()("zero-stage", po::value(&stage)->default_value(3),
                       "ZeRO stage: 0, 1, 2 or 3")("dtype", po::value(&dtype)->default_value(dtype),
                                                   "compute dtype: fp32, bf16 or fp16")(
      "grad-dtype", po::value(&grad_dtype)->default_value(grad_dtype),
      "accumulated-gradient and reduction dtype: fp32 or the compute dtype")(
      "prefetch", po::value(&o.engine.prefetch)->default_value(1),
      "units gathered ahead of use in stage 3 (0: none)")(
      "offload-optimizer", po::bool_switch(&offload),
      "keep the fp32 master and Adam state in host memory and update them with the CPU Adam")(
      "device", po::value(&o.device)->default_value(o.device),
      "cpu, or cuda (one GPU per rank, NCCL; needs a CUDA build, docs/gpu.md)")(
      "peak-tflops", po::value(&o.peak_tflops)->default_value(0.0),
      "per-rank peak TFLOP/s for the MFU figure (0: known GPUs only)");

  po::options_description optim("Optimizer");
  optim.add_options()("optimizer", po::value(&optimizer)->default_value(optimizer), "adamw or sgd")(
      "lr", po::value(&lr)->default_value(lr), "peak learning rate")(
      "warmup", po::value(&warmup)->default_value(warmup), "linear warm-up steps")(
      "min-lr-ratio", po::value(&min_lr_ratio)->default_value(min_lr_ratio),
      "cosine decay floor as a fraction of --lr")(
      "weight-decay", po::value(&o.engine.optimizer.adamw.weight_decay)->default_value(0.1f),
      "decoupled weight decay (2-D weights only)")(
      "beta1", po::value(&o.engine.optimizer.adamw.beta1)->default_value(0.9f), "Adam beta1")(
      "beta2", po::value(&o.engine.optimizer.adamw.beta2)->default_value(0.95f), "Adam beta2")(
      "momentum", po::value(&o.engine.optimizer.sgd.momentum)->default_value(0.9f), "SGD momentum")(
      "clip", po::value(&o.engine.clip_norm)->default_value(1.0f),
      "clip the global gradient norm to this (0: off)");

  po::options_description ckpt("Checkpoints");
  add_checkpoint_flags(ckpt, o.checkpoint);
  po::options_description hf("Hugging Face interop");
  add_hf_flags(hf, o.checkpoint);

  po::options_description all(
      "train_gpt: train a byte-level GPT with zeroshard under mpirun\n"
      "usage: mpirun -np N train_gpt [options]");
  all.add(general).add(model).add(engine).add(optim).add(ckpt).add(hf);

  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      std::ifstream in(path);
      ZS_CHECK(in.good(), ErrorCode::kNotFound, "config file '{}' cannot be read", path);
      po::store(po::parse_config_file(in, all), vm);
    }
    if (vm.count("help")) {
      if (print_help) std::cout << all << "\n";
      return std::nullopt;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    fail(ErrorCode::kInvalidArgument, "{} (see --help)", e.what());
  }

  o.engine.stage = zero_stage_from_int(stage);
  o.engine.precision.param_dtype = parse_dtype(dtype);
  o.engine.precision.grad_dtype = parse_dtype(grad_dtype);
  o.engine.offload.optimizer = offload;
  o.model.compute_dtype = o.engine.precision.param_dtype;
  o.model.checkpoint_activations = checkpoint_activations;
  if (optimizer == "adamw") {
    o.engine.optimizer.kind = OptimizerKind::kAdamW;
  } else if (optimizer == "sgd") {
    o.engine.optimizer.kind = OptimizerKind::kSgd;
  } else {
    fail(ErrorCode::kInvalidArgument, "--optimizer '{}' is not one of adamw, sgd", optimizer);
  }
  o.engine.optimizer.schedule.lr = lr;
  o.engine.optimizer.schedule.warmup_steps = warmup;
  o.engine.optimizer.schedule.total_steps = o.steps;
  o.engine.optimizer.schedule.min_ratio = min_lr_ratio;
  ZS_CHECK(o.steps >= 1, ErrorCode::kInvalidArgument, "--steps {} must be at least 1", o.steps);
  ZS_CHECK(o.val_fraction > 0.0 && o.val_fraction < 0.5, ErrorCode::kInvalidArgument,
           "--val-fraction {} must be in (0, 0.5)", o.val_fraction);
  ZS_CHECK(o.eval_batches >= 1, ErrorCode::kInvalidArgument, "--eval-batches must be >= 1");
  ZS_CHECK(o.log_every >= 1, ErrorCode::kInvalidArgument, "--log-every must be >= 1");
  ZS_CHECK(o.sample_tokens >= 0, ErrorCode::kInvalidArgument, "--sample-tokens must be >= 0");
  if (!vm.count("data")) o.data = default_data_path();
  ZS_CHECK(!o.data.empty(), ErrorCode::kInvalidArgument,
           "--data is empty: name a file or directory");
  o.model.validate();
  o.engine.validate();
  return o;
}

}  // namespace zs::train
