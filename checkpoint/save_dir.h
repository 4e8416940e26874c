// Who may write a checkpoint directory (docs/checkpoints.md, "Run ownership"): a run claims its
// save directory before its first step, and every save checks the claim.
//
// * A run has an id: new_run_id() at a fresh start (rank 0 draws it, every rank gets it), the
//   resumed checkpoint's (Manifest::run_id) when it continues one. save_checkpoint stores it.
// * DIR/owner.json names the run the directory's checkpoints belong to. A fresh run is refused a
//   directory holding another run's checkpoints unless asked to overwrite them; a resumed run may
//   write only where its own checkpoints (or none) are.
// * DIR/writer.lock: rank 0 holds an exclusive flock(2) on it for as long as the claim lives, and
//   writes into it who holds it (pid, host, since when, run): a second job is refused, naming it.
// * The directory must be the same on every rank: rank 0 writes a probe file that every rank
//   must read back before anything else happens.
//
// Thread-safety: a SaveDir is used by one thread; the claim and its destruction are collective
// over the communicator it was claimed on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/communicator.h"

namespace zs {

inline constexpr const char* kOwnerFileName = "owner.json";
inline constexpr const char* kLockFileName = "writer.lock";

struct SaveDirOptions {
  // The checkpoint (a step-NNNNNNNN directory) this run continues, or empty for a fresh start.
  // A resumed run keeps its run id; a fresh one draws a new one.
  std::string resume_from;
  // A fresh run only: remove the checkpoints of another run the directory holds (and its
  // interrupted saves) instead of refusing.
  bool overwrite = false;
  // Appended to the refusal to say what the caller's user can do (e.g. "give --resume to
  // continue it, --overwrite to replace it, or another --save-dir").
  std::string choices;
};

// A claimed save directory. Holds the writer lock on rank 0 until destroyed (or the process
// ends). Movable; a default-constructed one claims nothing.
class SaveDir {
 public:
  SaveDir() = default;
  ~SaveDir();
  SaveDir(SaveDir&& o) noexcept;
  SaveDir& operator=(SaveDir&& o) noexcept;
  SaveDir(const SaveDir&) = delete;
  SaveDir& operator=(const SaveDir&) = delete;

  // Collective, before any work. In order: rank 0 creates `dir` and writes a probe file, every
  // rank must read it; rank 0 takes the writer lock, reads the owner, the checkpoints held and
  // (when resuming) the resumed checkpoint's run id, decides, removes another run's checkpoints
  // when told to overwrite, and writes owner.json. Throws zs::Error on every rank (the lowest
  // failing rank's, nothing claimed):
  //   kInvalidArgument  a rank does not see the probe ("the save directory must be shared by
  //                     every rank: rank r does not see ..."); another job holds the lock
  //                     (naming its pid, host, start and run); the directory holds another
  //                     run's checkpoints (naming the steps, the run and `choices`);
  //   kNotFound / kCorruptData  the resumed checkpoint's manifest is missing or bad;
  //   or an I/O error naming the path.
  static SaveDir claim(Communicator& comm, const std::string& dir, const SaveDirOptions& options);

  bool claimed() const { return !run_id_.empty(); }
  const std::string& dir() const { return dir_; }
  // The run's id, the same on every rank: pass it to save_checkpoint (CheckpointSaveOptions).
  const std::string& run_id() const { return run_id_; }
  // Rank 0: the steps of another run's checkpoints removed by `overwrite`, and whose they were.
  const std::vector<int64_t>& removed_steps() const { return removed_; }
  const std::string& removed_run() const { return removed_run_; }

 private:
  std::string dir_;
  std::string run_id_;
  std::vector<int64_t> removed_;
  std::string removed_run_;
  int lock_fd_ = -1;  // rank 0: the open, flock'ed writer.lock
};

// Collective: a new run id (16 hex digits from rank 0's random device), the same on every rank.
std::string new_run_id(Communicator& comm);

// Not collective: the run named by dir/owner.json, or nothing when the file is absent. Throws
// zs::Error(kCorruptData) for a file that is not an owner file.
std::optional<std::string> save_dir_owner(const std::string& dir);

// Not collective: the steps of the complete checkpoints (step-NNNNNNNN holding a manifest) in
// `dir`, ascending; none when it does not exist.
std::vector<int64_t> checkpoint_steps(const std::string& dir);

}  // namespace zs
