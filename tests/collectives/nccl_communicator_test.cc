// NcclCommunicator at world size 1 and 2 (one GPU per rank), mirroring the MPI backend's tests in
// tests/collectives: every dtype and count, sync and async, in place and out of place, broadcast
// from every root, integer reductions rejected, byte counters, groups and split. Reductions are
// checked against the rank-order reference with a dtype tolerance ([Note: NCCL reduction order]);
// with one or two ranks a sum or max has only one rounding and must match bit for bit.
// Skips without a device, and at world size 2 without two devices.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "../collectives/collective_test_util.h"
#include "collectives/nccl_communicator.h"
#include "core/convert.h"
#include "core/error.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

using test::DeviceArray;
using test::fill;
using test::first_mismatch;
using test::reference;

const DType kFloatTypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
const DType kAllTypes[] = {DType::kF32, DType::kF16, DType::kBF16,
                           DType::kF64, DType::kI8,  DType::kU8};
const ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax};

// Pure (runs without a device): the UUID table the constructor checks for two ranks on one GPU.
TEST(NcclDevices, FindSharedDevice) {
  auto uuid = [](unsigned char b) {
    DeviceUuid u{};
    u.fill(7);
    u[15] = b;
    return u;
  };
  const std::vector<DeviceUuid> distinct = {uuid(0), uuid(1), uuid(2), uuid(3)};
  EXPECT_EQ(find_shared_device(distinct), std::make_pair(-1, -1));
  EXPECT_EQ(find_shared_device(std::vector<DeviceUuid>{uuid(5)}), std::make_pair(-1, -1));
  const std::vector<DeviceUuid> shared = {uuid(0), uuid(1), uuid(2), uuid(1), uuid(0)};
  EXPECT_EQ(find_shared_device(shared), std::make_pair(1, 3));  // the first j, then the first i
  const std::vector<DeviceUuid> two = {uuid(9), uuid(9)};
  EXPECT_EQ(find_shared_device(two), std::make_pair(0, 1));
}

class Fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) return;
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (cuda_device_count() < size) return;
    cuda_check(cudaSetDevice(choose_local_device(rank, size, cuda_device_count())), "set device");
    cuda_check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    comm_ = NcclCommunicator::world(stream_);
  }
  void TearDown() override {
    comm_.reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  // Device copy of host bytes (synchronous: a test).
  static std::vector<uint8_t> down(void* d, size_t bytes) {
    std::vector<uint8_t> h(bytes);
    cuda_check(cudaDeviceSynchronize(), "sync");
    cuda_check(cudaMemcpy(h.data(), d, bytes, cudaMemcpyDeviceToHost), "down");
    return h;
  }
  static void up(void* d, const std::vector<uint8_t>& h) {
    cuda_check(cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice), "up");
  }
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NcclCommunicator> comm_;
};

// Reduction result vs. the reference: bitwise when only one rounding happens, else 2 ulp-ish.
void expect_reduced(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t count,
                    DType dt, ReduceOp op, int n, const std::string& what) {
  if (n <= 2 && op != ReduceOp::kAvg) {
    EXPECT_EQ(first_mismatch(got.data(), want.data(), count, dt), -1) << what;
    return;
  }
  const double rel = dt == DType::kBF16 ? 2e-2 : dt == DType::kF16 ? 2e-3 : 1e-6;
  for (size_t i = 0; i < count; ++i) {
    const double g = dt == DType::kF64 ? reinterpret_cast<const double*>(got.data())[i]
                                       : load_as_fp32(got.data(), dt, i);
    const double w = dt == DType::kF64 ? reinterpret_cast<const double*>(want.data())[i]
                                       : load_as_fp32(want.data(), dt, i);
    if (std::fabs(g - w) > rel * (std::fabs(w) + 1.0)) {
      ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w;
      return;
    }
  }
}

