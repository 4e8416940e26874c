// Frozen parameters ([Note: frozen parameters] in unit/unit.h), run at 1, 2 and 4 ranks:
// frozen values never change, stages 0-3 give the same trainable parameters, frozen gradients
// are neither computed into memory nor communicated (byte counters against the formulas), the
// gathered frozen bytes (int8 included) and the tracker's frozen bytes equal the formulas, and
// bad input is refused with a message.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "collectives/mpi_communicator.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "mlp_model.h"
#include "planner/memory_plan.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::MlpModel;
using testing::MlpShape;

using testing::world;

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Unit 0 wholly frozen, unit 2's weight and the head's bias frozen (5 units: 4 hidden + head).
constexpr uint32_t kMask = 0b11u | (1u << 4) | (1u << 9);

MlpShape frozen_shape(uint32_t mask = kMask) {
  MlpShape s;
  s.frozen_mask = mask;
  return s;
}

EngineConfig make_config(int stage, DType compute, std::optional<DType> storage) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = compute;
  c.precision.grad_dtype = DType::kF32;
  c.frozen.storage = storage;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 10;
  c.optimizer.adamw.weight_decay = 0.1f;
  c.micro_batches = 2;
  c.prefetch = 1;
  return c;
}

struct TrainResult {
  uint64_t trainable_before = 0, trainable_after = 0;
  uint64_t frozen_before = 0, frozen_after = 0;
  std::vector<double> losses;
};

TrainResult train(const EngineConfig& cfg, int steps, MlpShape shape = frozen_shape()) {
  MlpModel model(shape, world().size(), world().rank(), cfg.micro_batches);
  MemoryTracker tracker;
  Engine engine(model, world(), cfg, &tracker);
  TrainResult r;
  r.trainable_before = engine.param_hash();
  r.frozen_before = engine.frozen_hash();
  for (int s = 0; s < steps; ++s) {
    model.set_step(s);
    r.losses.push_back(engine.step().loss);
  }
  r.trainable_after = engine.param_hash();
  r.frozen_after = engine.frozen_hash();
  return r;
}

struct Storage {
  DType compute;
  std::optional<DType> storage;
  const char* name;
};
const Storage kStorages[] = {{DType::kF32, std::nullopt, "fp32"},
                             {DType::kBF16, std::nullopt, "bf16"},
                             {DType::kBF16, DType::kF32, "bf16 compute, fp32 storage"},
                             {DType::kF32, DType::kI8, "int8 storage, fp32 compute"},
                             {DType::kBF16, DType::kI8, "int8 storage, bf16 compute"}};

// The frozen bytes are the same before and after training at every stage (with and without
// offload), and equal across stages; the trainable parameters moved and agree bit for bit
// across stages (one micro-batch: with more, stages 0-1 and 2-3 sum micro-batches in different
// orders, docs/engine.md).
TEST(Frozen, UnchangedAndStagesAgreeBitwise) {
  for (const Storage& st : kStorages) {
    SCOPED_TRACE(st.name);
    TrainResult ref;
    for (int stage = 0; stage <= 3; ++stage) {
      for (int offload = 0; offload <= (stage > 0 ? 1 : 0); ++offload) {
        SCOPED_TRACE(fmt::format("stage {} offload {}", stage, offload));
        EngineConfig c = make_config(stage, st.compute, st.storage);
        c.offload.optimizer = offload != 0;
        c.micro_batches = 1;
        const TrainResult r = train(c, 4);
        EXPECT_EQ(r.frozen_after, r.frozen_before);
        EXPECT_NE(r.trainable_after, r.trainable_before);
        if (stage == 0) {
          ref = r;
          continue;
        }
        EXPECT_EQ(r.frozen_before, ref.frozen_before);
        EXPECT_EQ(r.trainable_before, ref.trainable_before);
        EXPECT_EQ(r.trainable_after, ref.trainable_after);
        EXPECT_EQ(r.losses, ref.losses);
      }
    }
  }
}

