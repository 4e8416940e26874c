// zs_train's checkpoint flags and the calls that save, resume and export. Implemented over the
// library's checkpoint module (checkpoint/checkpoint.h), its safetensors export/import
// (checkpoint/safetensors.h) and the GPT's Hugging Face mapping (interop/gpt_hf.h).
#pragma once

#include <cstdint>
#include <string>

#include <boost/program_options.hpp>

#include "checkpoint/save_dir.h"
#include "collectives/communicator.h"
#include "models/gpt/gpt_config.h"
#include "runtime/engine.h"

namespace zs::train {

// What the trainer itself must restore to continue bitwise (besides the engine's state).
struct TrainerState {
  int64_t step = 0;         // optimizer steps done
  int64_t data_cursor = 0;  // position of the distributed sampler
  uint64_t rng = 0;         // the trainer's RNG state (sampling, generation)
  // World-invariant mode's micro-batches per step over all ranks (--global-micro-batches); 0
  // outside the mode. Stored so that a resume with another M, whose bits would differ from the
  // uninterrupted run's, is refused.
  int64_t invariant_micro_batches = 0;
  // The run's id (checkpoint/save_dir.h): drawn at a fresh start, the checkpoint's when resumed;
  // empty without --save-dir. Kept in each checkpoint's manifest, not in the trainer state.
  std::string run_id;
};

struct CheckpointFlags {
  std::string save_dir;               // --save-dir DIR
  bool overwrite = false;             // --overwrite: replace another run's checkpoints in DIR
  int64_t save_every = 0;             // --save-every N (0: only at the end when --save-dir is set)
  int keep = 3;                       // --keep K
  bool resume = false;                // --resume: the latest complete checkpoint in --save-dir
  std::string resume_from;            // --resume-from PATH
  std::string export_safetensors;     // --export-safetensors FILE
  std::string export_dtype = "fp32";  // --export-dtype fp32|bf16
  std::string init_from;              // --init-safetensors FILE: initial weights
  std::string export_hf;              // --export-hf DIR: a GPT2LMHeadModel directory at the end
  std::string export_shard_size = "5GB";  // --export-shard-size SIZE: --export-hf's largest file
  std::string init_from_hf;     // --init-from-hf DIR: initial weights from such a directory
  std::string export_adapters;  // --export-adapters DIR: LoRA adapters in PEFT's layout
};

void add_checkpoint_flags(boost::program_options::options_description& desc,
                          CheckpointFlags& flags);
// The Hugging Face group: --export-hf, --init-from-hf (docs/interop.md).
void add_hf_flags(boost::program_options::options_description& desc, CheckpointFlags& flags);

// After the engine is built, before the first step, in this order: claims --save-dir for this
// run (shared by every rank, not written by another job, not holding another run's checkpoints
// unless --overwrite, which sets them aside until the first save: checkpoint/save_dir.h) and
// picks the checkpoint to resume (--resume-from, or --resume's latest in --save-dir); loads the
// initial weights (--init-safetensors,
// --init-from-hf) unless a checkpoint is resumed into an engine without frozen parameters; loads
// the checkpoint, whose adapters are checked against (and continue on) the frozen base just
// loaded. `model` is the engine's model's config (checked against an HF config.json);
// `model_json` describes the model and is stored in / checked against the manifest. Returns the
// claim, whose writer lock is held until it is destroyed (nothing claimed without --save-dir).
// Errors are thrown on every rank alike. Collective.
SaveDir start_run(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                  const nn::GptConfig& model, const std::string& model_json, TrainerState& state);
// After each step: saves when due (every save_every steps, and after the last step); the first
// complete save removes what --overwrite set aside (`dir`, start_run's claim). Collective.
void save_if_due(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                 const std::string& model_json, const TrainerState& state, SaveDir& dir,
                 bool last_step);
// At the end: writes the consolidated model (safetensors file, HF directory) when asked.
// Collective.
void export_if_asked(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                     const nn::GptConfig& model);

}  // namespace zs::train
