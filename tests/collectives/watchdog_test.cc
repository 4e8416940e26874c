// The watchdog's timeout is set once per process ([Note: flight recorder]): the first world-sized
// communicator made with a timeout sets it unless the program already did (start_watchdog), and
// communicators made later (dups, split(), split_shared()) never change it. One test in its own
// binary: the watchdog is process-wide.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

#include "collectives/flight_recorder.h"
#include "collectives/mpi_communicator.h"

namespace zs {
namespace {

MpiCommunicatorOptions with_timeout(double s) {
  MpiCommunicatorOptions o;
  o.watchdog_timeout_s = s;
  return o;
}

TEST(Watchdog, CommunicatorsNeverChangeATimeoutAlreadySet) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(watchdog_timeout(), 0.0);
  MpiCommunicator off(MPI_COMM_WORLD, with_timeout(0));
  EXPECT_EQ(watchdog_timeout(), 0.0) << "a communicator without a timeout sets nothing";
  // The first world-sized communicator with a timeout sets it (the library's default path).
  MpiCommunicator first(MPI_COMM_WORLD, with_timeout(1000));
  EXPECT_EQ(watchdog_timeout(), 1000.0);
  // Later ones, with other timeouts, do not: a dup, split(), split_shared().
  MpiCommunicator dup(MPI_COMM_WORLD, with_timeout(5));
  EXPECT_EQ(watchdog_timeout(), 1000.0);
  MpiCommunicator five(first.handle(), with_timeout(5));
  auto local = five.split_shared();
  auto all = five.split(0, rank);
  EXPECT_EQ(watchdog_timeout(), 1000.0) << "re-armed by a split of the world";
  // The program's setting wins over the communicators', before and after them.
  start_watchdog(0, rank, size);
  EXPECT_EQ(watchdog_timeout(), 0.0);
  MpiCommunicator again(MPI_COMM_WORLD, with_timeout(5));
  auto again_local = again.split_shared();
  EXPECT_EQ(watchdog_timeout(), 0.0) << "a communicator re-armed the watchdog the program set off";
  start_watchdog(2000, rank, size);
  EXPECT_EQ(watchdog_timeout(), 2000.0);
  MpiCommunicator later(MPI_COMM_WORLD, with_timeout(5));
  EXPECT_EQ(watchdog_timeout(), 2000.0);
  start_watchdog(0, rank, size);  // nothing fires while the process ends
}

}  // namespace
}  // namespace zs
