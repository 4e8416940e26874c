// The engine's device code paths, exercised on the CPU: a DeviceOps that says it is a device the
// host cannot address (so the engine stages its control collectives, uploads initial values,
// keeps host copies for shard_state(), and with offload stages gradient and parameter shards)
// while running every op on host memory.
//
// Its asynchronous copies run as late as a stream may run them: device->host copies at
// wait_host_copies(), host->device copies just before the next operation ordered after them (the
// next DeviceOps call, collective or unit call). A missing wait, a host read of a staged buffer
// before its copy ran, or a write to a copy's source before then changes the bits, and the tests
// compare bits against the CPU backend at 1, 2 and 4 ranks.
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "device/device_ops.h"
#include "mlp_model.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::MlpModel;
using testing::MlpShape;

class FakeDeviceOps final : public DeviceOps {
 public:
  Device device() const override { return Device::cuda(0); }
  Allocator& allocator() override { return cpu_allocator(); }

  // Runs the deferred host->device copies: what stream order guarantees before later work.
  void flush() {
    for (const Copy& c : uploads_) std::memcpy(c.dst, c.src, c.bytes);
    uploads_.clear();
  }

  void zero(void* p, size_t bytes) override {
    flush();
    cpu().zero(p, bytes);
  }
  void convert(const void* src, DType sd, void* dst, DType dd, int64_t n) override {
    flush();
    cpu().convert(src, sd, dst, dd, n);
  }
  void accumulate(void* dst, DType dd, const void* src, DType sd, int64_t n) override {
    flush();
    cpu().accumulate(dst, dd, src, sd, n);
  }
  double grad_stats(std::span<const StatsSpan> spans, std::span<uint8_t> finite) override {
    flush();
    return cpu().grad_stats(spans, finite);
  }
  void adamw(float* p, const void* g, DType gd, float* m, float* v, int64_t n,
             const optim::AdamWStep& s, void* out, DType od) override {
    flush();
    ++device_updates;
    cpu().adamw(p, g, gd, m, v, n, s, out, od);
  }
  void sgd(float* p, const void* g, DType gd, float* mom, int64_t n, const optim::SgdConfig& c,
           float lr, float gs, bool decay, void* out, DType od) override {
    flush();
    ++device_updates;
    cpu().sgd(p, g, gd, mom, n, c, lr, gs, decay, out, od);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    flush();
    std::memcpy(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    flush();
    ++sync_uploads;
    std::memcpy(dst, src, bytes);
  }
  void copy_to_host_async(void* dst, const void* src, size_t bytes) override {
    flush();
    trace.push_back("D");
    downloads_.push_back({dst, src, bytes});
    ++async_downloads;
  }
  void wait_host_copies() override {
    for (const Copy& c : downloads_) std::memcpy(c.dst, c.src, c.bytes);
    downloads_.clear();
  }
  void copy_from_host_async(void* dst, const void* src, size_t bytes) override {
    flush();
    trace.push_back("U");
    uploads_.push_back({dst, src, bytes});  // reads `src` when it runs, not now
    ++async_uploads;
  }
  void synchronize() override {
    flush();
    wait_host_copies();
  }

  int device_updates = 0;
  int sync_uploads = 0;
  int async_downloads = 0;
  int async_uploads = 0;
  // The order of device work: "B<unit>" backward, "D" device->host copy, "U" host->device copy,
  // "G" all-gather started (the tests of the offload overlap read it).
  std::vector<std::string> trace;

 private:
  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  static DeviceOps& cpu() { return cpu_device_ops(); }
  std::vector<Copy> uploads_;
  std::vector<Copy> downloads_;
};

// The communicator of the fake device: collectives are ordered after earlier device work.
class FakeDeviceComm final : public Communicator {
 public:
  FakeDeviceComm(Communicator& inner, FakeDeviceOps& ops) : c_(inner), ops_(ops) {}
  int rank() const override { return c_.rank(); }
  int size() const override { return c_.size(); }
  void all_gather(const void* s, void* r, size_t n, DType dt) override {
    ops_.flush();
    c_.all_gather(s, r, n, dt);
  }
  void reduce_scatter(const void* s, void* r, size_t n, DType dt, ReduceOp op) override {
    ops_.flush();
    c_.reduce_scatter(s, r, n, dt, op);
  }
  void all_reduce(const void* s, void* r, size_t n, DType dt, ReduceOp op) override {
    ops_.flush();
    c_.all_reduce(s, r, n, dt, op);
  }
  void broadcast(void* b, size_t n, DType dt, int root) override {
    ops_.flush();
    c_.broadcast(b, n, dt, root);
  }
  void barrier() override { c_.barrier(); }
  void all_to_all(const void* s, void* r, size_t n, DType dt) override {
    ops_.flush();
    c_.all_to_all(s, r, n, dt);
  }
  WorkHandle start_all_to_all(const void* s, void* r, size_t n, DType dt) override {
    ops_.flush();
    return c_.start_all_to_all(s, r, n, dt);
  }
  WorkHandle start_all_gather(const void* s, void* r, size_t n, DType dt) override {
    ops_.flush();
    ops_.trace.push_back("G");
    return c_.start_all_gather(s, r, n, dt);
  }
  WorkHandle start_reduce_scatter(const void* s, void* r, size_t n, DType dt,
                                  ReduceOp op) override {
    ops_.flush();
    return c_.start_reduce_scatter(s, r, n, dt, op);
  }
  WorkHandle start_all_reduce(const void* s, void* r, size_t n, DType dt, ReduceOp op) override {
    ops_.flush();
    return c_.start_all_reduce(s, r, n, dt, op);
  }
  std::unique_ptr<Communicator> split(int color, int key) override { return c_.split(color, key); }
  const ByteCounters& counters() const override { return c_.counters(); }
  void reset_counters() override { c_.reset_counters(); }

