#include "checkpoint/save_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <system_error>
#include <thread>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/dir_files.h"
#include "collectives/fail_together.h"
#include "core/error.h"

namespace zs {
namespace fs = std::filesystem;

namespace ckpt {

std::string random_hex64() {
  std::random_device rd;
  const uint64_t hi = rd(), lo = rd();
  // The clock and the pid as well: some random devices are deterministic.
  const uint64_t t =
      static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count());
  return ckpt::hex64(((hi << 32) | (lo & 0xffffffffu)) ^ (t * 0x9e3779b97f4a7c15ull) ^
                     static_cast<uint64_t>(::getpid()));
}

std::string host_name() {
  char h[256] = {};
  if (::gethostname(h, sizeof(h) - 1) != 0) return "unknown";
  return h;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Writes `text` to dir/name through a temporary file and a rename (never half an owner file).
void write_small_file(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path tmp = dir / (name + ".tmp");
  ckpt::OutFile out(tmp.string());
  out.write(text.data(), text.size());
  out.finish();
  zs::rename_path(tmp.string(), (dir / name).string());
  zs::sync_dir(dir.string());
}

// Phase 1, rank 0: the directory exists and holds a probe only this job knows the content of.
std::string write_probe(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create: {}", dir.string(), ec.message());
  const std::string nonce = random_hex64();
  write_small_file(dir, ".probe-" + nonce, nonce + " " + host_name());
  return nonce;
}

// Phase 2, every other rank: reads the probe back. A file system that shows another node's new
// file only after a while (NFS attribute caching) gets two seconds.
void read_probe(const fs::path& dir, const std::string& nonce, int rank, const char* what) {
  const fs::path path = dir / (".probe-" + nonce);
  std::string text;
  for (int attempt = 0;; ++attempt) {
    std::error_code ec;
    if (fs::exists(path, ec)) {
      text = ckpt::read_whole_file(path.string(), kMaxSmallFile);
      if (text.rfind(nonce + " ", 0) == 0) return;
    }
    if (attempt == 20) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::error_code ec;
  fail(ErrorCode::kInvalidArgument,
       "{}: {} must be shared by every rank: rank {} (host {}) does not see {}, "
       "written by rank 0 just before{} (it looked in {}); give a directory on a file system "
       "every rank mounts",
       dir.string(), what, rank, host_name(), path.filename().string(),
       text.empty() ? "" : ", but another file of that name", fs::absolute(dir, ec).string());
}

// Rank 0: an open, locked writer.lock, or an error naming the job that holds it.
int take_lock(const fs::path& dir) {
  const std::string path = (dir / kLockFileName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) fail(ErrorCode::kInvalidArgument, "{}: cannot open: {}", path, std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK)
      fail(ErrorCode::kInvalidArgument, "{}: cannot lock: {}", path, std::strerror(err));
    std::string holder;
    try {
      holder = ckpt::read_whole_file(path, kMaxSmallFile);
    } catch (const Error&) {
    }
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    fail(ErrorCode::kInvalidArgument,
         "{}: another job is writing checkpoints into this directory ({}); two jobs must not "
         "save into one directory: wait for it to end, or give another directory",
         dir.string(), holder.empty() ? "it has not said who it is yet" : holder);
  }
  return fd;
}

// Rank 0, with the lock held: says who holds it, for the next job that tries.
void describe_lock(int fd, const fs::path& dir, const std::string& run_id) {
  const std::string text = fmt::format("pid {} on host {} since {}, run {}\n", ::getpid(),
                                       host_name(), now_utc(), run_id);
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    fail(ErrorCode::kInvalidArgument, "{}/{}: cannot write: {}", dir.string(), kLockFileName,
         std::strerror(errno));
}

// The run whose checkpoints `dir` holds: its owner file's, else (a directory written before
// owner files) the latest checkpoint's run id; "" when unknown. `overwrite`: an owner file that is
// not one counts as unknown (it is set aside with the checkpoints) instead of refusing.
}  // namespace ckpt

namespace {

using ckpt::describe_lock;
using ckpt::host_name;
using ckpt::kMaxSmallFile;
using ckpt::now_utc;
using ckpt::random_hex64;
using ckpt::read_probe;
using ckpt::take_lock;
using ckpt::write_probe;
using ckpt::write_small_file;

constexpr const char* kOwnerFormat = "zeroshard-save-dir";

std::string steps_text(const std::vector<int64_t>& steps) {
  return fmt::format("step{} {}", steps.size() == 1 ? "" : "s", fmt::join(steps, ", "));
}

std::string holder_of(const fs::path& dir, const std::vector<int64_t>& held, bool overwrite) {
  try {
    if (std::optional<std::string> o = save_dir_owner(dir.string())) return *o;
  } catch (const Error& e) {
    if (overwrite) return "";
    throw Error(e.code(),
                fmt::format("{}; if the checkpoints in {} are this run's, remove it and "
                            "resume (the latest checkpoint names its run); to start a fresh run "
                            "over them, give --overwrite",
                            e.what(), dir.string()));
  }
  if (held.empty()) return "";
  try {
    return read_checkpoint_info((dir / ckpt::step_dir_name(held.back())).string()).run_id;
  } catch (const Error&) {
    return "";
  }
}

// Whether checkpoint directory `ckpt_dir` lies in `dir`.
bool inside(const fs::path& ckpt_dir, const fs::path& dir) {
  std::error_code ec1, ec2;
  const fs::path c = fs::weakly_canonical(ckpt_dir, ec1), d = fs::weakly_canonical(dir, ec2);
  return !ec1 && !ec2 && c.parent_path() == d;
}

constexpr const char* kAsidePrefix = ".replaced-";

// What a replacement moves: the checkpoints, the interrupted saves and the owner file.
bool replaced_entry(const std::string& name) {
  return ckpt::parse_step_dir_name(name) >= 0 || name.rfind(".tmp-step-", 0) == 0 ||
         name == kOwnerFileName;
}

// Moves every entry of `from` that replaced_entry() names into `to` (created), then syncs both.
void move_entries(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to, ec);
  ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create: {}", to.string(), ec.message());
  std::vector<fs::path> moving;
  for (const fs::directory_entry& d : fs::directory_iterator(from, ec))
    if (replaced_entry(d.path().filename().string())) moving.push_back(d.path());
  ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot list: {}", from.string(), ec.message());
  for (const fs::path& p : moving) zs::rename_path(p.string(), (to / p.filename()).string());
  zs::sync_dir(to.string());
  zs::sync_dir(from.string());
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot remove: {}", p.string(), ec.message());
}

// Puts the checkpoints set aside in `aside` back into `dir`: this run's owner file and interrupted
// saves go, the old run's owner file (if it had one) and checkpoints return.
void put_back(const fs::path& dir, const fs::path& aside) {
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(dir, ec)) {
    const std::string name = d.path().filename().string();
    if (name == kOwnerFileName || name.rfind(".tmp-step-", 0) == 0) remove_tree(d.path());
  }
  move_entries(aside, dir);
  remove_tree(aside);
  zs::sync_dir(dir.string());
}

