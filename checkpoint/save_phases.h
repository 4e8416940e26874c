// The three phases of a checkpoint save, shared by save_checkpoint (one after the other) and the
// asynchronous saver (async_checkpoint.h: the shard write on a background thread, the commit
// later). Internal to the checkpoint module; not installed.
//
//   begin_save    collective, main thread: refuses non-finite parameters, checks the options and
//                 the directory's owner, creates DIR/.tmp-step-N (rank 0), describes the manifest
//   write         per rank, any thread, no communication: this rank's shard file (fsync'ed)
//   commit_save   collective, main thread: agrees that every write succeeded, gathers sizes and
//                 checksums, rank 0 writes the manifest, renames into DIR/step-N and prunes
//
// Thread-safety: begin_save and commit_save are collectives (one thread per communicator); the
// write touches only its own file and the bytes it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_format.h"

namespace zs::ckpt {

// One save between begin_save and commit_save. Holds no reference to the engine: the commit may
// run after the engine has taken more steps.
struct SaveJob {
  std::string root;       // DIR
  std::string tmp;        // DIR/.tmp-step-N
  std::string final_dir;  // DIR/step-N
  int keep = 0;
  Manifest manifest;  // everything but the files
  // The unit ranges of each writing rank's file (rank r < writers), as in its header.
  std::vector<std::vector<UnitRange>> writer_ranges;
  bool writes = false;                           // this rank writes a shard file
  std::string shard_path;                        // its path (when writes)
  ShardHeader header;                            // its header (when writes)
  int64_t state_piece_numel = kStatePieceNumel;  // CheckpointSaveOptions::state_piece_numel
};

// Collective (the phase above). Throws zs::Error on every rank alike.
SaveJob begin_save(Engine& engine, Communicator& comm, const std::string& dir,
                   const CheckpointSaveOptions& options);

// Main thread: lays out this rank's shard file (job.header.file_bytes() bytes, job.writes) at
// `dst`, byte for byte what a synchronous save streams to the file from the engine.
void copy_shard_image(Engine& engine, const SaveJob& job, std::byte* dst);

// What a rank's write produced: its manifest entry's size and checksum, and how long it took.
struct ShardWritten {
  int64_t size = 0;
  uint64_t xxh3 = 0;
  double seconds = 0.0;
};

// Collective. `error`: this rank's write failed with this message (empty: it succeeded, or this
// rank writes nothing); every rank then throws the lowest failing rank's. `code`: its code.
// Returns DIR/step-N and, in `max_write_s`, the longest write over the ranks.
std::string commit_save(Communicator& comm, SaveJob& job, const ShardWritten& mine,
                        const std::string& error, ErrorCode code, double* max_write_s = nullptr);

}  // namespace zs::ckpt
