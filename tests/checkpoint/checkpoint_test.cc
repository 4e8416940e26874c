// Multi-rank tests of sharded checkpoints and safetensors (run at 1, 2 and 4 ranks): exact
// round trips at every stage, resharding N -> M ranks across stages (writers on a
// sub-communicator), bitwise resume, atomic saves and keep-K, every kind of bad checkpoint
// (truncated, flipped bytes, missing files, wrong version, other model) failing on every rank
// with nothing loaded, and safetensors export/import.
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../runtime/mlp_model.h"
#include "../runtime/test_world.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/save_dir.h"
#include "collectives/mpi_communicator.h"
#include "core/convert.h"
#include "core/error.h"
#include "optim/state_adam.h"
#include "runtime/engine.h"

namespace zs {
namespace {

namespace fs = std::filesystem;
using testing::MlpModel;
using testing::MlpShape;

using testing::TempDir;
using testing::world;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

EngineConfig make_config(int stage, DType dtype = DType::kBF16,
                         OptimizerKind kind = OptimizerKind::kAdamW) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = dtype;
  c.optimizer.kind = kind;
  c.optimizer.sgd.momentum = 0.9f;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 20;
  c.optimizer.adamw.weight_decay = 0.1f;
  c.clip_norm = 1.0f;
  if (dtype == DType::kF16) {  // a scaler whose state changes within a few steps
    c.loss_scale.dynamic = true;
    c.loss_scale.initial = 1024.0f;
    c.loss_scale.growth_interval = 2;
    c.loss_scale_set = true;
  }
  return c;
}

// A model and its engine on one communicator.
struct Rig {
  Rig(Communicator& comm, const EngineConfig& cfg, MlpShape shape = {})
      : model(shape, comm.size(), comm.rank(), cfg.micro_batches),
        engine(model, comm, cfg, &tracker) {}
  std::vector<StepStats> train(int steps) {
    std::vector<StepStats> out;
    for (int i = 0; i < steps; ++i) {
      model.set_step(engine.steps_taken());
      out.push_back(engine.step());
    }
    return out;
  }
  MemoryTracker tracker;
  MlpModel model;
  Engine engine;
};

// The full fp32 values of one state of a unit (padded group), on every rank.
std::vector<float> gather_state(Engine& e, Communicator& comm, size_t u, int which) {
  const UnitShardState st = e.shard_state(u);
  const float* src = which == 0 ? st.master : which == 1 ? st.exp_avg : st.exp_avg_sq;
  const GroupLayout& l = e.layout(u);
  std::vector<float> full(static_cast<size_t>(l.padded_numel));
  if (src == nullptr) return {};
  if (st.numel == l.padded_numel) {
    std::memcpy(full.data(), src, full.size() * 4);
  } else {
    comm.all_gather(src, full.data(), static_cast<size_t>(st.numel), DType::kF32);
  }
  return full;
}

// Every state of every parameter without padding, so snapshots compare across world sizes.
struct Snapshot {
  std::vector<std::vector<float>> values;  // [unit * 3 + state]
  int64_t step = 0;
  optim::LossScalerState scaler;
};

Snapshot snapshot(Engine& e, Communicator& comm) {
  Snapshot s;
  s.step = e.steps_taken();
  s.scaler = e.loss_scaler_state();
  for (size_t u = 0; u < e.num_units(); ++u) {
    for (int which = 0; which < 3; ++which) {
      const std::vector<float> full = gather_state(e, comm, u, which);
      std::vector<float> v;
      if (!full.empty()) {
        for (const ParamSlot& slot : e.layout(u).params)
          v.insert(v.end(), full.begin() + slot.offset, full.begin() + slot.offset + slot.numel);
      }
      s.values.push_back(std::move(v));
    }
  }
  return s;
}

void expect_same(const Snapshot& a, const Snapshot& b, const std::string& what) {
  EXPECT_EQ(a.step, b.step) << what;
  EXPECT_EQ(a.scaler.scale, b.scaler.scale) << what;
  EXPECT_EQ(a.scaler.good_steps, b.scaler.good_steps) << what;
  EXPECT_EQ(a.scaler.hysteresis_left, b.scaler.hysteresis_left) << what;
  ASSERT_EQ(a.values.size(), b.values.size()) << what;
  for (size_t i = 0; i < a.values.size(); ++i) {
    ASSERT_EQ(a.values[i].size(), b.values[i].size()) << what << " unit " << i / 3;
    EXPECT_EQ(0, std::memcmp(a.values[i].data(), b.values[i].data(), a.values[i].size() * 4))
        << what << ": unit " << i / 3 << " state " << i % 3 << " differs";
  }
}

void expect_error(const std::function<void()>& fn, ErrorCode code, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected " << error_code_name(code) << " mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(error_code_name(e.code()), std::string(error_code_name(code))) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message does not name " << needle << ": " << e.what();
  }
}

// Runs fn on rank 0 only, then a barrier.
void on_rank0(const std::function<void()>& fn) {
  if (world().rank() == 0) fn();
  world().barrier();
}

void flip_byte(const std::string& path, int64_t pos) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(pos);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x01);
  f.seekp(pos);
  f.write(&c, 1);
}

// ---------------------------------------------------------------------------------------------

TEST(CheckpointFormat, ShardHeaderRoundTripAndRejects) {
  ckpt::ShardHeader h;
  h.rank = 1;
  h.world = 3;
  h.state_mask = ckpt::kStateAll;
  h.step = 42;
  h.units = {{0, 10}, {64, 7}, {5, 0}};
  const std::vector<std::byte> bytes = ckpt::serialize_shard_header(h);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), h.header_bytes());
  EXPECT_EQ(bytes.size() % 64, 0u);
  const ckpt::ShardHeader g = ckpt::parse_shard_header(bytes);
  EXPECT_EQ(g.units, h.units);
  EXPECT_EQ(g.step, 42);
  EXPECT_EQ(g.data_bytes(), 17 * 4 * 3);
  EXPECT_EQ(h.offset_of(1, 2, 66), h.header_bytes() + 10 * 12 + (2 * 7 + 2) * 4);
  std::vector<std::byte> bad = bytes;
  bad[0] = std::byte{'X'};
  expect_error([&] { ckpt::parse_shard_header(bad); }, ErrorCode::kCorruptData, "magic");
  bad = bytes;
  bad[8] = std::byte{2};
  expect_error([&] { ckpt::parse_shard_header(bad); }, ErrorCode::kInvalidArgument, "version 2");
  expect_error([&] { ckpt::parse_shard_header(std::span(bytes).first(70)); },
               ErrorCode::kCorruptData, "truncated");
}

