#include "checkpoint/memory_tier.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/dir_files.h"
#include "checkpoint/save_dir.h"
#include "collectives/fail_together.h"
#include "core/error.h"

namespace zs {
namespace fs = std::filesystem;

namespace {

// The save directory's owner format (save_dir.h): save_checkpoint checks the owner with it before
// each save, in this tier as in the save directory.
constexpr const char* kOwnerFormat = "zeroshard-save-dir";

// The run owner.json names, or "" (absent or unreadable: treated as another run's).
std::string owner_of(const fs::path& dir) {
  try {
    return save_dir_owner(dir.string()).value_or("");
  } catch (const Error&) {
    return "";
  }
}

// Rank 0, lock held: removes checkpoints, interrupted saves and probes that are not `keep`'s.
// Returns the steps removed per run, for the note.
std::string clear(const fs::path& dir, const std::string& run_id, const std::string& keep) {
  const std::string owner = owner_of(dir);
  std::vector<int64_t> mine, others;
  std::error_code ec;
  std::vector<fs::path> doomed;
  for (const fs::directory_entry& d : fs::directory_iterator(dir, ec)) {
    const std::string name = d.path().filename().string();
    const int64_t step = ckpt::parse_step_dir_name(name);
    std::error_code ec2;
    if (step >= 0 && !keep.empty() && fs::equivalent(d.path(), fs::path(keep), ec2)) continue;
    if (step >= 0) (owner == run_id ? mine : others).push_back(step);
    if (step >= 0 || name.rfind(".tmp-step-", 0) == 0 || name.rfind(".probe-", 0) == 0)
      doomed.push_back(d.path());
  }
  for (const fs::path& p : doomed) {
    fs::remove_all(p, ec);
    ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot remove: {}", p.string(), ec.message());
  }
  std::sort(mine.begin(), mine.end());
  std::sort(others.begin(), others.end());
  std::string note;
  if (!others.empty())
    note = fmt::format("removed the memory checkpoints of {} (step{} {}): not this run's",
                       owner.empty() ? std::string("an unknown run") : "run " + owner,
                       others.size() == 1 ? "" : "s", fmt::join(others, ", "));
  if (!mine.empty())
    note += fmt::format("{}removed this run's memory checkpoint{} of step{} {}: superseded",
                        note.empty() ? "" : "; ", mine.size() == 1 ? "" : "s",
                        mine.size() == 1 ? "" : "s", fmt::join(mine, ", "));
  return note;
}

}  // namespace

std::string default_memory_dir(const std::string& run_id) { return "/dev/shm/zeroshard-" + run_id; }

MemoryCheckpoint newest_memory_checkpoint(const std::string& dir, const std::string& run_id) {
  MemoryCheckpoint out;
  for (const int64_t step : checkpoint_steps(dir)) {
    const std::string path = (fs::path(dir) / ckpt::step_dir_name(step)).string();
    std::string run;
    try {
      run = read_checkpoint_info(path).run_id;
    } catch (const Error& e) {
      out.ignored.push_back(
          fmt::format("{} (unreadable: {})", ckpt::step_dir_name(step), e.what()));
      continue;
    }
    if (run != run_id || run.empty()) {
      out.ignored.push_back(fmt::format("{} (run {})", ckpt::step_dir_name(step),
                                        run.empty() ? std::string("unknown") : run));
      continue;
    }
    if (step > out.step) {
      out.step = step;
      out.path = path;
    }
  }
  return out;
}

MemoryTier::~MemoryTier() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

MemoryTier::MemoryTier(MemoryTier&& o) noexcept
    : active_(o.active_),
      dir_(std::move(o.dir_)),
      run_id_(std::move(o.run_id_)),
      note_(std::move(o.note_)),
      lock_fd_(o.lock_fd_) {
  o.active_ = false;
  o.lock_fd_ = -1;
}

MemoryTier& MemoryTier::operator=(MemoryTier&& o) noexcept {
  if (this == &o) return *this;
  if (lock_fd_ >= 0) ::close(lock_fd_);
  active_ = o.active_;
  dir_ = std::move(o.dir_);
  run_id_ = std::move(o.run_id_);
  note_ = std::move(o.note_);
  lock_fd_ = o.lock_fd_;
  o.active_ = false;
  o.lock_fd_ = -1;
  return *this;
}

MemoryTier MemoryTier::open(Communicator& comm, const std::string& dir_name,
                            const std::string& run_id, const std::string& keep) {
  const fs::path dir(dir_name);
  const int rank = comm.rank();
  std::string nonce;
  fail_together(comm, [&] {
    ZS_CHECK(!dir_name.empty() && !run_id.empty(), ErrorCode::kInvalidArgument,
             "memory directory: empty name or run id");
    if (rank != 0) return;
    nonce = ckpt::write_probe(dir);
    ::chmod(dir_name.c_str(), 0700);  // a snapshot of the model is nobody else's to read
  });
  nonce = broadcast_string(comm, nonce);
  fail_together(comm, [&] {
    if (rank != 0) ckpt::read_probe(dir, nonce, rank, "the memory directory (--memory-dir)");
  });
  MemoryTier out;
  fail_together(comm, [&] {
    if (rank != 0) return;
    out.lock_fd_ = ckpt::take_lock(dir);
    out.note_ = clear(dir, run_id, keep);
    const nlohmann::json owner = {{"format", kOwnerFormat},
                                  {"run_id", run_id},
                                  {"claimed", ckpt::now_utc()},
                                  {"host", ckpt::host_name()},
                                  {"pid", static_cast<int64_t>(::getpid())}};
    ckpt::write_small_file(dir, kOwnerFileName, owner.dump(1) + "\n");
    ckpt::describe_lock(out.lock_fd_, dir, run_id);
  });
  out.active_ = true;
  out.dir_ = dir_name;
  out.run_id_ = run_id;
  return out;
}

std::string MemoryTier::save(Engine& engine, Communicator& comm, CheckpointSaveOptions options) {
  ZS_CHECK(active_, ErrorCode::kInternal, "MemoryTier::save on an inactive tier");
  options.keep = 1;
  options.run_id = run_id_;
  return save_checkpoint(engine, comm, dir_, options);
}

void MemoryTier::remove() noexcept {
  if (active_ && lock_fd_ >= 0) {
    std::error_code ec;
    fs::remove_all(fs::path(dir_), ec);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
  active_ = false;
}

}  // namespace zs