// Rank 0, with the lock held: a replacement a killed job left behind (DIR/.replaced-RUN) is
// finished when that job saved a complete checkpoint, else undone. Returns what was done, for
// the user; "" when there was nothing.
std::string settle_replacements(const fs::path& dir) {
  std::error_code ec;
  std::vector<fs::path> asides;
  for (const fs::directory_entry& d : fs::directory_iterator(dir, ec))
    if (d.path().filename().string().rfind(kAsidePrefix, 0) == 0) asides.push_back(d.path());
  std::string note;
  for (const fs::path& aside : asides) {
    const std::string run = aside.filename().string().substr(std::strlen(kAsidePrefix));
    const std::vector<int64_t> saved = checkpoint_steps(dir.string());
    const std::vector<int64_t> held = checkpoint_steps(aside.string());
    if (saved.empty()) {
      put_back(dir, aside);
      note += fmt::format(
          "{}the checkpoints of run {} ({}) were set aside by --overwrite for a run that ended "
          "before its first checkpoint: put back into {}",
          note.empty() ? "" : "; ", run, steps_text(held), dir.string());
    } else {
      remove_tree(aside);
      zs::sync_dir(dir.string());
      note += fmt::format(
          "{}removed the checkpoints of run {} ({}) that --overwrite had set aside in {}: the run "
          "that replaced them saved step {}",
          note.empty() ? "" : "; ", run, steps_text(held), aside.string(), saved.back());
    }
  }
  return note;
}

}  // namespace

void SaveDir::restore_replaced() noexcept {
  if (aside_.empty()) return;
  try {
    put_back(fs::path(dir_), fs::path(aside_));
  } catch (const std::exception& e) {
    // The next claim of the directory puts them back (settle_replacements); say where they are.
    std::fprintf(stderr,
                 "warning: %s: could not put back the checkpoints set aside in %s (%s); "
                 "the next run in this directory will\n",
                 dir_.c_str(), aside_.c_str(), e.what());
  }
  aside_.clear();
}

void SaveDir::release() noexcept {
  restore_replaced();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
  lock_fd_ = -1;
}

SaveDir::~SaveDir() { release(); }

SaveDir::SaveDir(SaveDir&& o) noexcept
    : dir_(std::move(o.dir_)),
      run_id_(std::move(o.run_id_)),
      replaced_(std::move(o.replaced_)),
      replaced_run_(std::move(o.replaced_run_)),
      aside_(std::move(o.aside_)),
      resume_from_(std::move(o.resume_from_)),
      note_(std::move(o.note_)),
      lock_fd_(o.lock_fd_) {
  o.lock_fd_ = -1;
  o.run_id_.clear();
  o.aside_.clear();
}

