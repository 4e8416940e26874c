// In-memory checkpoints (docs/checkpoints.md, "Checkpoint tiers"; docs/reliability.md): complete
// checkpoints of the same format, manifest, checksums and atomic protocol as disk ones, saved into
// a RAM-backed directory (default /dev/shm/zeroshard-<run id>) that outlives the job's processes
// but not the machine.
//
// * A run claims its memory directory as it claims its save directory (save_dir.h): every rank
//   must see it (one node, or a RAM file system every rank mounts), rank 0 holds writer.lock, and
//   owner.json names the run. What another run left there is removed at the claim, never loaded.
// * Only the newest checkpoint is kept: a save prunes the previous one once the new one is
//   complete, so the tier holds at most two checkpoints' bytes, and one between saves.
// * A resume takes the newest complete checkpoint over both tiers; a memory checkpoint counts
//   only when its manifest (checksummed) names the run (newest_memory_checkpoint).
//
// Thread-safety: a MemoryTier is used by one thread; open and save are collective over the
// communicator given, everything else is not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "collectives/communicator.h"
#include "runtime/engine.h"

namespace zs {

// "/dev/shm/zeroshard-<run_id>".
std::string default_memory_dir(const std::string& run_id);

// What a memory directory offers a resume of run `run_id`.
struct MemoryCheckpoint {
  std::string path;   // its newest complete checkpoint written by the run; empty when none
  int64_t step = -1;  // that checkpoint's step
  // One entry per complete checkpoint found there but not used: "step-00000008 (run R)".
  std::vector<std::string> ignored;
};

// Not collective: reads the manifests (checked) of the complete checkpoints in `dir`. A missing
// directory, or an unreadable manifest, offers nothing (the unreadable one is listed as ignored).
MemoryCheckpoint newest_memory_checkpoint(const std::string& dir, const std::string& run_id);

// A claimed memory directory. Move-only; a default-constructed one is inactive.
class MemoryTier {
 public:
  MemoryTier() = default;
  ~MemoryTier();  // releases the lock; the directory stays (a relaunch resumes from it)
  MemoryTier(MemoryTier&& o) noexcept;
  MemoryTier& operator=(MemoryTier&& o) noexcept;
  MemoryTier(const MemoryTier&) = delete;
  MemoryTier& operator=(const MemoryTier&) = delete;

  // Collective, before the first save. Rank 0 creates `dir` (mode 0700) and a probe every rank
  // must read, takes dir/writer.lock, removes another run's checkpoints and interrupted saves and
  // this run's checkpoints but `keep` (the one resumed from, when it is in `dir`), and writes
  // owner.json. Throws zs::Error on every rank alike (the lowest failing rank's): a rank that
  // does not see the directory, a lock held by another job, an I/O error naming the path.
  static MemoryTier open(Communicator& comm, const std::string& dir, const std::string& run_id,
                         const std::string& keep);

  bool active() const { return active_; }
  const std::string& dir() const { return dir_; }
  // Rank 0: what open removed, as one sentence for the user; empty when nothing.
  const std::string& note() const { return note_; }

  // Collective: save_checkpoint into dir() with keep = 1 and this tier's run id; returns its
  // path. Errors as save_checkpoint's, thrown on every rank alike; the tier is left as it was.
  std::string save(Engine& engine, Communicator& comm, CheckpointSaveOptions options);

  // Not collective: rank 0 removes the directory; every rank makes the tier inactive. For the
  // normal end of a run, and for a tier turned off after a failed save. Never throws.
  void remove() noexcept;

 private:
  bool active_ = false;
  std::string dir_;
  std::string run_id_;
  std::string note_;
  int lock_fd_ = -1;  // rank 0: the open, flock'ed writer.lock
};

}  // namespace zs
