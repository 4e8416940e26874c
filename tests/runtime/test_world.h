// What every MPI test of the runtime shares: the world communicator (made once per process) and
// a fresh temporary directory all ranks use.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"
#include "core/error.h"

namespace zs::testing {

inline MpiCommunicator& world() {
  static std::unique_ptr<MpiCommunicator> w = MpiCommunicator::world();
  return *w;
}

// A new directory under the test temp dir, named `prefix` + a unique suffix by rank 0 (mkdtemp),
// the same on every rank; concurrent test processes (an AVX2 twin) get different ones. Empty when
// it could not be made. Collective over world().
inline std::string shared_temp_dir(const std::string& prefix) {
  char name[4096] = {};
  if (world().rank() == 0) {
    const std::string pattern = ::testing::TempDir() + prefix + "XXXXXX";
    std::snprintf(name, sizeof(name), "%s", pattern.c_str());
    if (mkdtemp(name) == nullptr) name[0] = 0;
  }
  world().broadcast(name, sizeof(name), DType::kU8, 0);
  return name;
}

// shared_temp_dir as an object: made when constructed (aborts when it cannot be), removed by rank
// 0 after a barrier when destroyed. Collective over world().
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "zs-test-") : path_(shared_temp_dir(prefix)) {
    if (path_.empty()) std::abort();
  }
  ~TempDir() {
    world().barrier();
    if (world().rank() == 0) std::filesystem::remove_all(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& s) const { return path_ + "/" + s; }

 private:
  std::string path_;
};

// Runs fn on every rank and returns its zs::Error message ("" when none), expecting the code
// kInvalidArgument; every rank must agree on whether it failed (checked with one all-reduce over
// MPI_COMM_WORLD, so every rank must call it).
inline std::string error_of(const std::function<void()>& fn) {
  std::string msg;
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    msg = e.what();
  }
  int failed = msg.empty() ? 0 : 1, all = 0;
  MPI_Allreduce(&failed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_TRUE(all == 0 || all == world().size()) << "only some ranks failed";
  return msg;
}

}  // namespace zs::testing
