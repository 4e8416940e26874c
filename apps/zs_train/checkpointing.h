// zs_train's checkpoint flags and the calls that save, resume and export. Implemented over the
// library's checkpoint module (checkpoint/checkpoint.h), its safetensors export/import
// (checkpoint/safetensors.h) and the GPT's Hugging Face mapping (interop/gpt_hf.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "checkpoint/async_checkpoint.h"
#include "checkpoint/memory_tier.h"
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
  bool save_async = false;            // --save-async: snapshot, then write in the background
  int64_t save_memory_every = 0;      // --save-memory-every N: a memory-tier checkpoint every N
  std::string memory_dir;             // --memory-dir DIR (default /dev/shm/zeroshard-<run id>)
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
// With --save-memory-every, --resume takes the newest complete checkpoint over both tiers (a
// memory one only when its manifest names the save directory's run), and `memory` is the claimed
// memory tier afterwards (inactive, with rank 0's warning, when it cannot be used: the run goes on
// with disk checkpoints). Errors are thrown on every rank alike. Collective.
SaveDir start_run(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                  const nn::GptConfig& model, const std::string& model_json, TrainerState& state,
                  MemoryTier& memory);
// One committed save, for rank 0's line and the run log's "save" record.
struct SaveRecord {
  int64_t step = 0;
  std::string path;
  bool async = false;
  // The time the training was blocked by this save: a synchronous save's whole write; with
  // --save-async the wait for the previous write (and its commit) plus the snapshot, plus its own
  // commit when a step's poll made it (commit_s; a commit at the next save is in that save's
  // wait, one at the end in final_wait_s).
  double stall_s = 0.0;
  double snapshot_s = 0.0;    // --save-async: the copy into the snapshot
  double waited_s = 0.0;      // --save-async: the wait before it (0 when the previous had ended)
  double write_s = 0.0;       // the files' write and fsync (in the background with --save-async)
  double commit_s = 0.0;      // --save-async: the commit when made after a step (see stall_s)
  double final_wait_s = 0.0;  // --save-async: the end of the run's wait for this write
  double bytes = 0.0;         // rank 0: the checkpoint's files on disk
  bool memory = false;        // a memory-tier checkpoint (--save-memory-every)
};
nlohmann::ordered_json save_record_json(const SaveRecord& r);

// With --save-async: the saver, its snapshot allocated now for the engine (counted by the memory
// check: memory_check.h); nothing otherwise. Not collective.
std::unique_ptr<AsyncCheckpointSaver> make_async_saver(Engine& engine, Communicator& comm,
                                                       const CheckpointFlags& flags);

// After each step: saves when due (every save_every steps, and after the last step), through
// `async` when given (--save-async: the save returns after its snapshot; the previous background
// write is waited for and committed first, and rank 0 says how long it waited). The first complete
// save removes what --overwrite set aside (`dir`, start_run's claim). Returns the saves committed
// by this call, after rank 0 printed their lines. Collective.
std::vector<SaveRecord> save_if_due(Engine& engine, Communicator& comm,
                                    const CheckpointFlags& flags, const std::string& model_json,
                                    const TrainerState& state, SaveDir& dir, bool last_step,
                                    AsyncCheckpointSaver* async);
// --save-memory-every, after each step: a checkpoint into the memory tier when due (not at a step
// that saves to disk, nor at the last). A failed save (a full /dev/shm) is not fatal: rank 0 warns,
// the tier is removed and the run goes on with disk checkpoints. Collective.
std::vector<SaveRecord> save_memory_if_due(Engine& engine, Communicator& comm,
                                           const CheckpointFlags& flags,
                                           const std::string& model_json, const TrainerState& state,
                                           MemoryTier& memory, bool last_step);
// --save-async, after each step (wait = false: one all-reduce of one value while a write is in
// flight, nothing otherwise) and at the end of the run (wait = true): commits the background
// write when every rank's has ended. A failed write is thrown on every rank. Collective.
std::vector<SaveRecord> commit_saves(Communicator& comm, const CheckpointFlags& flags, SaveDir& dir,
                                     AsyncCheckpointSaver* async, bool wait);
// At the end: writes the consolidated model (safetensors file, HF directory) when asked.
// Collective.
void export_if_asked(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                     const nn::GptConfig& model);

}  // namespace zs::train