TEST(CheckpointFormat, ManifestRejectsGarbage) {
  expect_error([] { ckpt::parse_manifest("{"); }, ErrorCode::kCorruptData, "JSON");
  expect_error([] { ckpt::parse_manifest("[]"); }, ErrorCode::kCorruptData, "object");
  expect_error(
      [] { ckpt::parse_manifest(R"({"format":"zeroshard-checkpoint","format_version":9})"); },
      ErrorCode::kInvalidArgument, "version 9");
}

TEST(Checkpoint, ExactRoundTripEveryStage) {
  TempDir dir;
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Rig a(world(), make_config(stage, stage == 2 ? DType::kF16 : DType::kBF16));
    a.train(3);
    const Snapshot before = snapshot(a.engine, world());
    const uint64_t hash = a.engine.param_hash();
    CheckpointSaveOptions opt;
    opt.trainer_state = R"({"cursor": 123, "rng": 18446744073709551615})";
    const std::string path =
        save_checkpoint(a.engine, world(), dir / ("s" + std::to_string(stage)), opt);
    EXPECT_EQ(fs::path(path).filename(), "step-00000003");
    // Stage 0 writes one file; the others one per rank.
    int files = 0;
    for (const auto& d : fs::directory_iterator(path)) files += d.path().extension() == ".bin";
    EXPECT_EQ(files, stage == 0 ? 1 : world().size());

    Rig b(world(), make_config(stage, stage == 2 ? DType::kF16 : DType::kBF16));
    const CheckpointInfo info = load_checkpoint(b.engine, world(), path);
    EXPECT_EQ(info.step, 3);
    EXPECT_EQ(info.world_size, world().size());
    EXPECT_EQ(info.stage, stage);
    EXPECT_EQ(nlohmann::json::parse(info.trainer_state)["rng"].get<uint64_t>(),
              18446744073709551615ull);
    expect_same(before, snapshot(b.engine, world()), "round trip");
    EXPECT_EQ(hash, b.engine.param_hash());
  }
}

// Writers on a sub-communicator of w ranks, readers on the world: 1->W, 2->W, W->W, across stages.
TEST(Checkpoint, ReshardAnyWorldAnyStage) {
  const int W = world().size();
  const std::pair<int, int> stages[] = {{0, 3}, {3, 1}, {1, 0}, {2, 3}, {3, 2}};
  for (int w : {1, 2, 4}) {
    if (w > W) continue;
    const int color = world().rank() < w ? 0 : 1;
    std::unique_ptr<Communicator> sub = world().split(color, world().rank());
    for (const auto& [sw, sr] : stages) {
      SCOPED_TRACE(fmt::format("{} ranks stage {} -> {} ranks stage {}", w, sw, W, sr));
      TempDir dir;
      Snapshot saved;
      std::string path;
      if (color == 0) {
        // fp32 writer, bf16 reader: precision may differ too.
        Rig a(*sub, make_config(sw, DType::kF32));
        a.train(2);
        saved = snapshot(a.engine, *sub);
        path = save_checkpoint(a.engine, *sub, dir.path());
      }
      world().barrier();
      Rig b(world(), make_config(sr, DType::kBF16));
      const CheckpointInfo info = load_checkpoint(b.engine, world(), dir / "step-00000002");
      EXPECT_EQ(info.world_size, w);
      EXPECT_EQ(info.stage, sw);
      const Snapshot loaded = snapshot(b.engine, world());
      if (world().rank() == 0) expect_same(saved, loaded, "resharded");
      // And the other way: the world writes, the sub-communicator reads.
      TempDir back;
      save_checkpoint(b.engine, world(), back.path());
      if (color == 0) {
        Rig c(*sub, make_config(sw, DType::kF32));
        load_checkpoint(c.engine, *sub, back / "step-00000002");
        const Snapshot again = snapshot(c.engine, *sub);
        if (sub->rank() == 0) expect_same(saved, again, "resharded back");
      }
    }
  }
}

// Also with bf16 and int8 moments saved and loaded in pieces of 100 elements (raised to the int8
// block, 64; cuts inside segments that are not multiples of the block): the files are byte for
// byte those of a save in one piece per unit, and the resume is bitwise.
TEST(Checkpoint, ResumeIsBitwise) {
  struct Case {
    int stage;
    DType dtype;
    OptimizerKind opt;
    optim::StateDType states = optim::StateDType::kF32;
    int64_t piece = kStatePieceNumel;
  };
  const Case cases[] = {{0, DType::kBF16, OptimizerKind::kAdamW},
                        {1, DType::kF32, OptimizerKind::kAdamW},
                        {2, DType::kF16, OptimizerKind::kAdamW},
                        {3, DType::kBF16, OptimizerKind::kAdamW},
                        {3, DType::kF32, OptimizerKind::kSgd},
                        {3, DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kI8, 100},
                        {0, DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kI8, 100},
                        {2, DType::kBF16, OptimizerKind::kAdamW, optim::StateDType::kBF16, 100}};
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("stage {} {} {} states {} pieces of {}", c.stage, dtype_name(c.dtype),
                             c.opt == OptimizerKind::kSgd ? "sgd" : "adamw",
                             optim::state_dtype_name(c.states), c.piece));
    EngineConfig config = make_config(c.stage, c.dtype, c.opt);
    config.optimizer.state_dtype = c.states;
    config.optimizer.state_block = 64;
    config.optimizer.state_min_numel = 0;
    TempDir dir;
    Rig a(world(), config);
    a.train(3);
    CheckpointSaveOptions save;
    save.state_piece_numel = c.piece;
    const std::string path = save_checkpoint(a.engine, world(), dir / "pieces", save);
    if (c.piece != kStatePieceNumel) {  // the same bytes as a save of whole units
      const std::string whole = save_checkpoint(a.engine, world(), dir / "whole");
      world().barrier();
      for (const auto& f : fs::directory_iterator(whole)) {
        if (f.path().extension() != ".bin") continue;
        EXPECT_EQ(read_file(f.path()), read_file(fs::path(path) / f.path().filename()))
            << f.path().filename();
      }
    }
    const std::vector<StepStats> cont = a.train(4);
    const uint64_t hash = a.engine.param_hash();

    Rig b(world(), config);
    CheckpointLoadOptions load;
    load.state_piece_numel = c.piece;
    load_checkpoint(b.engine, world(), path, load);
    const std::vector<StepStats> resumed = b.train(4);
    EXPECT_EQ(param_hash_hex(hash), param_hash_hex(b.engine.param_hash()));
    for (size_t i = 0; i < cont.size(); ++i) {
      EXPECT_EQ(cont[i].loss, resumed[i].loss) << "step " << cont[i].step;
      EXPECT_EQ(cont[i].step, resumed[i].step);
      EXPECT_EQ(cont[i].loss_scale, resumed[i].loss_scale);
      EXPECT_EQ(cont[i].lr, resumed[i].lr);
    }
  }
}