 private:
  Communicator& c_;
  FakeDeviceOps& ops_;
};

// The model's kernels are ordered after earlier device work too.
class FakeDeviceModel final : public Model {
 public:
  FakeDeviceModel(MlpModel& m, FakeDeviceOps& ops) : m_(m), ops_(ops) {
    for (size_t i = 0; i < m.num_units(); ++i) units_.push_back(UnitWrap(m.unit(i), ops, i));
  }
  size_t num_units() const override { return units_.size(); }
  Unit& unit(size_t i) override { return units_[i]; }
  void load_micro_batch(int index) override { m_.load_micro_batch(index); }
  double loss() const override { return m_.loss(); }

 private:
  class UnitWrap final : public Unit {
   public:
    UnitWrap(Unit& u, FakeDeviceOps& ops, size_t index) : u_(&u), ops_(&ops), index_(index) {}
    std::string name() const override { return u_->name(); }
    std::vector<ParamSpec> param_specs() const override { return u_->param_specs(); }
    void forward(std::span<const ParamView> p, const StepInfo& info) override {
      ops_->flush();
      u_->forward(p, info);
    }
    void backward(std::span<const ParamView> p, GradViews& g, const StepInfo& info) override {
      ops_->flush();
      ops_->trace.push_back("B" + std::to_string(index_));
      u_->backward(p, g, info);
    }

   private:
    Unit* u_;
    FakeDeviceOps* ops_;
    size_t index_;
  };
  MlpModel& m_;
  FakeDeviceOps& ops_;
  std::vector<UnitWrap> units_;
};

using testing::error_of;
using testing::world;

// One engine's worth of fake-device pieces over a one-micro-batch MlpModel.
struct FakeRig {
  MlpModel inner{MlpShape{}, world().size(), world().rank(), 1};
  FakeDeviceOps ops;
  FakeDeviceModel model{inner, ops};
  FakeDeviceComm comm{world(), ops};
  MemoryTracker tracker;
};

EngineConfig make_config(int stage, DType dtype, bool offload, int micro) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = dtype;
  c.offload.optimizer = offload;
  c.micro_batches = micro;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 10;
  c.optimizer.adamw.weight_decay = 0.1f;
  return c;
}

