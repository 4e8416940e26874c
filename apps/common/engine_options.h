// The flags of a run that the trainer (zs_train) and zs_plan share, declared once with their help,
// defaults and checks, as model_options.h declares the architecture: the batch (--batch is the
// per-rank micro-batch in both), the engine (stage, dtypes, ZeRO++, offload, device), the
// optimizer-state storage and the fine-tuning adapters. Both programs read them into one RunFlags,
// so the same flags describe the same run; each adds its own flags beside them (zs_train: learning
// rate, data, checkpoints; zs_plan: --ranks, --model, --fit, --global-batch).
//
// [Note: dependent flags] A flag that refines another (a block size, a code book, a LoRA
// setting) is refused when given without the flag it refines, in one message naming both:
// "--zero-quantized-weights-block applies to --zero-quantized-weights, which is not given".
// Only a value the user gave is refused; defaults never are.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "models/gpt/gpt_adapters.h"
#include "models/gpt/gpt_config.h"
#include "runtime/engine_config.h"

namespace zs::apps {

// How a program names flag `name` in a message: "--batch", or zs_train's "--batch
// (train_micro_batch_size_per_gpu in ds.json)" for a value that came from a DeepSpeed file.
using FlagNamer = std::function<std::string(const std::string& name)>;
std::string plain_flag_name(const std::string& name);  // "--" + name

// The engine configuration's keys as flags (runtime/engine_config.h's KeyNamer): "stage" is
// --zero-stage, "micro_batches" --gradient-accumulation-steps, any other key its dashed form
// ("optimizer.state_block" is --optimizer-state-block), each named by `flag`. The rules are the
// engine's (EngineConfig::validate, validate_zeropp); the programs only say which flag broke one.
KeyNamer engine_key_namer(const FlagNamer& flag);

// --help's sections of the shared flags, each declared on `desc` with its default (a flag that
// was not given reads as its default; given() tells them apart).
void add_batch_options(boost::program_options::options_description& desc);
void add_engine_options(boost::program_options::options_description& desc);
// --optimizer and the --optimizer-state-* flags.
void add_optimizer_state_options(boost::program_options::options_description& desc);
// LoRA and the frozen base: --lora-rank, --lora-alpha, --lora-targets, --base-dtype, --int8-*.
void add_finetune_options(boost::program_options::options_description& desc);

// Second spellings of shared flags, canonical name -> alias: --batch (--micro-batch-size,
// DeepSpeed's train_micro_batch_size_per_gpu).
const std::map<std::string, std::string>& run_flag_aliases();

// True when flag `name` was given (on the command line or in a file), not only defaulted.
bool flag_given(const boost::program_options::variables_map& vm, const std::string& name);

// The shared flags' values, checked.
struct RunFlags {
  int batch = 16;                   // --batch: sequences per rank per micro-batch
  bool accumulation_given = false;  // --gradient-accumulation-steps was given
  int global_micro_batches = 0;     // --global-micro-batches; 0: not given
  bool checkpoint_activations = false;
  // --head-chunk: nn::GptRunSettings::head_chunk (auto -1, off 0, or rows).
  int64_t head_chunk = nn::kGptHeadChunkAuto;
  // --attention: nn::GptRunSettings::attention (fused | gemm).
  nn::GptAttention attention = nn::GptRunSettings{}.attention;
  int threads = 0;                           // --threads; 0: cores / ranks on the node
  std::string device = "cpu";                // cpu | cuda
  std::string collectives = "hierarchical";  // hierarchical | flat
  // Stage, precision, micro_batches (--gradient-accumulation-steps, per rank; see resolve_world),
  // prefetch, shard group, ZeRO++ switches and blocks, world-invariant, offload, optimizer kind
  // and state storage, the frozen base's storage and int8 compute. Not validate()d.
  EngineConfig engine;
  nn::GptAdapters adapters;  // LoRA rank, alpha, targets; int8 accept and threshold

  DeviceKind device_kind() const { return device == "cuda" ? DeviceKind::kCuda : DeviceKind::kCpu; }
};

// Reads and checks the shared flags in --help's order; the first bad one is named (by `flag`)
// with what is allowed, and a dependent flag given without the flag it depends on is refused
// ([Note: dependent flags]). RunFlags::engine is `engine` with the flags' fields set (the rest,
// e.g. zs_train's seed and learning rate, stays); the ranges the engine states (prefetch, shard
// group, accumulation steps, state block and threshold) are checked when the program validates
// the finished configuration through engine_key_namer(). Throws zs::Error(kInvalidArgument).
RunFlags run_flags_from(const boost::program_options::variables_map& vm, const FlagNamer& flag,
                        EngineConfig engine = {});

// What needs the world size: --global-micro-batches M (RunFlags::global_micro_batches) sets
// engine.micro_batches to M / world, refused unless it divides or when an explicit
// --gradient-accumulation-steps (accumulation_given) disagrees; --shard-group-size must divide
// the ranks. Throws zs::Error(kInvalidArgument).
void resolve_world(int world, int global_micro_batches, bool accumulation_given,
                   EngineConfig& engine);

}  // namespace zs::apps