// A checkpoint is never written from non-finite parameters: every rank refuses (even when one
// rank's shard is bad), nothing is left behind, and the last good checkpoint stays the latest.
TEST(Checkpoint, RefusesNonFiniteParameters) {
  TempDir dir;
  Rig a(world(), make_config(3));
  a.train(1);
  const std::string good = save_checkpoint(a.engine, world(), dir.path());
  a.train(1);
  if (world().rank() == world().size() - 1) {
    const UnitShardState st = a.engine.shard_state(2);
    st.master[0] = std::numeric_limits<float>::quiet_NaN();
  }
  expect_error([&] { save_checkpoint(a.engine, world(), dir.path()); }, ErrorCode::kNonFinite,
               "unit 'hidden.2' holds a non-finite fp32 master value");
  world().barrier();
  EXPECT_FALSE(fs::exists(dir / "step-00000002"));
  EXPECT_FALSE(fs::exists(dir / ".tmp-step-00000002"));
  ASSERT_TRUE(latest_checkpoint(dir.path()).has_value());
  EXPECT_EQ(*latest_checkpoint(dir.path()), good);
  // Nor an export.
  expect_error([&] { safetensors::export_model(a.engine, world(), dir / "nan.safetensors"); },
               ErrorCode::kNonFinite, "safetensors export");
  world().barrier();
  EXPECT_FALSE(fs::exists(dir / "nan.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "nan.safetensors.tmp"));
}

// [Note: fault injection]: counts the write points it is asked about and, on the chosen rank,
// fails the fail_at-th one with `kind`.
class PlannedFault : public zs::FaultInjector {
 public:
  PlannedFault(int fail_at, zs::Fault kind) : fail_at_(fail_at), kind_(kind) {}
  zs::Fault at(const char* op, const std::string& path) override {
    if (count_++ != fail_at_) return zs::Fault::kNone;
    where_ = std::string(op) + " " + path;
    return kind_;
  }
  int count() const { return count_; }
  const std::string& where() const { return where_; }

 private:
  int fail_at_;
  zs::Fault kind_;
  int count_ = 0;
  std::string where_;
};

// Every write point of a save (each file's creation, writes, fsync and close, the directory
// syncs, the rename) failed in turn with ENOSPC, EIO and a short write, on rank 0 (which writes
// the most: its shard, the manifest, the commit): every rank reports the error, and the latest
// complete checkpoint still loads to its exact parameters.
TEST(FaultInjection, EveryWritePointOfASaveFailsCleanly) {
  TempDir dir;
  Rig a(world(), make_config(3));
  a.train(1);
  save_checkpoint(a.engine, world(), dir.path());
  const uint64_t first = a.engine.param_hash();
  a.train(1);
  const uint64_t second = a.engine.param_hash();
  PlannedFault counter(-1, zs::Fault::kNone);
  zs::install_fault_injector(&counter);
  {
    TempDir other;
    save_checkpoint(a.engine, world(), other.path());
  }
  zs::install_fault_injector(nullptr);
  int points = counter.count();
  MPI_Bcast(&points, 1, MPI_INT, 0, MPI_COMM_WORLD);
  ASSERT_GE(points, 8) << "a save has at least create/write/fsync/close of two files";
  int failures = 0;
  for (zs::Fault kind : {zs::Fault::kNoSpace, zs::Fault::kIo, zs::Fault::kShortWrite}) {
    const char* text = kind == zs::Fault::kIo ? "Input/output error" : "No space left on device";
    for (int k = 0; k < points; ++k) {
      PlannedFault plan(world().rank() == 0 ? k : -1, kind);
      zs::install_fault_injector(&plan);
      bool threw = false;
      try {
        save_checkpoint(a.engine, world(), dir.path());
      } catch (const Error& e) {
        threw = true;
        EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      }
      zs::install_fault_injector(nullptr);
      int any = threw ? 1 : 0, all = 0;
      MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      // A short write only bites at a write(2); elsewhere it is no fault and the save succeeds.
      EXPECT_TRUE(all == 0 || all == world().size()) << "some ranks failed, some did not";
      if (kind != zs::Fault::kShortWrite || world().rank() != 0 ||
          plan.where().rfind("write ", 0) == 0) {
        if (world().rank() == 0) {
          EXPECT_TRUE(threw) << "no error at " << plan.where();
        }
      }
      failures += threw;
      // Whatever the point, the latest complete checkpoint loads to the bits it was saved with.
      world().barrier();
      const std::optional<std::string> latest = latest_checkpoint(dir.path());
      ASSERT_TRUE(latest.has_value());
      Rig b(world(), make_config(3));
      load_checkpoint(b.engine, world(), *latest);
      const uint64_t h = b.engine.param_hash();
      EXPECT_TRUE(h == first || h == second) << "fault at " << plan.where();
      if (latest->find("step-00000002") != std::string::npos) {
        EXPECT_EQ(h, second);
      }
    }
  }
  if (world().rank() == 0) {
    std::printf("%d write points per save on rank 0; %d injected faults failed the save\n", points,
                failures);
  }
}

TEST(Checkpoint, InterruptedSaveLeavesPreviousCheckpoint) {
  TempDir dir;
  Rig a(world(), make_config(3));
  a.train(2);
  const std::string good = save_checkpoint(a.engine, world(), dir.path());
  // A save killed while writing shards, and one killed before its manifest was written.
  on_rank0([&] {
    fs::create_directory(dir / ".tmp-step-00000004");
    std::ofstream(dir / ".tmp-step-00000004/shard-00000.bin") << "partial";
    fs::create_directory(dir / "step-00000005");
    std::ofstream(dir / "step-00000005/shard-00000.bin") << "partial";
  });
  ASSERT_TRUE(latest_checkpoint(dir.path()).has_value());
  EXPECT_EQ(*latest_checkpoint(dir.path()), good);
  expect_error([&] { load_checkpoint(a.engine, world(), dir / "step-00000005"); },
               ErrorCode::kNotFound, "step-00000005/manifest.json");
  Rig b(world(), make_config(3));
  load_checkpoint(b.engine, world(), *latest_checkpoint(dir.path()));
  EXPECT_EQ(a.engine.param_hash(), b.engine.param_hash());
  // The next save removes the stale temporary directory.
  b.train(1);
  save_checkpoint(b.engine, world(), dir.path());
  EXPECT_FALSE(fs::exists(dir / ".tmp-step-00000004"));
  EXPECT_FALSE(latest_checkpoint(dir / "nonexistent").has_value());
}

TEST(Checkpoint, KeepsLastK) {
  TempDir dir;
  Rig a(world(), make_config(1));
  CheckpointSaveOptions opt;
  opt.keep = 2;
  for (int i = 0; i < 4; ++i) {
    a.train(1);
    save_checkpoint(a.engine, world(), dir.path(), opt);
  }
  // Saving the same step again replaces it.
  save_checkpoint(a.engine, world(), dir.path(), opt);
  std::vector<std::string> names;
  for (const auto& d : fs::directory_iterator(dir.path())) names.push_back(d.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000003", "step-00000004"}));
  EXPECT_EQ(*latest_checkpoint(dir.path()), dir / "step-00000004");
}

// Bad checkpoints: every case fails on every rank with the file named and the engine unchanged.
class BadCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>();
    Rig a(world(), make_config(3));
    a.train(2);
    CheckpointSaveOptions opt;
    opt.model_description = R"({"layers": 4})";
    source_ = save_checkpoint(a.engine, world(), dir_->path() + "/src", opt);
    target_ = std::make_unique<Rig>(world(), make_config(1));
    target_->train(1);
    hash_ = target_->engine.param_hash();
  }
  void TearDown() override {
    target_.reset();
    dir_.reset();
  }
  // A fresh copy of the good checkpoint to damage.
  std::string copy() {
    const std::string p = *dir_ / ("case" + std::to_string(cases_++));
    on_rank0([&] { fs::copy(source_, p); });
    return p;
  }
  // `unchanged`: the error is found before the engine is touched (manifest, compatibility,
  // checksums); a value refused under a valid checksum is found while the state is read, which
  // leaves it unspecified ([Note: load phases] in checkpoint.cc).
  void expect_fails(const std::string& path, ErrorCode code, const std::string& needle,
                    CheckpointLoadOptions opt = {}, bool unchanged = true) {
    expect_error([&] { load_checkpoint(target_->engine, world(), path, opt); }, code, needle);
    if (unchanged) {
      EXPECT_EQ(hash_, target_->engine.param_hash()) << "state changed by a failed load";
    }
    EXPECT_EQ(target_->engine.steps_taken(), 1);
  }
  std::unique_ptr<TempDir> dir_;
  std::string source_;
  std::unique_ptr<Rig> target_;
  uint64_t hash_ = 0;
  int cases_ = 0;
};

TEST_F(BadCheckpoint, Truncated) {
  const std::string p = copy();
  on_rank0(
      [&] { fs::resize_file(p + "/shard-00000.bin", fs::file_size(p + "/shard-00000.bin") - 9); });
  expect_fails(p, ErrorCode::kCorruptData, "shard-00000.bin: truncated");
  const std::string q = copy();
  on_rank0([&] { fs::resize_file(q + "/manifest.json", fs::file_size(q + "/manifest.json") / 2); });
  expect_fails(q, ErrorCode::kCorruptData, "manifest.json");
}

TEST_F(BadCheckpoint, FlippedByteAnywhereInShards) {
  const int files = world().size();
  for (int r = 0; r < files; ++r) {
    const std::string name = fmt::format("shard-{:05d}.bin", r);
    const int64_t size = static_cast<int64_t>(fs::file_size(source_ + "/" + name));
    for (int64_t pos : {int64_t{0}, int64_t{8}, int64_t{20}, int64_t{33}, int64_t{64}, int64_t{200},
                        size / 2, size - 1}) {
      SCOPED_TRACE(fmt::format("{} byte {}", name, pos));
      const std::string p = copy();
      on_rank0([&] { flip_byte(p + "/" + name, pos); });
      expect_fails(p, ErrorCode::kCorruptData, name + ": checksum mismatch");
    }
  }
}

TEST_F(BadCheckpoint, FlippedByteInManifest) {
  const int64_t size = static_cast<int64_t>(fs::file_size(source_ + "/manifest.json"));
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t pos = i * (size - 2) / 23;  // spread over the file, first and last characters
    const std::string p = copy();
    on_rank0([&] { flip_byte(p + "/manifest.json", pos); });
    try {
      load_checkpoint(target_->engine, world(), p);
      // A flip in insignificant whitespace (' ' <-> '!' is not one) would be harmless; JSON
      // whitespace here is only ' ' and '\n', whose flips are not whitespace: never reached.
      ADD_FAILURE() << "flip at byte " << pos << " not detected";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kCorruptData || e.code() == ErrorCode::kInvalidArgument)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("manifest.json"), std::string::npos) << e.what();
    }
    EXPECT_EQ(hash_, target_->engine.param_hash());
  }
}

