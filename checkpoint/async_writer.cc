#include "checkpoint/async_writer.h"

#include <chrono>
#include <exception>
#include <new>
#include <utility>

#include "checkpoint/checkpoint_io.h"

namespace zs::ckpt {

AsyncFileWriter::~AsyncFileWriter() {
  if (thread_.joinable()) thread_.join();
}

void AsyncFileWriter::start(std::string path, const std::byte* data, size_t bytes, int delay_ms) {
  ZS_ASSERT(!thread_.joinable());
  result_ = {};
  error_.clear();
  code_ = ErrorCode::kInternal;
  busy_.store(true, std::memory_order_release);
  thread_ = std::thread(&AsyncFileWriter::run, this, std::move(path), data, bytes, delay_ms);
}

// The thread's body: never throws (an escaping exception would end the process); the outcome is
// read by wait() after the join, which orders these writes before those reads.
void AsyncFileWriter::run(std::string path, const std::byte* data, size_t bytes, int delay_ms) {
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    OutFile out(path);
    out.write(data, bytes);
    out.finish();
    result_.size = out.size();
    result_.xxh3 = out.hash();
  } catch (const Error& e) {
    error_ = e.what();
    code_ = e.code();
  } catch (const std::bad_alloc&) {
    error_ = path + ": out of host memory";
    code_ = ErrorCode::kOutOfMemory;
  } catch (const std::exception& e) {
    error_ = path + ": " + e.what();
  }
  result_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  busy_.store(false, std::memory_order_release);
}

ShardWritten AsyncFileWriter::wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

}  // namespace zs::ckpt
