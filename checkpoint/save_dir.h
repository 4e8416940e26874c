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
// * Overwriting keeps what it replaces until the new run is safe: another run's checkpoints (and
//   its owner file) are moved into DIR/.replaced-RUN at the claim, removed by finish_replacing()
//   once the new run's first checkpoint is complete, and moved back when the claim ends without
//   one (an error before the first save). A job killed in between leaves .replaced-RUN behind;
//   the next claim of DIR puts it back (no complete checkpoint of the new run) or removes it (one
//   exists), and says which in note().
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
  // Instead of resume_from: the latest complete checkpoint in the directory, chosen after a
  // killed job's hand-over is settled (none: a fresh start).
  bool resume_latest = false;
  // A fresh run only: replace the checkpoints of another run the directory holds (and its
  // interrupted saves) instead of refusing; they are set aside until finish_replacing().
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
  //   kNotFound / kCorruptData  the resumed checkpoint's manifest is missing or bad; owner.json
  //                     is not an owner file (naming how to recover; with `overwrite` it is set
  //                     aside with the checkpoints instead);
  //   or an I/O error naming the path.
  static SaveDir claim(Communicator& comm, const std::string& dir, const SaveDirOptions& options);

  bool claimed() const { return !run_id_.empty(); }
  const std::string& dir() const { return dir_; }
  // The checkpoint this run continues (SaveDirOptions' resume_from, or the latest one found with
  // resume_latest), the same on every rank; empty for a fresh start.
  const std::string& resume_from() const { return resume_from_; }
  // The run's id, the same on every rank: pass it to save_checkpoint (CheckpointSaveOptions).
  const std::string& run_id() const { return run_id_; }
  // Rank 0: the steps of another run's checkpoints set aside by `overwrite`, whose they were
  // ("of unknown id" without an owner), and where they wait (DIR/.replaced-RUN) until
  // finish_replacing(); empty when nothing was replaced.
  const std::vector<int64_t>& replaced_steps() const { return replaced_; }
  const std::string& replaced_run() const { return replaced_run_; }
  const std::string& replaced_dir() const { return aside_; }
  // Rank 0: what the claim did with a hand-over a killed job left behind, as one sentence for
  // the user; empty when there was none.
  const std::string& note() const { return note_; }

  // After this run's first complete checkpoint: removes the checkpoints `overwrite` set aside.
  // Returns true on rank 0 when it removed them (false: nothing was pending, or not rank 0).
  // Not collective. Throws zs::Error on an I/O error naming the path.
  bool finish_replacing();

 private:
  void restore_replaced() noexcept;  // rank 0: puts back what was set aside (no save made)
  void release() noexcept;           // restores a pending replacement, releases the lock

  std::string dir_;
  std::string run_id_;
  std::vector<int64_t> replaced_;
  std::string replaced_run_;
  std::string aside_;  // rank 0: DIR/.replaced-RUN while a replacement is pending, else ""
  std::string resume_from_;
  std::string note_;
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