TEST_F(BadCheckpoint, MissingFiles) {
  const std::string p = copy();
  const std::string victim = fmt::format("shard-{:05d}.bin", world().size() - 1);
  on_rank0([&] { fs::remove(p + "/" + victim); });
  expect_fails(p, ErrorCode::kNotFound, victim + ": file not found");
  const std::string q = copy();
  on_rank0([&] { fs::remove(q + "/manifest.json"); });
  expect_fails(q, ErrorCode::kNotFound, "manifest.json");
  expect_fails(*dir_ / "nowhere", ErrorCode::kNotFound, "nowhere");
}

TEST_F(BadCheckpoint, WrongFormatVersion) {
  const std::string p = copy();
  on_rank0([&] {
    std::ifstream in(p + "/manifest.json");
    nlohmann::json j = nlohmann::json::parse(in);
    j["format_version"] = 2;
    std::ofstream(p + "/manifest.json") << j.dump(1);
  });
  expect_fails(p, ErrorCode::kInvalidArgument, "format version 2");
}

TEST_F(BadCheckpoint, OtherModel) {
  MlpShape wide;
  wide.width = 24;
  Rig w(world(), make_config(1), wide);
  expect_error([&] { load_checkpoint(w.engine, world(), source_); }, ErrorCode::kInvalidArgument,
               "[24, 13] in the model");
  MlpShape deep;
  deep.hidden_layers = 5;
  Rig d(world(), make_config(1), deep);
  expect_error([&] { load_checkpoint(d.engine, world(), source_); }, ErrorCode::kInvalidArgument,
               "5 units in the checkpoint, 6 in the model");
  Rig s(world(), make_config(1, DType::kBF16, OptimizerKind::kSgd));
  expect_error([&] { load_checkpoint(s.engine, world(), source_); }, ErrorCode::kInvalidArgument,
               "optimizer adamw in the checkpoint");
  CheckpointLoadOptions opt;
  opt.expect_model_description = R"({"layers": 5})";
  expect_fails(source_, ErrorCode::kInvalidArgument,
               "its description differs at \"layers\": 4 in the checkpoint, 5 in the model", opt);
  // Named before the consequences (here a different optimizer), and by its key.
  opt.expect_model_description = R"({"layers": 4, "lora-alpha": 16.0})";
  expect_error([&] { load_checkpoint(s.engine, world(), source_, opt); },
               ErrorCode::kInvalidArgument, "\"lora-alpha\" is absent in the checkpoint, 16.0");
  opt.expect_model_description = R"({ "layers" : 4 })";
  load_checkpoint(target_->engine, world(), source_, opt);  // semantically equal: loads
}