struct Result {
  uint64_t hash = 0;
  std::vector<double> losses;
  std::vector<double> norms;
};

constexpr int kSteps = 5;

Result train_cpu(const EngineConfig& cfg) {
  MlpModel model(MlpShape{}, world().size(), world().rank(), cfg.micro_batches);
  MemoryTracker tracker;
  Engine engine(model, world(), cfg, &tracker);
  Result r;
  for (int s = 0; s < kSteps; ++s) {
    model.set_step(s);
    const StepStats st = engine.step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  r.hash = engine.param_hash();
  return r;
}

Result train_fake(const EngineConfig& cfg, FakeDeviceOps& ops, MemoryTracker& tracker) {
  MlpModel inner(MlpShape{}, world().size(), world().rank(), cfg.micro_batches);
  FakeDeviceModel model(inner, ops);
  FakeDeviceComm comm(world(), ops);
  Engine engine(model, comm, cfg, &tracker, &ops);
  Result r;
  for (int s = 0; s < kSteps; ++s) {
    inner.set_step(s);
    const StepStats st = engine.step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  r.hash = engine.param_hash();
  ops.synchronize();
  return r;
}

TEST(DevicePath, BitwiseEqualToTheCpuBackend) {
  for (DType dt : {DType::kF32, DType::kBF16}) {
    for (int stage = 0; stage <= 3; ++stage) {
      for (bool offload : {false, true}) {
        if (offload && stage == 0) continue;
        for (int micro : {1, 2}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " stage " << stage
                                            << (offload ? " offload" : "") << " micro " << micro);
          const EngineConfig cfg = make_config(stage, dt, offload, micro);
          const Result want = train_cpu(cfg);
          FakeDeviceOps ops;
          MemoryTracker tracker;
          const Result got = train_fake(cfg, ops, tracker);
          EXPECT_EQ(got.hash, want.hash);
          EXPECT_EQ(got.losses, want.losses);
          EXPECT_EQ(got.norms, want.norms);
          if (offload) {  // the staging path ran: shards down, updated shards up, host Adam
            EXPECT_GT(ops.async_downloads, 0);
            EXPECT_GT(ops.async_uploads, 0);
            EXPECT_EQ(ops.device_updates, 0);
          } else {
            EXPECT_EQ(ops.async_downloads, 0);
            EXPECT_GT(ops.device_updates, 0);
          }
        }
      }
    }
  }
}

TEST(DevicePath, StagingIsPlannedAndTracked) {
  for (int stage = 1; stage <= 3; ++stage) {
    const EngineConfig cfg = make_config(stage, DType::kBF16, true, 1);
    FakeRig rig;
    auto& [inner, ops, model, comm, tracker] = rig;
    Engine engine(model, comm, cfg, &tracker, &ops);
    // Staging: (G + P) bytes per shard element per unit, 64-byte aligned spans.
    int64_t staging = 0;
    for (size_t u = 0; u < engine.num_units(); ++u) {
      const int64_t s = engine.layout(u).shard_numel;
      staging += (4 * s + 63) / 64 * 64 + (2 * s + 63) / 64 * 64;
    }
    MemoryTracker cpu_tracker;
    MlpModel cpu_model(MlpShape{}, world().size(), world().rank(), 1);
    Engine cpu_engine(cpu_model, world(), cfg, &cpu_tracker);
    EXPECT_EQ(engine.planned_bytes(MemCategory::kHostOffload),
              cpu_engine.planned_bytes(MemCategory::kHostOffload) + staging)
        << "stage " << stage;
    // Every category the engine allocates is tracked as planned, the control buffer included.
    for (MemCategory c :
         {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster, MemCategory::kOptimizer,
          MemCategory::kCommBuffers, MemCategory::kHostOffload}) {
      EXPECT_EQ(tracker.current(c), engine.planned_bytes(c))
          << "stage " << stage << " " << mem_category_name(c);
    }
    EXPECT_EQ(engine.planned_bytes(MemCategory::kCommBuffers),
              cpu_engine.planned_bytes(MemCategory::kCommBuffers) +
                  8 * std::max<int64_t>(world().size(), 2 + engine.num_units()))
        << "stage " << stage;
  }
}

TEST(DevicePath, ShardStateCopiesRoundTrip) {
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage);
    const EngineConfig cfg = make_config(stage, DType::kBF16, false, 1);
    FakeRig rig;
    auto& [inner, ops, model, comm, tracker] = rig;
    Engine engine(model, comm, cfg, &tracker, &ops);
    inner.set_step(0);
    engine.step();
    // The host copies hold the state: write 2x master and 3x m through them, refresh, read back.
    std::vector<std::vector<float>> master, m;
    for (size_t u = 0; u < engine.num_units(); ++u) {
      UnitShardState st = engine.shard_state(u);
      for (int64_t i = 0; i < st.numel; ++i) {
        st.master[i] *= 2.0f;
        st.exp_avg[i] *= 3.0f;
      }
      master.emplace_back(st.master, st.master + st.numel);
      m.emplace_back(st.exp_avg, st.exp_avg + st.numel);
    }
    engine.refresh_params_from_master();
    for (size_t u = 0; u < engine.num_units(); ++u) {
      const UnitShardState st = engine.shard_state(u);
      EXPECT_EQ(std::vector<float>(st.master, st.master + st.numel), master[u]) << "unit " << u;
      EXPECT_EQ(std::vector<float>(st.exp_avg, st.exp_avg + st.numel), m[u]) << "unit " << u;
    }
    // And the compute-dtype parameters follow: the same model trained on from the doubled master
    // on the CPU backend gives the same bits.
    MlpModel cpu_model(MlpShape{}, world().size(), world().rank(), 1);
    MemoryTracker cpu_tracker;
    Engine cpu_engine(cpu_model, world(), cfg, &cpu_tracker);
    cpu_model.set_step(0);
    cpu_engine.step();
    for (size_t u = 0; u < cpu_engine.num_units(); ++u) {
      UnitShardState st = cpu_engine.shard_state(u);
      for (int64_t i = 0; i < st.numel; ++i) {
        st.master[i] *= 2.0f;
        st.exp_avg[i] *= 3.0f;
      }
    }
    cpu_engine.refresh_params_from_master();
    inner.set_step(1);
    cpu_model.set_step(1);
    EXPECT_EQ(engine.step().loss, cpu_engine.step().loss);
    EXPECT_EQ(engine.param_hash(), cpu_engine.param_hash());
  }
}

