// The engine on the CUDA backend: CudaDeviceOps + NcclCommunicator + nn::CudaGptModel, against
// the same engine on the CPU backend (MpiCommunicator + nn::GptModel).
//
// What must hold (docs/gpu.md): at one world size, ZeRO stages 0-3 give bitwise identical fp32
// master weights on the GPU, and so does the offloaded optimizer (the CPU Adam equals the device
// AdamW bit for bit); the GPU loss curve follows the CPU's within the compute dtype's tolerance;
// shard_state() host copies round-trip through refresh_params_from_master().
// Skips without a device ("no CUDA device"), and without one GPU per rank.
#include <mpi.h>

#include <cmath>
#include <memory>
#include <vector>

#include "collectives/mpi_communicator.h"
#include "collectives/nccl_communicator.h"
#include "device/cuda/cuda_device_ops.h"
#include "models/gpt/cuda/gpt_cuda.h"
#include "models/gpt/gpt.h"
#include "runtime/engine.h"
#include "tests/cuda_test_util.h"

namespace zs {
namespace {

nn::GptConfig small_model(DType dtype) {
  nn::GptConfig c;
  c.arch.layers = 2;
  c.arch.heads = 4;
  c.arch.width = 64;
  c.arch.context = 32;
  c.run.batch = 2;
  c.run.compute_dtype = dtype;
  c.run.threads = 1;
  return c;
}

EngineConfig engine_config(int stage, DType dtype, bool offload) {
  EngineConfig e;
  e.stage = zero_stage_from_int(stage);
  e.precision.param_dtype = dtype;
  e.offload.optimizer = offload;
  e.micro_batches = 2;
  e.optimizer.schedule.lr = 1e-3f;
  e.optimizer.schedule.warmup_steps = 1;
  e.optimizer.schedule.total_steps = 8;
  return e;
}

// Deterministic tokens for `steps` steps, each rank its own part.
std::vector<int32_t> step_tokens(const nn::GptConfig& c, int micro, int rank, int step) {
  std::vector<int32_t> t(static_cast<size_t>(micro) * c.run.batch * (c.arch.context + 1));
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = static_cast<int32_t>(
        (i * 31 + static_cast<size_t>(rank) * 7 + static_cast<size_t>(step) * 13) % 251);
  }
  return t;
}

struct RunResult {
  std::vector<double> losses;
  uint64_t hash = 0;
};

class CudaEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    if (cuda_device_count() < world_ || cuda_device_count() == 0) return;
    cuda_check(cudaSetDevice(choose_local_device(rank_, world_, cuda_device_count())), "device");
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  RunResult run_gpu(int stage, DType dtype, bool offload, int steps) {
    NcclCommunicator comm(MPI_COMM_WORLD, stream_);
    CudaDeviceOps ops(stream_);
    MemoryTracker tracker;
    const nn::GptConfig mc = small_model(dtype);
    nn::CudaGptModel model(mc, stream_, &tracker, &ops.allocator());
    RunResult r;
    {
      Engine engine(model, comm, engine_config(stage, dtype, offload), &tracker, &ops);
      for (int s = 0; s < steps; ++s) {
        const std::vector<int32_t> tok = step_tokens(mc, 2, rank_, s);
        model.set_tokens(tok);
        r.losses.push_back(engine.step().loss);
      }
      r.hash = engine.param_hash();
    }
    return r;
  }

  RunResult run_cpu(int stage, DType dtype, int steps) {
    std::unique_ptr<MpiCommunicator> comm = MpiCommunicator::world();
    MemoryTracker tracker;
    const nn::GptConfig mc = small_model(dtype);
    nn::GptModel model(mc, &tracker);
    Engine engine(model, *comm, engine_config(stage, dtype, false), &tracker);
    RunResult r;
    for (int s = 0; s < steps; ++s) {
      const std::vector<int32_t> tok = step_tokens(mc, 2, rank_, s);
      model.set_tokens(tok);
      r.losses.push_back(engine.step().loss);
    }
    r.hash = engine.param_hash();
    return r;
  }

  int rank_ = 0;
  int world_ = 1;
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaEngine, StagesAndOffloadBitwiseEqual) {
  ZS_REQUIRE_GPU_PER_RANK();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunResult ref = run_gpu(0, dt, false, 4);
    for (int stage = 1; stage <= 3; ++stage) {
      const RunResult r = run_gpu(stage, dt, false, 4);
      EXPECT_EQ(r.hash, ref.hash) << dtype_name(dt) << " stage " << stage;
      EXPECT_EQ(r.losses, ref.losses) << dtype_name(dt) << " stage " << stage;
      const RunResult o = run_gpu(stage, dt, true, 4);
      EXPECT_EQ(o.hash, ref.hash) << dtype_name(dt) << " stage " << stage << " offload";
    }
  }
}

TEST_F(CudaEngine, LossFollowsCpu) {
  ZS_REQUIRE_GPU_PER_RANK();
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const RunResult gpu = run_gpu(3, dt, false, 6);
    const RunResult cpu = run_cpu(3, dt, 6);
    const double tol = dt == DType::kF32 ? 1e-3 : 3e-2;  // relative, per step
    for (size_t s = 0; s < cpu.losses.size(); ++s) {
      std::printf("%s step %zu: cpu %.6f gpu %.6f\n", std::string(dtype_name(dt)).c_str(), s + 1,
                  cpu.losses[s], gpu.losses[s]);
      EXPECT_NEAR(gpu.losses[s], cpu.losses[s], tol * std::abs(cpu.losses[s]))
          << dtype_name(dt) << " step " << s + 1;
    }
  }
}

TEST_F(CudaEngine, ShardStateRoundTrip) {
  ZS_REQUIRE_GPU_PER_RANK();
  NcclCommunicator comm(MPI_COMM_WORLD, stream_);
  CudaDeviceOps ops(stream_);
  MemoryTracker tracker;
  const nn::GptConfig mc = small_model(DType::kBF16);
  nn::CudaGptModel model(mc, stream_, &tracker, &ops.allocator());
  Engine engine(model, comm, engine_config(3, DType::kBF16, false), &tracker, &ops);
  const uint64_t before = engine.param_hash();
  // Scale every master value by 2 through the host copies, refresh, read back.
  std::vector<std::vector<float>> expect;
  for (size_t u = 0; u < engine.num_units(); ++u) {
    UnitShardState st = engine.shard_state(u);
    for (int64_t i = 0; i < st.numel; ++i) st.master[i] *= 2.0f;
    expect.emplace_back(st.master, st.master + st.numel);
  }
  engine.refresh_params_from_master();
  EXPECT_NE(engine.param_hash(), before);
  for (size_t u = 0; u < engine.num_units(); ++u) {
    const UnitShardState st = engine.shard_state(u);
    EXPECT_EQ(std::vector<float>(st.master, st.master + st.numel), expect[u]) << "unit " << u;
  }
}

}  // namespace
}  // namespace zs