// Freezing changes which parameters train, not the initial values: a frozen parameter stored in
// fp32 reads back as the same draw the trainable one gets.
TEST(Frozen, InitialValuesAreTheTrainableDraws) {
  const EngineConfig c = make_config(3, DType::kF32, std::nullopt);
  MlpModel frozen_model(frozen_shape(), world().size(), world().rank(), 2);
  MlpModel plain_model(MlpShape{}, world().size(), world().rank(), 2);
  Engine frozen(frozen_model, world(), c);
  Engine plain(plain_model, world(), c);
  ASSERT_EQ(frozen.frozen_specs(0).size(), 2u);
  EXPECT_EQ(frozen.param_specs(0).size(), 0u);
  EXPECT_EQ(frozen.gather_frozen_param(0, 0), plain.gather_master_param(0, 0));
  EXPECT_EQ(frozen.gather_frozen_param(0, 1), plain.gather_master_param(0, 1));
  EXPECT_EQ(frozen.gather_frozen_param(2, 0), plain.gather_master_param(2, 0));
  EXPECT_EQ(frozen.gather_master_param(2, 0), plain.gather_master_param(2, 1));  // unit 2 bias
  EXPECT_EQ(frozen.num_params() + frozen.num_frozen_params(), plain.num_params());
}

// int8 storage, sharded (stage 3): a rank that stores a matrix's row scales but not all its values
// gets the others' scales by exchange instead of drawing their rows
// (ParamGroup::set_frozen_collective). The stored bytes equal the replicated engine's (stage 0
// draws and encodes every record whole), at widths where records straddle the shard boundaries at 2
// and 4 ranks.
TEST(Frozen, ShardedInt8InitEqualsReplicated) {
  for (const int width : {20, 200, 333}) {
    SCOPED_TRACE(fmt::format("width {}", width));
    MlpShape shape = frozen_shape();
    shape.width = width;
    MlpModel m0(shape, world().size(), world().rank(), 1);
    MlpModel m3(shape, world().size(), world().rank(), 1);
    Engine e0(m0, world(), make_config(0, DType::kF32, DType::kI8));
    Engine e3(m3, world(), make_config(3, DType::kF32, DType::kI8));
    EXPECT_EQ(e3.frozen_hash(), e0.frozen_hash());
    for (size_t u = 0; u < e3.num_units(); ++u) {
      // One gather of the unit's frozen bytes, decoded on 3 threads: each equals the gather of
      // that parameter alone.
      const FrozenUnitBytes all = e3.gather_frozen_unit(u);
      ASSERT_EQ(all.records.size(), e3.frozen_specs(u).size());
      std::vector<float> decoded(7, -1.0f);  // a reused buffer of another size
      for (size_t f = 0; f < e3.frozen_specs(u).size(); ++f) {
        EXPECT_EQ(e3.gather_frozen_param(u, f), e0.gather_frozen_param(u, f))
            << "unit " << u << " frozen " << f;
        all.decode(f, decoded, 3);
        EXPECT_EQ(decoded, e0.gather_frozen_param(u, f)) << "unit " << u << " frozen " << f;
      }
    }
  }
}

// int8 storage: each element of a frozen matrix reads back within half its row's scale of the
// fp32 value (core/quantize.h's bound); vectors are stored in the compute dtype.
TEST(Frozen, Int8RoundTripWithinHalfAScalePerRow) {
  MlpModel m32(frozen_shape(), world().size(), world().rank(), 2);
  MlpModel m8(frozen_shape(), world().size(), world().rank(), 2);
  Engine e32(m32, world(), make_config(3, DType::kF32, std::nullopt));
  Engine e8(m8, world(), make_config(3, DType::kF32, DType::kI8));
  for (size_t u = 0; u < e8.num_units(); ++u) {
    for (size_t f = 0; f < e8.frozen_specs(u).size(); ++f) {
      const FrozenRecord& r = e8.frozen_layout(u).records[f];
      const std::vector<float> x = e32.gather_frozen_param(u, f);
      const std::vector<float> y = e8.gather_frozen_param(u, f);
      ASSERT_EQ(x.size(), y.size());
      if (r.dtype != DType::kI8) {
        EXPECT_EQ(x, y);  // a vector: kept in the compute dtype (fp32)
        continue;
      }
      for (int64_t row = 0; row < r.rows; ++row) {
        float absmax = 0.0f;
        for (int64_t j = 0; j < r.cols; ++j)
          absmax = std::max(absmax, std::fabs(x[row * r.cols + j]));
        const double bound = absmax / 127.0 * (0.5 + std::ldexp(1.0, -15));
        for (int64_t j = 0; j < r.cols; ++j) {
          EXPECT_LE(std::fabs(static_cast<double>(x[row * r.cols + j]) - y[row * r.cols + j]),
                    bound)
              << "unit " << u << " row " << row << " col " << j;
        }
      }
    }
  }
}

