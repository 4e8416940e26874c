// Sharded checkpoints of an Engine: save, load at any world size and stage, find the latest.
// Formats and guarantees: docs/checkpoints.md; the on-disk structures: checkpoint_format.h.
//
// * Save: every rank writes its own fp32 master and optimizer shards (stage 0: rank 0 writes the
//   full state), then rank 0 writes manifest.json and renames the temporary directory to
//   DIR/step-NNNNNNNN. A checkpoint directory exists complete or not at all.
// * Load: any world size and stage. Each rank reads the ranges its shard needs (parameter offsets
//   in a group do not depend on the world size, so resharding is a range copy) and each file's
//   checksum is verified by one rank. Everything is read and checked before one collective
//   agreement; only then is engine state touched, so an error leaves every rank unchanged.
// * Errors: zs::Error(kNotFound | kCorruptData | kInvalidArgument) naming the file and the
//   problem, thrown on every rank.
//
// The engine's fp32 master and optimizer shards must be in host memory (CPU builds and optimizer
// offload). Every call here is collective over `comm` (the engine's communicator) unless noted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "collectives/communicator.h"
#include "runtime/engine.h"

namespace zs {

struct CheckpointSaveOptions {
  int keep = 0;  // keep the newest `keep` complete checkpoints in the directory; 0 keeps all
  // Opaque JSON object stored in the manifest (data position, RNG state, ...).
  std::string trainer_state = "{}";
  // Opaque JSON describing the model (e.g. its hyper-parameters); checked on load when asked.
  std::string model_description = "{}";
  // When non-empty: the run saving (SaveDir::run_id(), save_dir.h). It is stored in the manifest,
  // and the save is refused unless dir/owner.json names this run, before anything is written.
  std::string run_id;
  // Where the engine's frozen base came from (e.g. "--init-safetensors base.st"), stored for the
  // message of a load that finds another base. Optional.
  std::string frozen_base_source;
  // The most elements of a unit's state decoded (or copied off a device) at a time
  // (Engine::shard_pieces): with bf16 or int8 moments a save holds one piece's fp32 copies, 8
  // bytes per element.
  int64_t state_piece_numel = kStatePieceNumel;
};

struct CheckpointLoadOptions {
  // When non-empty: the manifest's model description must equal this JSON (semantically).
  // Checked before anything else; a difference names the first differing key and both values.
  std::string expect_model_description;
  // Where the engine's frozen base came from, for the message when it is not the checkpoint's.
  std::string frozen_base_source;
  // As CheckpointSaveOptions::state_piece_numel, for what a load decodes and re-encodes.
  int64_t state_piece_numel = kStatePieceNumel;
};

struct CheckpointInfo {
  std::string path;
  int64_t step = 0;
  int world_size = 0;  // as written
  int stage = 0;
  std::string trainer_state;  // JSON text of the object given at save
  std::string model_description;
  std::string run_id;  // the run that wrote it; empty for checkpoints without one
};

// Saves the engine's state at steps_taken() into dir/step-NNNNNNNN (dir is created when missing;
// a checkpoint of the same step is replaced). Returns its path. Stale temporary directories of
// interrupted saves and checkpoints beyond `keep` are removed by rank 0. The directory must be
// shared by every rank; a run that claimed it (save_dir.h) passes its run id.
std::string save_checkpoint(Engine& engine, Communicator& comm, const std::string& dir,
                            const CheckpointSaveOptions& options = {});

// Loads the checkpoint directory `path` (a step-NNNNNNNN directory) into the engine: fp32 master,
// optimizer state, step, loss scaler; then refreshes the compute-dtype parameters. The model's
// units, parameter names and shapes and the optimizer kind must match the manifest, and an engine
// with frozen parameters must hold the base the checkpoint was trained on (load it first); world
// size, stage, precision and align may differ. Every value read must be finite (exp_avg_sq also
// >= 0): zs::Error(kNonFinite) names the file, unit, parameter and element otherwise.
// A manifest, compatibility or checksum error (a truncated or altered file) is found before
// anything is changed and leaves the engine as it was. The state is then loaded a unit at a time,
// 64 MiB per read, each read checked before it is copied into the state ([Note: load phases] in
// checkpoint.cc), so an error found later (a read error, or a value refused under a valid
// checksum: a file written by another program) leaves the state unspecified (load again, or
// discard the engine). Every rank fails alike.
CheckpointInfo load_checkpoint(Engine& engine, Communicator& comm, const std::string& path,
                               const CheckpointLoadOptions& options = {});

// Reads and checks only the manifest of a checkpoint directory. Not collective.
CheckpointInfo read_checkpoint_info(const std::string& path);

// The complete checkpoint (a step-NNNNNNNN directory holding manifest.json) with the highest
// step in `dir`, or nothing. Temporary directories are ignored. Not collective: ranks sharing the
// directory get the same answer unless a save runs concurrently.
std::optional<std::string> latest_checkpoint(const std::string& dir);

}  // namespace zs
