// zs_train's path flags: one kind of value, one check, before any work (docs/reliability.md).
// Every flag that names a file or directory is declared once in kPathFlags with what the run does
// with it; an empty value (what an unset "$VAR" gives) is refused for every one of them, and each
// is checked for existence, kind and access before the first step, so that a run never trains
// for an hour to fail at its export, and never reads a device or a FIFO as if it were a file.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zs::train {

enum class PathUse {
  kReadFile,       // an existing regular file (symlinks followed)
  kReadFileOrDir,  // an existing regular file, or a directory (of regular files)
  kReadDir,        // an existing directory
  kReadGlob,       // a glob() pattern matching at least one file, each one as kReadFile
  kWriteFile,      // a regular file or nothing yet, in an existing writable directory
  kWriteDir,       // a writable directory, or nothing yet under a writable directory (created)
};

struct PathFlag {
  const char* name;  // without "--"
  PathUse use;
  // Checked on every rank (each reads or writes it) or on rank 0 only (rank 0 alone writes it).
  bool every_rank;
};

// zs_train's path flags, in --help's order.
std::span<const PathFlag> path_flags();

// `pattern` itself when a path of that name exists (brackets and stars in a real name are not
// wildcards), else the paths POSIX glob() matches for it, sorted; empty when nothing matches.
std::vector<std::string> glob_paths(const std::string& pattern);

// Throws zs::Error(kInvalidArgument) naming --`flag` and `path` when the path cannot serve `use`:
// empty; for reads: missing, unreadable, or of another kind (a directory for a file, a FIFO,
// socket or device anywhere a regular file is read); for writes: an existing path of another
// kind (a directory for a file, a device such as /dev/full, a FIFO), or a new entry to create
// directly in / (what "$UNSET/dir" gives); for kReadGlob, a pattern that
// matches nothing, or a match that is no readable regular file, or a parent that is missing,
// not a directory or not writable (for kWriteDir, the nearest existing ancestor). Not collective.
void check_path(std::string_view flag, const std::string& path, PathUse use);

}  // namespace zs::train
