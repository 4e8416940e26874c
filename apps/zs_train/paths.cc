#include "paths.h"

#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace zs::train {
namespace {

namespace fs = std::filesystem;

constexpr PathFlag kPathFlags[] = {
    {"config", PathUse::kReadFile, true},
    {"deepspeed-config", PathUse::kReadFile, true},
    {"ds-config", PathUse::kReadFile, true},
    {"json-log", PathUse::kWriteFile, false},
    {"data", PathUse::kReadFileOrDir, true},
    {"train-shards", PathUse::kReadGlob, true},
    {"val-shards", PathUse::kReadGlob, true},
    {"save-dir", PathUse::kWriteDir, true},
    {"resume-from", PathUse::kReadDir, true},
    {"export-safetensors", PathUse::kWriteFile, false},
    {"init-safetensors", PathUse::kReadFile, true},
    {"export-hf", PathUse::kWriteDir, false},
    {"init-from-hf", PathUse::kReadDir, true},
    {"export-adapters", PathUse::kWriteDir, false},
};

// "a directory", "a FIFO (named pipe)", ... for a stat mode.
const char* kind_of(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void refuse(std::string_view flag, const std::string& path, const std::string& why) {
  fail(ErrorCode::kInvalidArgument, "--{} {}: {}", flag, path, why);
}

// stat() following symlinks; false (errno set) when the path does not resolve.
bool stat_path(const std::string& path, struct stat& st) { return ::stat(path.c_str(), &st) == 0; }

void check_access(std::string_view flag, const std::string& path, const std::string& target,
                  int mode, const char* what) {
  if (::access(target.c_str(), mode) != 0) {
    refuse(flag, path,
           target == path
               ? fmt::format("cannot be {}: {}", what, std::strerror(errno))
               : fmt::format("directory {} is not {}: {}", target, what, std::strerror(errno)));
  }
}

void check_read(std::string_view flag, const std::string& path, PathUse use) {
  struct stat st {};
  if (!stat_path(path, st))
    refuse(flag, path, errno == ENOENT ? "does not exist" : std::strerror(errno));
  const bool file = S_ISREG(st.st_mode), dir = S_ISDIR(st.st_mode);
  const bool ok = use == PathUse::kReadFile ? file : use == PathUse::kReadDir ? dir : file || dir;
  if (!ok) {
    const char* want = use == PathUse::kReadFile  ? "a regular file"
                       : use == PathUse::kReadDir ? "a directory"
                                                  : "a regular file or a directory";
    refuse(flag, path, fmt::format("is {}, not {}", kind_of(st.st_mode), want));
  }
  check_access(flag, path, path, dir ? R_OK | X_OK : R_OK, "read");
}

void check_write(std::string_view flag, const std::string& path, PathUse use) {
  struct stat st {};
  if (stat_path(path, st)) {
    const bool want_dir = use == PathUse::kWriteDir;
    if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
      refuse(flag, path,
             fmt::format("is {}: name {}", kind_of(st.st_mode),
                         want_dir ? "a directory (or one to create)" : "a regular file to write"));
    }
    check_access(flag, path, path, want_dir ? W_OK | X_OK : W_OK, "written");
    return;
  }
  // ENOTDIR: a component of the path is not a directory, named below.
  if (errno != ENOENT && errno != ENOTDIR) refuse(flag, path, std::strerror(errno));
  // Not there yet: its directory must be (a file), or its nearest existing ancestor (a directory
  // created with its parents).
  fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) parent = ".";
  if (use == PathUse::kWriteDir) {
    while (!stat_path(parent.string(), st) && (errno == ENOENT || errno == ENOTDIR) &&
           parent.has_parent_path() && parent.parent_path() != parent)
      parent = parent.parent_path();
  }
  // "$UNSET/ckpt" reads as "/ckpt": a new entry at the file system's root is refused rather than
  // created (an existing one is used as given).
  if (parent == "/") {
    refuse(flag, path,
           "would be created at the file system's root (an unset shell variable before it?): "
           "create it first, or name a path under an existing directory");
  }
  if (!stat_path(parent.string(), st)) {
    refuse(flag, path,
           fmt::format("directory {} does not exist{}", parent.string(),
                       use == PathUse::kWriteFile ? " (files are not given new directories)" : ""));
  }
  if (!S_ISDIR(st.st_mode))
    refuse(flag, path,
           fmt::format("{} is {}, not a directory", parent.string(), kind_of(st.st_mode)));
  check_access(flag, path, parent.string(), W_OK | X_OK, "writable");
}

}  // namespace

std::span<const PathFlag> path_flags() { return kPathFlags; }

std::vector<std::string> glob_paths(const std::string& pattern) {
  // A path that exists as written is that path, whatever its characters ("br[1]/train.bin").
  struct stat st {};
  if (stat_path(pattern, st)) return {pattern};
  glob_t g{};
  std::vector<std::string> paths;
  if (::glob(pattern.c_str(), 0, nullptr, &g) == 0)
    paths.assign(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  std::sort(paths.begin(), paths.end());
  return paths;
}

void check_path(std::string_view flag, const std::string& path, PathUse use) {
  if (path.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--{} is empty (an unset shell variable?): name a {}, or leave the flag out", flag,
         use == PathUse::kReadDir || use == PathUse::kWriteDir ? "directory" : "file");
  }
  if (use == PathUse::kReadGlob) {
    const std::vector<std::string> matches = glob_paths(path);
    if (matches.empty()) refuse(flag, path, "matches no file");
    for (const std::string& m : matches) check_read(flag, m, PathUse::kReadFile);
  } else if (use == PathUse::kWriteFile || use == PathUse::kWriteDir) {
    check_write(flag, path, use);
  } else {
    check_read(flag, path, use);
  }
}

}  // namespace zs::train