// The encoded size of one frozen parameter: int8 matrices hold one fp32 scale per row and one
// byte per element, everything else numel elements of its dtype (sharding/frozen_layout.h).
int64_t record_bytes(const ParamSpec& p, DType compute, DType storage) {
  if (storage == DType::kI8 && p.shape.size() == 2) return 4 * p.shape[0] + p.numel();
  return p.numel() * static_cast<int64_t>(dtype_size(storage == DType::kI8 ? compute : storage));
}

// Per-rank bytes of a unit's frozen byte group: records 64-byte aligned, split into world equal
// 64-byte multiples.
int64_t frozen_group_bytes(const std::vector<ParamSpec>& specs, DType compute, DType storage,
                           int world_size) {
  int64_t end = 0;
  for (const ParamSpec& p : specs) {
    if (!p.trainable) end = round_up(end, 64) + record_bytes(p, compute, storage);
  }
  return end == 0 ? 0 : round_up((end + world_size - 1) / world_size, 64) * world_size;
}

// Trainable elements of a unit's group, padded ([Note: padding] in sharding/layout.h).
int64_t trainable_padded(const std::vector<ParamSpec>& specs, int world_size, int64_t align) {
  int64_t end = 0;
  for (const ParamSpec& p : specs) {
    if (p.trainable) end = round_up(end, align) + p.numel();
  }
  return end == 0 ? 0 : round_up((end + world_size - 1) / world_size, align) * world_size;
}

// One stage-3 step with 2 micro-batches: every unit is gathered once in each forward and once in
// each backward; only trainable gradients are reduce-scattered (fp32), once per micro-batch.
TEST(Frozen, BytesOnTheWireAndInMemoryEqualTheFormulas) {
  const int n = world().size();
  for (const Storage& st : kStorages) {
    SCOPED_TRACE(st.name);
    const EngineConfig c = make_config(3, st.compute, st.storage);
    MlpModel model(frozen_shape(), n, world().rank(), c.micro_batches);
    MemoryTracker tracker;
    Engine engine(model, world(), c, &tracker);
    const DType storage = c.frozen.storage_or(st.compute);
    const int64_t P = static_cast<int64_t>(dtype_size(st.compute));
    int64_t gather = 0, reduce = 0, frozen_held = 0;
    for (size_t u = 0; u < model.num_units(); ++u) {
      const std::vector<ParamSpec> specs = model.unit(u).param_specs();
      const int64_t padded = trainable_padded(specs, n, c.align);
      const int64_t frozen_bytes = frozen_group_bytes(specs, st.compute, storage, n);
      gather += (n - 1) * (P * padded + frozen_bytes) / n;
      reduce += (n - 1) * 4 * padded / n;
      frozen_held += frozen_bytes / n;
    }
    world().reset_counters();
    model.set_step(0);
    engine.step();
    const ByteCounters& b = world().counters();
    const int k = c.micro_batches;
    EXPECT_EQ(b.sent[static_cast<int>(CollectiveKind::kAllGather)], 2 * k * gather);
    EXPECT_EQ(b.sent[static_cast<int>(CollectiveKind::kReduceScatter)], k * reduce);
    EXPECT_EQ(tracker.current(MemCategory::kFrozen), frozen_held);
    // The planner's figures are the tracker's, category by category.
    PlanConfig pc;
    pc.engine = c;
    pc.world = n;
    pc.rank = world().rank();
    const MemoryPlan plan = plan_memory(ModelDesc::from_model(model), pc);
    for (MemCategory cat :
         {MemCategory::kParams, MemCategory::kGrads, MemCategory::kMaster, MemCategory::kOptimizer,
          MemCategory::kFrozen, MemCategory::kCommBuffers, MemCategory::kHostOffload}) {
      EXPECT_EQ(plan.bytes(cat), tracker.current(cat)) << mem_category_name(cat);
    }
    EXPECT_EQ(plan.num_frozen_params, engine.num_frozen_params());
  }
}

