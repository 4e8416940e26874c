// AsyncCheckpointSaver (checkpoint/async_checkpoint.h) at 1, 2 and 4 ranks: the files it writes are
// byte for byte save_checkpoint's at every stage; the snapshot is taken at save() (the engine's
// later steps do not reach the files); poll() commits only once every write has ended; a failed
// background write is thrown by the commit on every rank, and the previous checkpoint stays the
// latest.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../runtime/mlp_model.h"
#include "../runtime/test_world.h"
#include "checkpoint/async_checkpoint.h"
#include "checkpoint/checkpoint.h"
#include "collectives/fail_together.h"
#include "core/error.h"
#include "runtime/engine.h"

namespace zs {
namespace {

namespace fs = std::filesystem;
using testing::MlpModel;
using testing::MlpShape;
using testing::TempDir;
using testing::world;

EngineConfig make_config(int stage) {
  EngineConfig c;
  c.stage = zero_stage_from_int(stage);
  c.precision.param_dtype = DType::kBF16;
  c.optimizer.kind = OptimizerKind::kAdamW;
  c.optimizer.schedule.lr = 1e-2f;
  c.optimizer.schedule.warmup_steps = 2;
  c.optimizer.schedule.total_steps = 20;
  return c;
}

struct Rig {
  explicit Rig(const EngineConfig& cfg)
      : model(MlpShape{}, world().size(), world().rank(), cfg.micro_batches),
        engine(model, world(), cfg, &tracker) {}
  void train(int steps) {
    for (int i = 0; i < steps; ++i) {
      model.set_step(engine.steps_taken());
      engine.step();
    }
  }
  MemoryTracker tracker;
  MlpModel model;
  Engine engine;
};

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file of two checkpoint directories, byte for byte (read by rank 0; agreed).
void expect_same_files(const std::string& a, const std::string& b) {
  int same = 1;
  if (world().rank() == 0) {
    std::vector<std::string> names;
    for (const auto& d : fs::directory_iterator(a)) names.push_back(d.path().filename());
    size_t count_b = 0;
    for (const auto& d : fs::directory_iterator(b)) count_b += d.is_regular_file();
    same = names.size() == count_b;
    for (const std::string& n : names) {
      const bool eq = file_bytes(fs::path(a) / n) == file_bytes(fs::path(b) / n);
      EXPECT_TRUE(eq) << n << " differs between " << a << " and " << b;
      same &= eq;
    }
  }
  world().broadcast(&same, sizeof(same), DType::kU8, 0);
  EXPECT_TRUE(same);
}

TEST(AsyncCheckpoint, SameFilesAsASynchronousSaveEveryStage) {
  TempDir dir;
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    Rig a(make_config(stage));
    a.train(2);
    CheckpointSaveOptions opt;
    opt.trainer_state = R"({"cursor": 2})";
    const std::string sync_path =
        save_checkpoint(a.engine, world(), dir / ("s" + std::to_string(stage)), opt);
    AsyncCheckpointSaver saver;
    saver.reserve(a.engine, world().rank());
    EXPECT_EQ(AsyncCheckpointSaver::snapshot_bytes(a.engine, world().rank()),
              stage == 0 && world().rank() != 0
                  ? 0
                  : static_cast<int64_t>(fs::file_size(
                        fs::path(sync_path) / fmt::format("shard-{:05d}.bin", world().rank()))));
    std::optional<AsyncSaveResult> previous;
    const AsyncSaveResult started =
        saver.save(a.engine, world(), dir / ("a" + std::to_string(stage)), opt, previous);
    EXPECT_FALSE(previous);
    EXPECT_EQ(started.step, 2);
    EXPECT_TRUE(saver.pending());
    // The snapshot holds step 2: the steps taken meanwhile do not reach the files.
    a.train(2);
    const std::optional<AsyncSaveResult> done = saver.finish(world());
    ASSERT_TRUE(done);
    EXPECT_FALSE(saver.pending());
    EXPECT_EQ(fs::path(done->path).filename(), "step-00000002");
    expect_same_files(sync_path, done->path);
    EXPECT_FALSE(saver.finish(world()));  // nothing pending: nothing to commit
  }
}

TEST(AsyncCheckpoint, PollCommitsOnlyWhenEveryWriteEnded) {
  TempDir dir;
  Rig a(make_config(3));
  a.train(1);
  AsyncSaveOptions o;
  o.test_delay_ms = 300;
  AsyncCheckpointSaver saver(o);
  EXPECT_FALSE(saver.poll(world()));  // nothing pending: no communication
  std::optional<AsyncSaveResult> previous;
  saver.save(a.engine, world(), dir / "ck", {}, previous);
  // The writes sleep 300 ms: right after save() none has ended, and nothing is committed.
  EXPECT_FALSE(saver.poll(world()));
  EXPECT_FALSE(fs::exists(dir / "ck/step-00000001"));
  std::optional<AsyncSaveResult> r;
  for (int i = 0; i < 200 && !r; ++i) {
    usleep(20000);
    r = saver.poll(world());
  }
  ASSERT_TRUE(r);
  EXPECT_TRUE(fs::exists(dir / "ck/step-00000001/manifest.json"));
  EXPECT_GT(r->write_s, 0.25);
  // A second save while one is in flight waits for it and commits it first.
  a.train(1);
  saver.save(a.engine, world(), dir / "ck", {}, previous);
  a.train(1);
  saver.save(a.engine, world(), dir / "ck", {}, previous);
  ASSERT_TRUE(previous);
  EXPECT_EQ(previous->step, 2);
  EXPECT_TRUE(fs::exists(dir / "ck/step-00000002/manifest.json"));
  ASSERT_TRUE(saver.finish(world()));
  EXPECT_EQ(latest_checkpoint(dir / "ck").value_or(""), dir / "ck/step-00000003");
}

TEST(AsyncCheckpoint, FailedWriteIsThrownOnEveryRank) {
  TempDir dir;
  Rig a(make_config(1));
  a.train(1);
  AsyncCheckpointSaver first;
  std::optional<AsyncSaveResult> previous;
  first.save(a.engine, world(), dir / "ck", {}, previous);
  ASSERT_TRUE(first.finish(world()));
  a.train(1);
  AsyncSaveOptions o;
  o.test_delay_ms = 300;
  AsyncCheckpointSaver saver(o);
  saver.save(a.engine, world(), dir / "ck", {}, previous);
  // While the writes sleep, their directory becomes a file: every rank's open fails.
  world().barrier();
  if (world().rank() == 0) {
    fs::remove_all(dir / "ck/.tmp-step-00000002");
    std::ofstream(dir / "ck/.tmp-step-00000002") << "x";
  }
  world().barrier();
  std::string what;
  try {
    saver.finish(world());
  } catch (const RankFailure& f) {
    what = f.cause();
    EXPECT_EQ(f.rank(), 0);
  }
  EXPECT_NE(what.find("the background write of checkpoint step 2 failed"), std::string::npos)
      << what;
  EXPECT_NE(what.find("shard-00000.bin"), std::string::npos) << what;
  EXPECT_FALSE(saver.pending());
  EXPECT_EQ(latest_checkpoint(dir / "ck").value_or(""), dir / "ck/step-00000001");
}

}  // namespace
}  // namespace zs