TEST(DevicePath, StaleHostCopiesAreNotUploaded) {
  // Host copies taken before a step are not written back by a later refresh: the result equals
  // the CPU backend's, where shard_state() addresses the state itself.
  const EngineConfig cfg = make_config(3, DType::kBF16, false, 1);
  FakeRig rig;
  auto& [inner, ops, model, comm, tracker] = rig;
  Engine engine(model, comm, cfg, &tracker, &ops);
  MlpModel cpu_model(MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker cpu_tracker;
  Engine cpu_engine(cpu_model, world(), cfg, &cpu_tracker);
  inner.set_step(0);
  cpu_model.set_step(0);
  engine.step();
  cpu_engine.step();
  for (size_t u = 0; u < engine.num_units(); ++u) {
    UnitShardState st = engine.shard_state(u);  // a save, say; then the copy is scribbled on
    for (int64_t i = 0; i < st.numel; ++i) st.master[i] = 0.0f;
  }
  inner.set_step(1);
  cpu_model.set_step(1);
  engine.step();
  cpu_engine.step();
  engine.refresh_params_from_master();
  cpu_engine.refresh_params_from_master();
  EXPECT_EQ(engine.param_hash(), cpu_engine.param_hash());
}

// [Note: offload on a device]: stages 2-3 copy each unit's gradient shard down as soon as its
// reduction is done, while later units' backward still runs; stages 1-2 start each unit's
// parameter all-gather right after its upload, before the next unit's upload.
TEST(DevicePath, OffloadCopiesOverlapTheStep) {
  for (int stage = 1; stage <= 3; ++stage) {
    SCOPED_TRACE(::testing::Message() << "stage " << stage);
    const EngineConfig cfg = make_config(stage, DType::kBF16, true, 1);
    FakeRig rig;
    auto& [inner, ops, model, comm, tracker] = rig;
    Engine engine(model, comm, cfg, &tracker, &ops);
    ops.trace.clear();
    inner.set_step(0);
    engine.step();
    const std::vector<std::string>& t = ops.trace;
    auto first = [&](const std::string& e) { return std::find(t.begin(), t.end(), e) - t.begin(); };
    auto last = [&](const std::string& e) {
      return t.rend() - std::find(t.rbegin(), t.rend(), e) - 1;
    };
    const auto units = static_cast<int64_t>(engine.num_units());
    EXPECT_EQ(std::count(t.begin(), t.end(), "D"), units);
    EXPECT_EQ(std::count(t.begin(), t.end(), "U"), units);
    if (stage >= 2) {  // the first download precedes the last unit's backward (unit 0)
      EXPECT_LT(first("D"), last("B0"));
    } else {
      EXPECT_GT(first("D"), last("B0"));
    }
    if (stage <= 2) {  // upload, gather, upload, gather, ...
      const auto u0 = first("U");
      for (int64_t i = 0; i < 2 * units; ++i) {
        ASSERT_LT(u0 + i, static_cast<int64_t>(t.size()));
        EXPECT_EQ(t[static_cast<size_t>(u0 + i)], i % 2 == 0 ? "U" : "G") << "at " << i;
      }
    } else {
      EXPECT_EQ(std::count(t.begin() + first("U"), t.end(), "G"), 0);  // gathered next forward
    }
  }
}

// The device path compares the same named settings as the CPU path, staged through device
// memory: a setting that differs on one rank is named with both values, on every rank.
TEST(DevicePath, DisagreeingSettingIsNamed) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  const bool odd = world().rank() == 1;
  auto refused = [](const EngineConfig& cfg) {
    FakeRig rig;
    auto& [inner, ops, model, comm, tracker] = rig;
    const std::string msg = error_of([&] { Engine e(model, comm, cfg, &tracker, &ops); });
    EXPECT_GT(ops.sync_uploads, 0) << "not staged through the device";
    return msg;
  };
  EngineConfig clip = make_config(3, DType::kBF16, false, 1);
  clip.clip_norm = odd ? 2.0f : 1.0f;
  EXPECT_EQ(refused(clip), "engine: ranks disagree on clip_norm: 1 on rank 0, 2 on rank 1");
  EngineConfig beta = make_config(1, DType::kF32, true, 2);
  beta.optimizer.adamw.beta2 = odd ? 0.99f : 0.95f;
  EXPECT_EQ(refused(beta),
            "engine: ranks disagree on optimizer.adamw.beta2: 0.949999988079071 on rank 0, "
            "0.9900000095367432 on rank 1");
  EXPECT_EQ(refused(make_config(2, DType::kBF16, false, 1)), "");  // the same everywhere
}

TEST(DevicePath, UnalignedViewsAreRefused) {
  // bf16 views need a multiple of 8 elements to start on 16-byte boundaries; the CPU takes any.
  EngineConfig cfg = make_config(3, DType::kBF16, false, 1);
  cfg.align = 4;
  FakeRig rig;
  auto& [inner, ops, model, comm, tracker] = rig;
  try {
    Engine engine(model, comm, cfg, &tracker, &ops);
    ADD_FAILURE() << "align 4 with bf16 accepted on a device";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("alignment of 4 elements puts bf16 views off 16-byte "
                                         "boundaries"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("multiple of 8 elements"), std::string::npos) << e.what();
  }
  cfg.align = 8;
  EXPECT_NO_THROW(Engine(model, comm, cfg, &tracker, &ops));
  MlpModel cpu_model(MlpShape{}, world().size(), world().rank(), 1);
  cfg.align = 4;
  EXPECT_NO_THROW(Engine(cpu_model, world(), cfg, &tracker));
}

}  // namespace
}  // namespace zs