// Gradient buffers, master and optimizer state cover the trainable parameters only.
TEST(Frozen, NoGradientMasterOrOptimizerStateForFrozenParameters) {
  const int n = world().size();
  for (int stage = 0; stage <= 3; ++stage) {
    EngineConfig c = make_config(stage, DType::kBF16, std::nullopt);
    MlpModel model(frozen_shape(), n, world().rank(), c.micro_batches);
    MemoryTracker tracker;
    Engine engine(model, world(), c, &tracker);
    int64_t padded = 0;
    for (size_t u = 0; u < model.num_units(); ++u) {
      padded += trainable_padded(model.unit(u).param_specs(), n, c.align);
    }
    const int64_t held = stage == 0 ? padded : padded / n;
    EXPECT_EQ(tracker.current(MemCategory::kMaster), 4 * held) << "stage " << stage;
    EXPECT_EQ(tracker.current(MemCategory::kOptimizer), 8 * held) << "stage " << stage;
    EXPECT_EQ(tracker.current(MemCategory::kGrads), 4 * (stage >= 2 ? padded / n : padded))
        << "stage " << stage;
  }
}

TEST(Frozen, SetFrozenParamRoundTripsAndChangesTheHash) {
  MlpModel model(frozen_shape(), world().size(), world().rank(), 2);
  Engine engine(model, world(), make_config(3, DType::kBF16, DType::kI8));
  const uint64_t before = engine.frozen_hash();
  const FrozenRecord& r = engine.frozen_layout(2).records[0];
  std::vector<float> v(static_cast<size_t>(r.numel));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = i % static_cast<size_t>(r.cols) == 0
               ? 127.0f
               : static_cast<float>(static_cast<int>(i % 255) - 127);
  }
  engine.set_frozen_param(2, 0, v.data());  // each row's absmax is 127: the scale is 1, exact
  EXPECT_EQ(engine.gather_frozen_param(2, 0), v);
  EXPECT_NE(engine.frozen_hash(), before);
}