// The manifest of a checkpoint copy, edited by `edit` on rank 0 and written back with its
// checksums fixed up (each file's XXH3 recomputed), so that only the check under test can
// catch what was patched.
void rewrite_manifest(const std::string& dir,
                      const std::function<void(ckpt::Manifest&)>& edit = nullptr) {
  on_rank0([&] {
    const std::string path = dir + "/manifest.json";
    ckpt::Manifest m = ckpt::parse_manifest(ckpt::read_whole_file(path, 1 << 26));
    if (edit) edit(m);
    for (ckpt::FileEntry& f : m.files) {
      const ckpt::InFile in(dir + "/" + f.name);
      f.size = in.size();
      f.xxh3 = in.hash();
    }
    std::ofstream(path, std::ios::trunc) << ckpt::serialize_manifest(m);
  });
}

// The first element of the first parameter the last shard file holds: its unit and parameter
// names, its index in the parameter, and its byte offset in the file for state position
// `state_pos`. Reads only the manifest; on any rank.
struct Element {
  std::string unit, param;
  int64_t index = -1, offset = -1;
};
Element first_element_of_last_file(const std::string& dir, int state_pos) {
  const ckpt::Manifest m =
      ckpt::parse_manifest(ckpt::read_whole_file(dir + "/manifest.json", 1 << 26));
  const ckpt::FileEntry& f = m.files.back();
  ckpt::ShardHeader h;
  h.state_mask = m.state_mask;
  h.units = f.units;
  for (size_t u = 0; u < m.units.size(); ++u) {
    for (const ckpt::ParamEntry& p : m.units[u].params) {
      const int64_t lo = std::max(p.offset, f.units[u].begin);
      if (lo >= std::min(p.offset + p.numel, f.units[u].begin + f.units[u].numel)) continue;
      return {m.units[u].name, p.name, lo - p.offset, h.offset_of(u, state_pos, lo)};
    }
  }
  ADD_FAILURE() << "no parameter element in " << f.name;
  return {};
}

void write_float(const std::string& path, int64_t offset, float value) {
  std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(offset);
  io.write(reinterpret_cast<const char*>(&value), sizeof(value));
}

