// A background thread that writes one buffer to one file (checkpoint_io.h's OutFile: checksummed
// as it goes, fsync'ed, closed) and records the outcome. It does no communication: the program's
// MPI library is initialised for one calling thread (MPI_THREAD_FUNNELED), so everything
// collective stays on the main thread (async_checkpoint.h). Internal to the checkpoint module.
//
// Thread-safety: start(), wait() and the destructor from one thread (the owner); done() from the
// owner at any time.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

#include "checkpoint/save_phases.h"
#include "core/error.h"

namespace zs::ckpt {

class AsyncFileWriter {
 public:
  AsyncFileWriter() = default;
  // Waits for a write in flight (its outcome is dropped).
  ~AsyncFileWriter();
  AsyncFileWriter(const AsyncFileWriter&) = delete;
  AsyncFileWriter& operator=(const AsyncFileWriter&) = delete;

  // Starts writing data[0, bytes) to `path` (created or truncated). The buffer must stay unchanged
  // until wait() returns. `delay_ms` > 0 (tests only) sleeps that long before the file is opened,
  // so that a test can kill the job or break the directory while the write is in flight. Requires
  // no write in flight.
  void start(std::string path, const std::byte* data, size_t bytes, int delay_ms = 0);
  // Whether the write started last has ended (successfully or not); true when none was started.
  bool done() const { return !busy_.load(std::memory_order_acquire); }
  // Waits for the write to end (joins the thread). Its size, checksum and duration; error() says
  // whether it failed. Returns a default ShardWritten when none was started.
  ShardWritten wait();
  // After wait(): the failure's message (naming the file) and code; empty when it succeeded.
  const std::string& error() const { return error_; }
  ErrorCode error_code() const { return code_; }

 private:
  void run(std::string path, const std::byte* data, size_t bytes, int delay_ms);

  std::thread thread_;
  std::atomic<bool> busy_{false};
  ShardWritten result_;
  std::string error_;
  ErrorCode code_ = ErrorCode::kInternal;
};

}  // namespace zs::ckpt
