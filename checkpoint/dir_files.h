// The small files by which a job claims a checkpoint directory, shared by the save directory
// (save_dir.h) and the memory tier (memory_tier.h): a probe every rank must read back, the
// flock'ed writer.lock naming its holder, owner.json written atomically. Internal to the
// checkpoint module; not installed.
//
// Thread-safety: free functions over files; no shared state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace zs::ckpt {

inline constexpr int64_t kMaxSmallFile = 1 << 16;

// 16 hex digits from the random device, the clock and the pid.
std::string random_hex64();
std::string host_name();
// "2026-11-30T04:50:00Z".
std::string now_utc();
// Writes `text` to dir/name through a temporary file, a rename and a directory fsync.
void write_small_file(const std::filesystem::path& dir, const std::string& name,
                      const std::string& text);
// Rank 0: creates `dir` and a probe file in it; returns the probe's nonce.
std::string write_probe(const std::filesystem::path& dir);
// Every other rank: reads the probe back (retrying for 2 s); zs::Error(kInvalidArgument) "DIR:
// <what> must be shared by every rank: rank r (host h) does not see ..." otherwise.
void read_probe(const std::filesystem::path& dir, const std::string& nonce, int rank,
                const char* what);
// Rank 0: an open fd holding an exclusive flock on dir/writer.lock, or zs::Error naming the job
// that holds it.
int take_lock(const std::filesystem::path& dir);
// Rank 0, lock held: writes "pid P on host H since T, run R" into the lock file.
void describe_lock(int fd, const std::filesystem::path& dir, const std::string& run_id);

}  // namespace zs::ckpt
