// Fail together (collectives/fail_together.h), run at 1, 2 and 4 ranks over a Communicator and
// over a raw MPI_Comm: when no rank throws, none does; when one rank throws, every rank throws
// that rank's code and message with that rank named; when two throw, the lowest one's; and the
// communicator stays usable afterwards (no rank is left behind in a collective).
#include "collectives/fail_together.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "collectives/mpi_agreement.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"

namespace zs {
namespace {

// What one rank saw from a fail_together call.
struct Seen {
  bool threw = false;
  ErrorCode code = ErrorCode::kInternal;
  int rank = -1;
  std::string what, cause;
};

Seen run(const std::function<void(const std::function<void()>&)>& together,
         const std::function<void()>& work) {
  Seen s;
  try {
    together(work);
  } catch (const RankFailure& f) {
    s = {true, f.code(), f.rank(), f.what(), f.cause()};
  }
  return s;
}

// Both forms of fail_together, over the world.
struct Forms {
  std::unique_ptr<MpiCommunicator> comm = MpiCommunicator::world();
  std::function<void(const std::function<void()>&)> over_comm = [this](const auto& w) {
    fail_together(*comm, w);
  };
  std::function<void(const std::function<void()>&)> over_mpi = [](const auto& w) {
    fail_together(MPI_COMM_WORLD, w);
  };
};

// Every rank of `failing` throws zs::Error(kCorruptData, "bad block on rank <r>"); every rank
// must see the lowest one's, named.
void expect_lowest(const std::function<void(const std::function<void()>&)>& together,
                   Communicator& comm, const std::set<int>& failing) {
  const int lowest = *failing.begin();
  const Seen s = run(together, [&] {
    if (failing.count(comm.rank()))
      fail(ErrorCode::kCorruptData, "bad block on rank {}", comm.rank());
  });
  const std::string cause = fmt::format("bad block on rank {}", lowest);
  EXPECT_TRUE(s.threw);
  EXPECT_EQ(s.code, ErrorCode::kCorruptData);
  EXPECT_EQ(s.rank, lowest);
  EXPECT_EQ(s.cause, cause);
  EXPECT_EQ(s.what, comm.size() > 1 ? fmt::format("rank {}: {}", lowest, cause) : cause);
  // The next collective still pairs up on every rank.
  double one = 1.0, sum = 0.0;
  comm.all_reduce(&one, &sum, 1, DType::kF64, ReduceOp::kSum);
  EXPECT_EQ(sum, comm.size());
}

TEST(FailTogether, NoRankThrowsNoneThrows) {
  Forms f;
  for (const auto* together : {&f.over_comm, &f.over_mpi}) {
    int ran = 0;
    const Seen s = run(*together, [&] { ++ran; });
    EXPECT_FALSE(s.threw) << s.what;
    EXPECT_EQ(ran, 1);  // the work ran once, on this rank
  }
}

TEST(FailTogether, OneRankThrowsEveryRankThrowsItsMessage) {
  Forms f;
  const int last = f.comm->size() - 1;
  expect_lowest(f.over_comm, *f.comm, {last});
  expect_lowest(f.over_mpi, *f.comm, {last});
  expect_lowest(f.over_comm, *f.comm, {0});
}

TEST(FailTogether, TwoRanksThrowTheLowestOneIsNamed) {
  Forms f;
  const int n = f.comm->size();
  // 4 ranks: ranks 1 and 3; 2 ranks: 0 and 1; 1 rank: rank 0 alone.
  const std::set<int> failing = n >= 4 ? std::set<int>{1, 3} : std::set<int>{0, n - 1};
  expect_lowest(f.over_comm, *f.comm, failing);
  expect_lowest(f.over_mpi, *f.comm, failing);
}

TEST(FailTogether, OtherExceptionsKeepTheirMeaning) {
  Forms f;
  const int last = f.comm->size() - 1;
  const bool me = f.comm->rank() == last;
  const std::string named = f.comm->size() > 1 ? fmt::format("rank {}: ", last) : "";
  Seen s = run(f.over_comm, [&] {
    if (me) throw std::bad_alloc();
  });
  EXPECT_EQ(s.code, ErrorCode::kOutOfMemory);
  EXPECT_EQ(s.what, named + "out of host memory");
  s = run(f.over_comm, [&] {
    if (me) throw std::runtime_error("plain failure");
  });
  EXPECT_EQ(s.code, ErrorCode::kInternal);
  EXPECT_EQ(s.what, named + "plain failure");
  // An empty message travels as one (no second broadcast on any rank).
  s = run(f.over_mpi, [&] {
    if (me) throw Error(ErrorCode::kNotFound, "");
  });
  EXPECT_TRUE(s.threw);
  EXPECT_EQ(s.code, ErrorCode::kNotFound);
  EXPECT_EQ(s.cause, "");
  EXPECT_EQ(s.rank, last);
}

}  // namespace
}  // namespace zs
