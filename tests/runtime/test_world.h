// What every MPI test of the runtime shares: the world communicator (made once per process) and
// a fresh temporary directory all ranks use.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"

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

}  // namespace zs::testing