TEST_F(Fixture, AllGatherEveryDtype) {
  ZS_REQUIRE_GPU_PER_RANK();
  const int n = comm_->size(), me = comm_->rank();
  for (DType dt : kAllTypes)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{300'001}})
      for (bool async : {false, true})
        for (bool in_place : {false, true}) {
          const size_t e = dtype_size(dt);
          std::vector<uint8_t> mine(count * e), want(n * count * e);
          for (int r = 0; r < n; ++r)
            fill(want.data() + r * count * e, dt, r, r * count, count, 11);
          fill(mine.data(), dt, me, me * count, count, 11);
          DeviceArray<uint8_t> send(count * e + 1), recv(n * count * e + 1);
          uint8_t* s = in_place ? recv.get() + me * count * e : send.get();
          if (count > 0)
            cuda_check(cudaMemcpy(s, mine.data(), count * e, cudaMemcpyHostToDevice), "up");
          if (async) {
            auto w = comm_->start_all_gather(s, recv.get(), count, dt);
            w->wait();
          } else {
            comm_->all_gather(s, recv.get(), count, dt);
          }
          const auto got = down(recv.get(), n * count * e);
          EXPECT_EQ(first_mismatch(got.data(), want.data(), n * count, dt), -1)
              << dtype_name(dt) << " count " << count << (async ? " async" : "")
              << (in_place ? " in place" : "");
        }
}

TEST_F(Fixture, ReduceScatterAndAllReduce) {
  ZS_REQUIRE_GPU_PER_RANK();
  const int n = comm_->size(), me = comm_->rank();
  for (DType dt : kFloatTypes)
    for (ReduceOp op : kOps)
      for (size_t count : {size_t{1}, size_t{1000}, size_t{100'003}})
        for (bool async : {false, true})
          for (bool in_place : {false, true}) {
            const size_t e = dtype_size(dt);
            const std::string what =
                std::string(dtype_name(dt)) + " " + std::string(reduce_op_name(op)) + " count " +
                std::to_string(count) + (async ? " async" : "") + (in_place ? " in place" : "");
            // reduce_scatter
            std::vector<uint8_t> in(n * count * e), want(count * e);
            fill(in.data(), dt, me, 0, n * count, 23);
            reference(want.data(), dt, op, n, me * count, count, 23);
            DeviceArray<uint8_t> send(n * count * e), out(count * e);
            up(send.get(), in);
            uint8_t* recv = in_place ? send.get() + me * count * e : out.get();
            if (async) {
              auto w = comm_->start_reduce_scatter(send.get(), recv, count, dt, op);
              while (!w->test()) {
              }
              w->wait();
            } else {
              comm_->reduce_scatter(send.get(), recv, count, dt, op);
            }
            expect_reduced(down(recv, count * e), want, count, dt, op, n, "reduce_scatter " + what);
            // all_reduce (count need not divide by n)
            std::vector<uint8_t> ain(count * e), awant(count * e);
            fill(ain.data(), dt, me, 0, count, 37);
            reference(awant.data(), dt, op, n, 0, count, 37);
            DeviceArray<uint8_t> asend(count * e), aout(count * e);
            up(asend.get(), ain);
            uint8_t* arecv = in_place ? asend.get() : aout.get();
            if (async) {
              comm_->start_all_reduce(asend.get(), arecv, count, dt, op)->wait();
            } else {
              comm_->all_reduce(asend.get(), arecv, count, dt, op);
            }
            expect_reduced(down(arecv, count * e), awant, count, dt, op, n, "all_reduce " + what);
          }
}

// [Note: NCCL reduction order]: deterministic for a fixed size: the same call twice, same bits.
TEST_F(Fixture, SameBitsCallAfterCall) {
  ZS_REQUIRE_GPU_PER_RANK();
  const size_t count = 1'000'003;
  for (DType dt : {DType::kBF16, DType::kF32}) {
    const size_t e = dtype_size(dt);
    std::vector<uint8_t> in(count * e);
    fill(in.data(), dt, comm_->rank(), 0, count, 5);
    DeviceArray<uint8_t> send(count * e), r1(count * e), r2(count * e);
    up(send.get(), in);
    comm_->all_reduce(send.get(), r1.get(), count, dt, ReduceOp::kSum);
    comm_->all_reduce(send.get(), r2.get(), count, dt, ReduceOp::kSum);
    const auto a = down(r1.get(), count * e), b = down(r2.get(), count * e);
    EXPECT_EQ(first_mismatch(a.data(), b.data(), count, dt), -1) << dtype_name(dt);
  }
}

TEST_F(Fixture, BroadcastEveryDtypeAndRoot) {
  ZS_REQUIRE_GPU_PER_RANK();
  for (DType dt : kAllTypes)
    for (size_t count : {size_t{0}, size_t{1}, size_t{1000}})
      for (int root = 0; root < comm_->size(); ++root) {
        const size_t e = dtype_size(dt);
        std::vector<uint8_t> want(count * e + 1, 0), zero(count * e + 1, 0);
        fill(want.data(), dt, root, 0, count, 17);
        DeviceArray<uint8_t> buf(count * e + 1);
        up(buf.get(), comm_->rank() == root ? want : zero);
        comm_->broadcast(buf.get(), count, dt, root);
        EXPECT_EQ(first_mismatch(down(buf.get(), count * e).data(), want.data(), count, dt), -1)
            << dtype_name(dt) << " count " << count << " root " << root;
      }
}

TEST_F(Fixture, IntegerReductionsRejected) {
  ZS_REQUIRE_GPU_PER_RANK();
  DeviceArray<uint8_t> a(64), b(64);
  for (DType dt : {DType::kI8, DType::kU8}) {
    EXPECT_THROW(comm_->all_reduce(a.get(), b.get(), 4, dt, ReduceOp::kSum), Error);
    EXPECT_THROW(comm_->reduce_scatter(a.get(), b.get(), 4, dt, ReduceOp::kMax), Error);
  }
  EXPECT_THROW(comm_->all_gather(nullptr, b.get(), 4, DType::kF32), Error);
  EXPECT_THROW(comm_->broadcast(a.get(), 4, DType::kF32, comm_->size()), Error);
}

TEST_F(Fixture, ByteCountersFollowTheContract) {
  ZS_REQUIRE_GPU_PER_RANK();
  const int64_t n = comm_->size();
  comm_->reset_counters();
  const size_t c = 1001;
  DeviceArray<float> a(n * c), b(n * c);
  comm_->all_gather(a.get(), b.get(), c, DType::kF32);
  comm_->reduce_scatter(a.get(), b.get(), c, DType::kF32, ReduceOp::kSum);
  comm_->all_reduce(a.get(), b.get(), c, DType::kF32, ReduceOp::kSum);
  comm_->broadcast(a.get(), c, DType::kF32, 0);
  comm_->barrier();
  const auto& k = comm_->counters();
  const int64_t bytes = static_cast<int64_t>(c) * 4;
  const int64_t piece = static_cast<int64_t>((c + n - 1) / n) * 4;
  EXPECT_EQ(k.sent[0], (n - 1) * bytes);
  EXPECT_EQ(k.received[1], (n - 1) * bytes);
  EXPECT_EQ(k.sent[2], 2 * (n - 1) * piece);
  EXPECT_EQ(k.sent[3], comm_->rank() == 0 ? bytes * (n - 1) : 0);
  EXPECT_EQ(k.received[3], comm_->rank() == 0 || n == 1 ? 0 : bytes);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(k.calls[i], 1) << i;
}

// A unit's gathers in one NCCL group; waits inside the group are refused.
TEST_F(Fixture, GroupedGathersAndAsyncInFlight) {
  ZS_REQUIRE_GPU_PER_RANK();
  const int n = comm_->size(), me = comm_->rank();
  const size_t c1 = 513, c2 = 20'000;
  std::vector<uint8_t> h1(c1 * 2), h2(c2 * 4), w1(n * c1 * 2), w2(n * c2 * 4);
  fill(h1.data(), DType::kBF16, me, me * c1, c1, 1);
  fill(h2.data(), DType::kF32, me, me * c2, c2, 2);
  for (int r = 0; r < n; ++r) {
    fill(w1.data() + r * c1 * 2, DType::kBF16, r, r * c1, c1, 1);
    fill(w2.data() + r * c2 * 4, DType::kF32, r, r * c2, c2, 2);
  }
  DeviceArray<uint8_t> s1(c1 * 2), s2(c2 * 4), r1(n * c1 * 2), r2(n * c2 * 4);
  up(s1.get(), h1);
  up(s2.get(), h2);
  WorkHandle a, b;
  {
    NcclGroup group(*comm_);
    a = comm_->start_all_gather(s1.get(), r1.get(), c1, DType::kBF16);
    b = comm_->start_all_gather(s2.get(), r2.get(), c2, DType::kF32);
    EXPECT_THROW(a->wait(), Error);
  }
  b->wait();
  a->wait();
  EXPECT_EQ(first_mismatch(down(r1.get(), n * c1 * 2).data(), w1.data(), n * c1, DType::kBF16), -1);
  EXPECT_EQ(first_mismatch(down(r2.get(), n * c2 * 4).data(), w2.data(), n * c2, DType::kF32), -1);
}

TEST_F(Fixture, SplitByParity) {
  ZS_REQUIRE_GPU_PER_RANK();
  const int n = comm_->size(), me = comm_->rank();
  auto sub = comm_->split(me % 2, me);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), (n - me % 2 + 1) / 2);
  EXPECT_EQ(sub->rank(), me / 2);
  DeviceArray<float> x(std::vector<float>(10, 1.0f));
  sub->all_reduce(x.get(), x.get(), 10, DType::kF32, ReduceOp::kSum);
  const auto got = x.download();
  EXPECT_EQ(got[9], static_cast<float>(sub->size()));
  auto none = comm_->split(-1, 0);
  EXPECT_EQ(none, nullptr);
}

}  // namespace
}  // namespace zs