// [Note: loaded values] A value no run can continue from, under a valid checksum: refused on every
// rank, naming the file, unit, parameter and state; the step is not taken over, the state is
// unspecified (found while it is read).
TEST_F(BadCheckpoint, NonFiniteValuesRefused) {
  const std::string last = fmt::format("shard-{:05d}.bin", world().size() - 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const struct {
    int state;
    float value;
    const char* text;
  } cases[] = {{0, nan, "master holds a non-finite value (nan)"},
               {1, -inf, "exp_avg holds a non-finite value (-inf)"},
               {2, nan, "exp_avg_sq holds a non-finite value (nan)"},
               {2, -1e-3f, "exp_avg_sq holds a negative value (-0.001)"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string p = copy();
    const Element e = first_element_of_last_file(p, c.state);
    on_rank0([&] { write_float(p + "/" + last, e.offset, c.value); });
    rewrite_manifest(p);
    expect_fails(p, ErrorCode::kNonFinite,
                 fmt::format("{}: unit '{}' parameter '{}': {} at element {}: refusing to load it",
                             last, e.unit, e.param, c.text, e.index),
                 {}, false);
  }
  // A zero second moment (even -0) is one a run continues from.
  const std::string z = copy();
  const Element e = first_element_of_last_file(z, 2);
  on_rank0([&] { write_float(z + "/" + last, e.offset, -0.0f); });
  rewrite_manifest(z);
  Rig b(world(), make_config(1));
  load_checkpoint(b.engine, world(), z);
}

// A header that differs from its manifest entry is named by its first differing field, with both
// values (not by fields that agree).
TEST_F(BadCheckpoint, HeaderMismatchNamesTheField) {
  const std::string last = fmt::format("shard-{:05d}.bin", world().size() - 1);
  const std::string p = copy();
  int64_t begin = 0, end = 0;
  on_rank0([&] {  // the last file's range of unit 0 moves by one element in its header
    const std::string path = p + "/" + last;
    std::vector<std::byte> bytes(static_cast<size_t>(fs::file_size(path)));
    std::ifstream(path, std::ios::binary)
        .read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ckpt::ShardHeader h = ckpt::parse_shard_header(bytes);
    begin = h.units[0].begin;
    end = begin + h.units[0].numel;
    h.units[0].begin += 1;
    const std::vector<std::byte> head = ckpt::serialize_shard_header(h);
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  });
  rewrite_manifest(p);
  MPI_Bcast(&begin, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  MPI_Bcast(&end, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  expect_fails(p, ErrorCode::kCorruptData,
               fmt::format("{}: the header does not match the manifest: unit 0 (hidden.0) holds "
                           "elements [{}, {}) in the header, [{}, {}) in the manifest",
                           last, begin + 1, end + 1, begin, end));
  // Bytes past what the header describes, listed in the manifest.
  const std::string q = copy();
  int64_t size = 0;
  on_rank0([&] {
    size = static_cast<int64_t>(fs::file_size(q + "/" + last));
    std::ofstream(q + "/" + last, std::ios::app | std::ios::binary) << std::string(64, '\0');
  });
  rewrite_manifest(q);
  MPI_Bcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  expect_fails(
      q, ErrorCode::kCorruptData,
      fmt::format("the header describes a file of {} bytes, the manifest (and the file) {}", size,
                  size + 64));
}

// The frozen base is not in a checkpoint: another base is named with both hashes and where each
// came from; with the same base loaded first, the checkpoint loads.
TEST(Checkpoint, FrozenBaseNamedWithItsSource) {
  TempDir dir;
  MlpShape shape;
  shape.frozen_mask = 0x5;  // the weights of units 0 and 1
  EngineConfig ca = make_config(3);
  Rig a(world(), ca, shape);
  a.train(2);
  CheckpointSaveOptions so;
  so.frozen_base_source = "from base-a.safetensors";
  const std::string path = save_checkpoint(a.engine, world(), dir.path(), so);
  EngineConfig cb = ca;
  cb.seed = ca.seed + 1;  // another random base
  Rig b(world(), cb, shape);
  const std::string ha = ckpt::hex64(a.engine.frozen_hash()),
                    hb = ckpt::hex64(b.engine.frozen_hash());
  ASSERT_NE(ha, hb);
  CheckpointLoadOptions lo;
  lo.frozen_base_source = "random init";
  expect_error([&] { load_checkpoint(b.engine, world(), path, lo); }, ErrorCode::kInvalidArgument,
               fmt::format("the checkpoint's trainable state was trained on frozen base {} (from "
                           "base-a.safetensors); this run's base (random init) is {}: give the "
                           "same base",
                           ha, hb));
  for (size_t u = 0; u < a.engine.num_units(); ++u) {
    for (size_t f = 0; f < a.engine.frozen_specs(u).size(); ++f) {
      const std::vector<float> v = a.engine.gather_frozen_param(u, f);
      b.engine.set_frozen_param(u, f, v.data());
    }
  }
  load_checkpoint(b.engine, world(), path, lo);
  EXPECT_EQ(a.engine.param_hash(), b.engine.param_hash());
}

// ---------------------------------------------------------------------------------------------
// Run ownership of a save directory (checkpoint/save_dir.h).

SaveDir claim(const std::string& dir, const std::string& resume_from = "", bool overwrite = false) {
  SaveDirOptions o;
  o.resume_from = resume_from;
  o.overwrite = overwrite;
  o.choices = "resume it, overwrite it, or save elsewhere";
  return SaveDir::claim(world(), dir, o);
}

std::string save_as(Rig& r, const SaveDir& d) {
  CheckpointSaveOptions o;
  o.run_id = d.run_id();
  return save_checkpoint(r.engine, world(), d.dir(), o);
}

TEST(SaveDir, FreshRunRefusedOnAnotherRunsCheckpoints) {
  TempDir dir;
  Rig a(world(), make_config(3));
  std::string first;
  {
    SaveDir d = claim(dir.path());
    first = d.run_id();
    a.train(1);
    save_as(a, d);
    a.train(1);
    save_as(a, d);
  }
  expect_error([&] { claim(dir.path()); }, ErrorCode::kInvalidArgument,
               fmt::format("{} holds the checkpoints of another run (run {}, steps 1, 2); this "
                           "run starts fresh: resume it, overwrite it, or save elsewhere",
                           dir.path(), first));
  // Nothing was changed by the refusal. Overwriting sets them aside (the new run owns the
  // directory) until its first checkpoint is complete; a claim that ends without one puts them
  // back.
  EXPECT_EQ(checkpoint_steps(dir.path()), (std::vector<int64_t>{1, 2}));
  {
    SaveDir d = claim(dir.path(), "", true);
    EXPECT_NE(d.run_id(), first);
    if (world().rank() == 0) {
      EXPECT_EQ(d.replaced_steps(), (std::vector<int64_t>{1, 2}));
      EXPECT_EQ(d.replaced_run(), first);
      EXPECT_EQ(d.replaced_dir(), dir / (".replaced-" + first));
      EXPECT_EQ(checkpoint_steps(d.replaced_dir()), (std::vector<int64_t>{1, 2}));
    }
    EXPECT_TRUE(checkpoint_steps(dir.path()).empty());
    EXPECT_EQ(save_dir_owner(dir.path()), d.run_id());
    world().barrier();  // before rank 0's destructor puts them back
  }
  world().barrier();
  EXPECT_EQ(checkpoint_steps(dir.path()), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(save_dir_owner(dir.path()), first);
  EXPECT_FALSE(fs::exists(dir / (".replaced-" + first)));
  // A resume of the first run still works after the refused replacement.
  EXPECT_EQ(claim(dir.path(), dir / "step-00000002").run_id(), first);
  // The first complete save of the new run removes them.
  SaveDir d = claim(dir.path(), "", true);
  a.train(1);
  save_as(a, d);
  EXPECT_EQ(d.finish_replacing(), world().rank() == 0);
  EXPECT_FALSE(d.finish_replacing());
  world().barrier();  // rank 0 removed them
  EXPECT_EQ(checkpoint_steps(dir.path()), (std::vector<int64_t>{3}));
  EXPECT_FALSE(fs::exists(dir / (".replaced-" + first)));
  EXPECT_EQ(save_dir_owner(dir.path()), d.run_id());
}

// What a job killed between its --overwrite claim and its first save leaves behind (the old run's
// checkpoints in .replaced-RUN, the new owner file) is settled by the next claim: put back when the
// new run saved nothing, removed when it did.
TEST(SaveDir, KilledReplacementIsSettledByTheNextClaim) {
  TempDir dir;
  Rig a(world(), make_config(3));
  std::string first;
  {
    SaveDir d = claim(dir / "a");
    first = d.run_id();
    a.train(1);
    save_as(a, d);
  }
  // A copy of the directory as the killed job left it (its lock dies with it).
  auto snapshot = [&](const std::string& to) {
    on_rank0([&] {
      fs::copy(dir / "a", to, fs::copy_options::recursive);
      fs::remove(fs::path(to) / kLockFileName);
    });
    world().barrier();
  };
  {
    SaveDir d = claim(dir / "a", "", true);
    snapshot(dir / "killed-before-save");
    a.train(1);
    save_as(a, d);
    snapshot(dir / "killed-after-save");
  }
  {
    SaveDir d = claim(dir / "killed-before-save", dir / "killed-before-save/step-00000001");
    EXPECT_EQ(d.run_id(), first);
    if (world().rank() == 0)
      EXPECT_NE(d.note().find(fmt::format("the checkpoints of run {} (step 1) were set aside by "
                                          "--overwrite for a run that ended before its first "
                                          "checkpoint: put back",
                                          first)),
                std::string::npos)
          << d.note();
  }
  EXPECT_EQ(checkpoint_steps(dir / "killed-before-save"), (std::vector<int64_t>{1}));
  EXPECT_EQ(save_dir_owner(dir / "killed-before-save"), first);
  SaveDirOptions latest;
  latest.resume_latest = true;
  {
    SaveDir d = SaveDir::claim(world(), dir / "killed-after-save", latest);
    EXPECT_EQ(d.resume_from(), dir / "killed-after-save/step-00000002");
    if (world().rank() == 0)
      EXPECT_NE(d.note().find("the run that replaced them saved step 2"), std::string::npos)
          << d.note();
  }
  EXPECT_EQ(checkpoint_steps(dir / "killed-after-save"), (std::vector<int64_t>{2}));
  EXPECT_FALSE(fs::exists(dir / ("killed-after-save/.replaced-" + first)));
}

// An owner file that is not one: a resume is refused saying how to recover; --overwrite sets it
// aside with the checkpoints.
TEST(SaveDir, CorruptOwnerFile) {
  TempDir dir;
  Rig a(world(), make_config(1));
  a.train(1);
  std::string path;
  {
    SaveDir d = claim(dir.path());
    path = save_as(a, d);
  }
  on_rank0([&] { std::ofstream(dir / kOwnerFileName, std::ios::trunc) << "{\"format\": 3"; });
  world().barrier();
  expect_error([&] { claim(dir.path(), path); }, ErrorCode::kCorruptData,
               fmt::format("not an owner file (expected {{\"format\": \"zeroshard-save-dir\", "
                           "\"run_id\": ...}}); if the checkpoints in {} are this run's, remove "
                           "it and resume",
                           dir.path()));
  SaveDir d = claim(dir.path(), "", true);
  if (world().rank() == 0) EXPECT_EQ(d.replaced_run(), "of unknown id");
  EXPECT_TRUE(checkpoint_steps(dir.path()).empty());
  world().barrier();  // before rank 0's destructor puts them back
}

TEST(SaveDir, ResumedRunKeepsItsIdAndOnlyItsOwnDirectory) {
  TempDir dir;
  Rig a(world(), make_config(3));
  a.train(1);
  std::string id, path;
  {
    SaveDir d = claim(dir / "a");
    id = d.run_id();
    path = save_as(a, d);
  }
  EXPECT_EQ(read_checkpoint_info(path).run_id, id);
  {
    SaveDir d = claim(dir / "a", path);
    EXPECT_EQ(d.run_id(), id);
    EXPECT_TRUE(d.replaced_steps().empty());
    a.train(1);
    save_as(a, d);  // the same run's directory: saves
  }
  {
    SaveDir fork = claim(dir / "fork", path);  // an empty directory: the run continues there
    EXPECT_EQ(fork.run_id(), id);
  }
  // A directory holding another run's checkpoints is refused to a resumed run, overwrite or not.
  std::string other;
  {
    SaveDir d = claim(dir / "b");
    other = d.run_id();
    save_as(a, d);
  }
  for (bool overwrite : {false, true}) {
    expect_error([&] { claim(dir / "b", path, overwrite); }, ErrorCode::kInvalidArgument,
                 fmt::format("holds the checkpoints of another run (run {}, step 2); this run "
                             "continues run {} from {}",
                             other, id, path));
  }
}

TEST(SaveDir, SecondWriterRefusedNamingTheFirst) {
  TempDir dir;
  SaveDir d = claim(dir.path());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  int pid = getpid();
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Bcast(host, sizeof(host), MPI_CHAR, 0, MPI_COMM_WORLD);
  expect_error([&] { claim(dir.path()); }, ErrorCode::kInvalidArgument,
               fmt::format("another job is writing checkpoints into this directory (pid {} on "
                           "host {} since ",
                           pid, host));
  expect_error([&] { claim(dir.path()); }, ErrorCode::kInvalidArgument,
               fmt::format("run {})", d.run_id()));
  d = SaveDir();  // released: the directory holds no checkpoints, a new run may take it
  EXPECT_TRUE(claim(dir.path()).claimed());
}

TEST(SaveDir, EachSaveChecksTheOwner) {
  TempDir dir;
  Rig a(world(), make_config(1));
  a.train(1);
  SaveDir d = claim(dir.path());
  on_rank0([&] {
    std::ofstream(dir / kOwnerFileName, std::ios::trunc)
        << R"({"format": "zeroshard-save-dir", "run_id": "someoneelse"})";
  });
  expect_error([&] { save_as(a, d); }, ErrorCode::kInvalidArgument,
               fmt::format("owner.json names run someoneelse, not this run ({})", d.run_id()));
  on_rank0([&] { fs::remove(dir / kOwnerFileName); });
  expect_error([&] { save_as(a, d); }, ErrorCode::kInvalidArgument, "owner.json is missing");
  EXPECT_TRUE(checkpoint_steps(dir.path()).empty());
  EXPECT_FALSE(fs::exists(dir / ".tmp-step-00000001"));
}

// Checkpoints of a version before run ids: a fresh run is refused them; resuming one of them in
// its own directory adopts the directory under a new id.
TEST(SaveDir, DirectoryWithoutOwner) {
  TempDir dir;
  Rig a(world(), make_config(1));
  a.train(1);
  const std::string path = save_checkpoint(a.engine, world(), dir.path());
  expect_error([&] { claim(dir.path()); }, ErrorCode::kInvalidArgument,
               "another run (run of unknown id, step 1)");
  SaveDir d = claim(dir.path(), path);
  EXPECT_TRUE(d.claimed());
  EXPECT_EQ(save_dir_owner(dir.path()), d.run_id());
}

// Ranks that see different directories under one name (node-local paths): refused before
// anything is written, naming the lowest rank that does not see rank 0's probe.
TEST(SaveDir, DirectoryNotSharedByEveryRank) {
  if (world().size() < 2) GTEST_SKIP() << "needs 2 ranks";
  TempDir dir;
  const std::string mine = dir / ("rank" + std::to_string(world().rank()));
  expect_error([&] { claim(mine); }, ErrorCode::kInvalidArgument,
               "the save directory must be shared by every rank: rank 1 (host ");
  world().barrier();
  if (world().rank() == 0) {
    int left = 0;
    for (const auto& e : fs::directory_iterator(mine)) left += !e.path().empty();
    EXPECT_EQ(left, 0) << "the probe was left behind";
    EXPECT_FALSE(fs::exists(fs::path(mine) / kOwnerFileName));
  }
}

// ---------------------------------------------------------------------------------------------

TEST(Safetensors, ExportImportRoundTrip) {
  TempDir dir;
  Rig a(world(), make_config(3));
  a.train(2);
  const Snapshot src = snapshot(a.engine, world());
  safetensors::export_model(a.engine, world(), dir / "m32.safetensors", DType::kF32);
  safetensors::export_model(a.engine, world(), dir / "m16.safetensors", DType::kBF16);

  Rig b(world(), make_config(1, DType::kF32));
  safetensors::import_model(b.engine, world(), dir / "m32.safetensors");
  EXPECT_EQ(a.engine.param_hash(), b.engine.param_hash());

  Rig c(world(), make_config(0));
  safetensors::import_model(c.engine, world(), dir / "m16.safetensors");
  const Snapshot got = snapshot(c.engine, world());
  for (size_t u = 0; u < a.engine.num_units(); ++u) {
    const std::vector<float>& x = src.values[u * 3];
    const std::vector<float>& y = got.values[u * 3];
    ASSERT_EQ(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(bf16_bits_to_fp32(fp32_to_bf16_bits(x[i])), y[i]) << "unit " << u << " " << i;
  }
  // The header is what the format says.
  on_rank0([&] {
    std::ifstream in(dir / "m32.safetensors", std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ(n % 8, 0u);
    std::string text(n, '\0');
    in.read(text.data(), static_cast<std::streamsize>(n));
    const nlohmann::json h = nlohmann::json::parse(text);
    EXPECT_EQ(h["hidden.0.weight"]["dtype"], "F32");
    EXPECT_EQ(h["hidden.0.weight"]["shape"], nlohmann::json::array({20, 13}));
    EXPECT_EQ(h["hidden.0.weight"]["data_offsets"], nlohmann::json::array({0, 20 * 13 * 4}));
    EXPECT_EQ(h["__metadata__"]["format"], "pt");
  });
}

TEST(Safetensors, ImportErrors) {
  TempDir dir;
  Rig a(world(), make_config(3));
  safetensors::export_model(a.engine, world(), dir / "m.safetensors");
  MlpShape deep;
  deep.hidden_layers = 5;
  Rig d(world(), make_config(3), deep);
  safetensors::export_model(d.engine, world(), dir / "deep.safetensors");
  MlpShape wide;
  wide.width = 24;
  Rig w(world(), make_config(3), wide);
  safetensors::export_model(w.engine, world(), dir / "wide.safetensors");
  on_rank0([&] {
    fs::copy(dir / "m.safetensors", dir / "short.safetensors");
    fs::resize_file(dir / "short.safetensors", fs::file_size(dir / "m.safetensors") - 4);
  });

  Rig t(world(), make_config(2));
  t.train(1);
  const uint64_t hash = t.engine.param_hash();
  auto import = [&](const std::string& f) {
    return [&t, f] { safetensors::import_model(t.engine, world(), f); };
  };
  expect_error(import(dir / "deep.safetensors"), ErrorCode::kInvalidArgument,
               "tensor(s) the model does not have, e.g. \"hidden.4.");
  expect_error(import(dir / "wide.safetensors"), ErrorCode::kInvalidArgument,
               "\"hidden.0.weight\" has shape [24, 13], the model needs [20, 13]");
  expect_error(import(dir / "short.safetensors"), ErrorCode::kCorruptData, "short.safetensors");
  expect_error(import(dir / "none.safetensors"), ErrorCode::kNotFound, "none.safetensors");
  EXPECT_EQ(hash, t.engine.param_hash());
  Rig deep_target(world(), make_config(1), deep);
  expect_error(
      [&] { safetensors::import_model(deep_target.engine, world(), dir / "m.safetensors"); },
      ErrorCode::kInvalidArgument, "tensor \"hidden.4.weight\" is missing");
  expect_error(
      [&] { safetensors::export_model(t.engine, world(), "/nonexistent-dir/x.safetensors"); },
      ErrorCode::kInvalidArgument, "/nonexistent-dir/x.safetensors.tmp");
}

}  // namespace
}  // namespace zs