// Checkpoints hold the trainable state only, plus the frozen base's hash: a resume on the same
// base continues bit for bit (here at another stage), a resume on another base is refused.
TEST(Frozen, CheckpointsSaveTrainableStateAndCheckTheBase) {
  const std::string dir = testing::shared_temp_dir("zs_frozen_");
  EngineConfig c = make_config(3, DType::kBF16, DType::kI8);
  c.micro_batches = 1;
  MlpModel straight_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine straight(straight_model, world(), c);
  std::string path;
  for (int s = 0; s < 4; ++s) {
    straight_model.set_step(s);
    straight.step();
    if (s == 1) path = save_checkpoint(straight, world(), dir);
  }
  EngineConfig c1 = c;
  c1.stage = ZeroStage::k1;  // bitwise equal to stage 3 at one micro-batch
  MlpModel resumed_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine resumed(resumed_model, world(), c1);
  load_checkpoint(resumed, world(), path);
  for (int s = 2; s < 4; ++s) {
    resumed_model.set_step(s);
    resumed.step();
  }
  EXPECT_EQ(resumed.param_hash(), straight.param_hash());
  EXPECT_EQ(resumed.frozen_hash(), straight.frozen_hash());

  MlpModel other_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine other(other_model, world(), c);
  std::vector<float> v = other.gather_frozen_param(2, 0);
  v[0] += 1.0f;
  other.set_frozen_param(2, 0, v.data());
  try {
    load_checkpoint(other, world(), path);
    ADD_FAILURE() << "a checkpoint of another base loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was trained on frozen base"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("give the same base"), std::string::npos) << e.what();
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

// safetensors: an export writes trainable and frozen parameters; an import sets both (here into
// an int8 base: quantized on the way in); `include` selects, `transform` rewrites, `optional`
// parameters may be absent.
TEST(Frozen, SafetensorsExportImportIncludeTransformOptional) {
  const std::string dir = testing::shared_temp_dir("zs_frozen_");
  const std::string all = dir + "/all.safetensors", part = dir + "/part.safetensors";
  EngineConfig c = make_config(3, DType::kF32, std::nullopt);
  c.micro_batches = 1;
  MlpModel src_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine src(src_model, world(), c);
  src_model.set_step(0);
  src.step();
  safetensors::ExportOptions o;
  o.create_directory = true;
  safetensors::export_model(src, world(), all, o);

  // Into a model with nothing frozen: every tensor is read as a trainable parameter.
  MlpModel plain_model(MlpShape{}, world().size(), world().rank(), 1);
  Engine plain(plain_model, world(), make_config(1, DType::kF32, std::nullopt));
  safetensors::import_model(plain, world(), all);
  EXPECT_EQ(plain.gather_master_param(0, 0), src.gather_frozen_param(0, 0));
  EXPECT_EQ(plain.gather_master_param(1, 0), src.gather_master_param(1, 0));
  EXPECT_EQ(plain.gather_master_param(4, 1), src.gather_frozen_param(4, 0));  // the head's bias

  // Into an int8 base: frozen matrices quantized as set_frozen_param does.
  MlpModel q_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine q(q_model, world(), make_config(2, DType::kBF16, DType::kI8));
  safetensors::import_model(q, world(), all);
  MlpModel ref_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine ref(ref_model, world(), make_config(2, DType::kBF16, DType::kI8));
  const std::vector<float> w = src.gather_frozen_param(2, 0);
  ref.set_frozen_param(2, 0, w.data());
  EXPECT_EQ(q.gather_frozen_param(2, 0), ref.gather_frozen_param(2, 0));
  EXPECT_EQ(q.gather_master_param(3, 0), src.gather_master_param(3, 0));

  // include: frozen parameters only; transform: doubled; optional: the trainable ones.
  o.include = [](const std::string&, const ParamSpec& p) { return !p.trainable; };
  o.transform_frozen = [](const std::string&, const std::string&, const safetensors::UnitValues&,
                          std::vector<float>& values) {
    for (float& x : values) x *= 2.0f;
  };
  safetensors::export_model(src, world(), part, o);
  MlpModel f_model(frozen_shape(), world().size(), world().rank(), 1);
  Engine f(f_model, world(), c);
  const uint64_t trainable_before = f.param_hash();
  safetensors::ImportOptions io;
  io.optional = [](const std::string&, const ParamSpec& p) { return p.trainable; };
  const safetensors::ImportReport rep = safetensors::import_model(f, world(), part, io);
  EXPECT_EQ(rep.absent.size(), 6u);  // 10 parameters, 4 frozen
  EXPECT_EQ(f.param_hash(), trainable_before);
  std::vector<float> doubled = src.gather_frozen_param(2, 0);
  for (float& x : doubled) x *= 2.0f;
  EXPECT_EQ(f.gather_frozen_param(2, 0), doubled);
  // Without `optional`, the missing trainable tensors are an error naming one.
  try {
    safetensors::import_model(f, world(), part);
    ADD_FAILURE() << "an import with missing tensors succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is missing"), std::string::npos) << e.what();
  }
  world().barrier();
  if (world().rank() == 0) std::filesystem::remove_all(dir);
}

