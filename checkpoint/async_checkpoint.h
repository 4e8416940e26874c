// Asynchronous checkpoints: a save copies this rank's part of the checkpoint into a host snapshot
// and returns; a background thread writes it with save_checkpoint's atomic protocol, and a later
// collective call commits it (manifest, rename into DIR/step-N, pruning). The files are byte for
// byte those save_checkpoint writes at the same step. docs/checkpoints.md, "Asynchronous saves".
//
// * At most one write in flight: save() waits for and commits the previous one first.
// * The background thread only writes and fsyncs its file: every collective (the checks and the
//   manifest before, the agreement and the rename after) runs on the calling thread.
// * A failed background write is thrown by the commit on every rank alike (zs::Error, the lowest
//   failing rank's message). A job killed before the commit leaves DIR/.tmp-step-N, which no load
//   reads; the previous complete checkpoint stays the latest.
//
// Thread-safety: one thread (the one that makes the engine's collectives); every call below is
// collective over `comm` unless noted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "collectives/communicator.h"
#include "runtime/engine.h"

namespace zs {

struct AsyncSaveOptions {
  // Tests only: the background write sleeps this long before it opens its file.
  int test_delay_ms = 0;
};

// One committed save and what it cost.
struct AsyncSaveResult {
  std::string path;  // DIR/step-N
  int64_t step = 0;
  double snapshot_s = 0.0;     // the copy into the snapshot (this rank's)
  double waited_s = 0.0;       // the wait for the previous write and its commit, before the copy
  bool found_writing = false;  // this rank's previous write was still running at the save
  double write_s = 0.0;        // the background write and fsync, the longest over the ranks
  double commit_s = 0.0;       // the commit (agreement, manifest, rename, pruning), on this rank
};

class AsyncCheckpointSaver {
 public:
  explicit AsyncCheckpointSaver(AsyncSaveOptions options = {});
  // Waits for a write in flight without committing it (an error path: the files stay in the
  // temporary directory). Not collective.
  ~AsyncCheckpointSaver();
  AsyncCheckpointSaver(const AsyncCheckpointSaver&) = delete;
  AsyncCheckpointSaver& operator=(const AsyncCheckpointSaver&) = delete;

  // Not collective: the snapshot's bytes on this rank for `engine` (its shard file: header and
  // fp32 master and optimizer states; 0 on a rank that writes no file).
  static int64_t snapshot_bytes(Engine& engine, int rank);
  // Not collective: allocates (and touches) the snapshot once, so that no save pays for it. save()
  // does it when it was not done.
  void reserve(Engine& engine, int rank);

  // Commits the write in flight (waiting for it: `previous` gets it), then snapshots the engine's
  // state at steps_taken() as save_checkpoint(engine, comm, dir, options) would save it and starts
  // the background write. Returns when the snapshot is taken, with the figures of the save started
  // (its path is set at its commit). Errors as save_checkpoint's, and the previous write's.
  AsyncSaveResult save(Engine& engine, Communicator& comm, const std::string& dir,
                       const CheckpointSaveOptions& options,
                       std::optional<AsyncSaveResult>& previous);
  // Whether a save is started and not committed (the same on every rank). Not collective.
  bool pending() const;
  // Not collective: whether this rank's write has ended.
  bool written() const;
  // With a save pending: one all-reduce of one value says whether every rank's write has ended;
  // if so, commits it and returns it. Nothing pending: returns nothing without communicating.
  std::optional<AsyncSaveResult> poll(Communicator& comm);
  // Waits for the write in flight and commits it; nothing when none is pending.
  std::optional<AsyncSaveResult> finish(Communicator& comm);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zs