SaveDir& SaveDir::operator=(SaveDir&& o) noexcept {
  if (this != &o) {
    release();
    dir_ = std::move(o.dir_);
    run_id_ = std::move(o.run_id_);
    replaced_ = std::move(o.replaced_);
    replaced_run_ = std::move(o.replaced_run_);
    aside_ = std::move(o.aside_);
    resume_from_ = std::move(o.resume_from_);
    note_ = std::move(o.note_);
    lock_fd_ = o.lock_fd_;
    o.lock_fd_ = -1;
    o.run_id_.clear();
    o.aside_.clear();
  }
  return *this;
}

bool SaveDir::finish_replacing() {
  if (aside_.empty()) return false;
  remove_tree(fs::path(aside_));
  zs::sync_dir(dir_);
  aside_.clear();
  return true;
}

SaveDir SaveDir::claim(Communicator& comm, const std::string& dir_name, const SaveDirOptions& opt) {
  const fs::path dir(dir_name);
  const int rank = comm.rank();
  // Shared by every rank? Checked before anything in the directory changes.
  std::string nonce;
  fail_together(comm, [&] {
    ZS_CHECK(!dir_name.empty(), ErrorCode::kInvalidArgument, "save directory: empty name");
    if (rank == 0) nonce = write_probe(dir);
  });
  nonce = broadcast_string(comm, nonce);
  const fs::path probe = dir / (".probe-" + nonce);
  try {
    fail_together(comm, [&] {
      if (rank != 0) read_probe(dir, nonce, rank, "the save directory");
    });
  } catch (const Error&) {
    std::error_code ec;
    if (rank == 0) fs::remove(probe, ec);
    throw;
  }

  SaveDir out;
  out.dir_ = dir_name;
  std::string run_id, resume = opt.resume_from;
  fail_together(comm, [&] {
    if (rank != 0) return;
    std::error_code ec;
    fs::remove(probe, ec);
    out.lock_fd_ = take_lock(dir);
    out.note_ = settle_replacements(dir);
    if (opt.resume_latest) resume = latest_checkpoint(dir_name).value_or("");
    // The run: the resumed checkpoint's, or a new one (also for a checkpoint written before run
    // ids: it then continues under a new id).
    std::string continues;
    if (!resume.empty()) continues = read_checkpoint_info(resume).run_id;
    run_id = continues.empty() ? random_hex64() : continues;
    const std::vector<int64_t> held = checkpoint_steps(dir_name);
    const std::string holder = holder_of(dir, held, opt.overwrite && resume.empty());
    bool ours = held.empty() || holder == run_id;
    // A checkpoint from before run ids, resumed inside its own directory: adopt the directory.
    if (!ours && holder.empty() && continues.empty() && !resume.empty()) ours = inside(resume, dir);
    if (!ours) {
      const std::string whose = holder.empty() ? "of unknown id" : holder;
      if (!opt.overwrite || !resume.empty()) {
        const std::string mine =
            resume.empty() ? std::string("this run starts fresh")
                           : fmt::format("this run continues run {} from {}", run_id, resume);
        fail(ErrorCode::kInvalidArgument,
             "{} holds the checkpoints of another run (run {}, {}); {}{}{}", dir_name, whose,
             steps_text(held), mine, opt.choices.empty() ? "" : ": ", opt.choices);
      }
      const fs::path aside = dir / (kAsidePrefix + (holder.empty() ? "unknown" : holder));
      move_entries(dir, aside);
      out.aside_ = aside.string();
      out.replaced_ = held;
      out.replaced_run_ = whose;
    }
    const nlohmann::json owner = {{"format", kOwnerFormat},
                                  {"run_id", run_id},
                                  {"claimed", now_utc()},
                                  {"host", host_name()},
                                  {"pid", static_cast<int64_t>(::getpid())}};
    write_small_file(dir, kOwnerFileName, owner.dump(1) + "\n");
    describe_lock(out.lock_fd_, dir, run_id);
  });
  out.run_id_ = broadcast_string(comm, run_id);
  out.resume_from_ = broadcast_string(comm, resume);
  return out;
}

std::string new_run_id(Communicator& comm) {
  return broadcast_string(comm, comm.rank() == 0 ? random_hex64() : std::string());
}

std::optional<std::string> save_dir_owner(const std::string& dir) {
  const fs::path path = fs::path(dir) / kOwnerFileName;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const std::string text = ckpt::read_whole_file(path.string(), kMaxSmallFile);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const bool ok = j.is_object() && j.value("format", "") == kOwnerFormat && j.contains("run_id") &&
                  j["run_id"].is_string() && ckpt::valid_run_id(j["run_id"].get<std::string>());
  ZS_CHECK(ok, ErrorCode::kCorruptData,
           "{}: not an owner file (expected {{\"format\": \"{}\", "
           "\"run_id\": ...}})",
           path.string(), kOwnerFormat);
  return j["run_id"].get<std::string>();
}

std::vector<int64_t> checkpoint_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(fs::path(dir), ec)) {
    const int64_t step = ckpt::parse_step_dir_name(d.path().filename().string());
    std::error_code ec2;
    if (step >= 0 && fs::is_regular_file(d.path() / ckpt::kManifestName, ec2))
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace zs