TEST(Frozen, BadInputIsRefusedWithAMessage) {
  auto expect_error = [](const std::function<void()>& f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no error; expected one containing: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(
      [] {
        MlpModel model(frozen_shape(0x3ffu), world().size(), world().rank(), 1);
        Engine engine(model, world(), make_config(3, DType::kF32, std::nullopt));
      },
      "every parameter of the model is frozen");
  expect_error(
      [] {
        MlpShape s = frozen_shape();
        s.ask_frozen_grad = true;
        MlpModel model(s, world().size(), world().rank(), 1);
        EngineConfig c = make_config(3, DType::kF32, std::nullopt);
        c.micro_batches = 1;
        Engine engine(model, world(), c);
        engine.step();
      },
      "which is frozen (ParamSpec::trainable = false)");
  expect_error(
      [] {
        MlpModel model(frozen_shape(), world().size(), world().rank(), 1);
        Engine engine(model, world(), make_config(3, DType::kF32, DType::kF64));
      },
      "frozen parameter storage dtype fp64 is not one of fp32, bf16, fp16, int8");
  expect_error(
      [] {
        EngineConfig c = make_config(3, DType::kF32, DType::kBF16);
        c.frozen.int8_compute = FrozenPolicy::Int8Compute::kInt8Gemm;
        c.validate();
      },
      "frozen.int8_compute int8-gemm needs int8 storage of the frozen parameters (storage is "
      "bf16)");
}

// [Note: int8 compute]: int8 records of weights that accept them are handed to the units raw
// (dtype kI8 + row scales) instead of being dequantized. At fp32 compute the unit's q * scale is
// the engine's fp32 dequantization, so training is bitwise that of the dequantize path; the
// conversion buffer loses those records, and the planner still equals the tracker. Without the
// int8 GEMM (the AVX2 twin) int8-gemm is refused and auto dequantizes.
TEST(Frozen, Int8RecordsHandedToUnitsRaw) {
  using I8 = FrozenPolicy::Int8Compute;
  MlpShape shape = frozen_shape();
  shape.accepts_int8 = true;
  auto config = [](int stage, I8 mode) {
    EngineConfig c = make_config(stage, DType::kF32, DType::kI8);
    c.frozen.int8_compute = mode;
    return c;
  };
  auto plan_of = [&](const EngineConfig& c) {
    MlpModel model(shape, world().size(), world().rank(), c.micro_batches);
    PlanConfig pc;
    pc.engine = c;
    pc.world = world().size();
    pc.rank = world().rank();
    return plan_memory(ModelDesc::from_model(model), pc);
  };
  EXPECT_FALSE(config(3, I8::kDequantize).frozen.hands_int8());
  EXPECT_EQ(config(3, I8::kAuto).frozen.hands_int8(), int8_gemm_supported());
  if (!int8_gemm_supported()) {
    try {
      config(3, I8::kInt8Gemm).validate();
      ADD_FAILURE() << "int8-gemm accepted without VNNI";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("cannot run the int8 GEMM correctly"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(plan_of(config(3, I8::kAuto)).bytes(MemCategory::kCommBuffers),
              plan_of(config(3, I8::kDequantize)).bytes(MemCategory::kCommBuffers));
    GTEST_SKIP() << "no int8 GEMM on this process: raw int8 records are not handed over";
  }
  for (int stage : {0, 3}) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const TrainResult deq = train(config(stage, I8::kDequantize), 3, shape);
    const TrainResult raw = train(config(stage, I8::kInt8Gemm), 3, shape);
    EXPECT_EQ(raw.losses, deq.losses);
    EXPECT_EQ(raw.trainable_after, deq.trainable_after);
    EXPECT_EQ(raw.frozen_after, deq.frozen_after);
    EXPECT_NE(raw.trainable_after, raw.trainable_before);
    // The planner equals the tracker with raw records, and its conversion buffer is smaller.
    const EngineConfig c = config(stage, I8::kInt8Gemm);
    MlpModel model(shape, world().size(), world().rank(), c.micro_batches);
    MemoryTracker tracker;
    Engine engine(model, world(), c, &tracker);
    const MemoryPlan plan = plan_of(c);
    for (MemCategory cat : {MemCategory::kParams, MemCategory::kFrozen, MemCategory::kCommBuffers})
      EXPECT_EQ(plan.bytes(cat), tracker.current(cat)) << mem_category_name(cat);
    EXPECT_LT(plan.bytes(MemCategory::kCommBuffers),
              plan_of(config(stage, I8::kDequantize)).bytes(MemCategory::kCommBuffers));
  }
}

}  // namespace
}  // namespace zs
