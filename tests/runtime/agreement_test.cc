// Run-wide agreement (runtime/agreement.h) and the engine's use of it: a setting that differs on
// one rank is an error on every rank naming the setting and both values (run at 1, 2 and 4 ranks;
// at 1 rank every list agrees with itself).
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "mlp_model.h"
#include "runtime/agreement.h"
#include "runtime/engine.h"
#include "test_world.h"

namespace zs {
namespace {

using testing::error_of;
using testing::world;

TEST(Agreement, EqualListsPass) {
  const std::vector<Setting> s = {{"--lr", "0.002"}, {"--steps", "600"}};
  EXPECT_EQ(error_of([&] { check_agreement(world(), s); }), "");
  EXPECT_EQ(error_of([&] { check_agreement(world(), {}); }), "");
}

TEST(Agreement, DifferingValueNamedWithBothValues) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = world().size() - 1;
  std::vector<Setting> s = {{"--steps", "600"}, {"--lr", "0.002"}, {"--seed", "1"}};
  if (world().rank() == last) s[1].value = "0.003";
  if (world().rank() == last) s[2].value = "2";  // a later difference is not the one named
  EXPECT_EQ(
      error_of([&] { check_agreement(world(), s, "zs_train"); }),
      fmt::format("zs_train: ranks disagree on --lr: 0.002 on rank 0, 0.003 on rank {}", last));
}

TEST(Agreement, DifferentListsNamed) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<Setting> s = {{"--steps", "600"}};
  if (world().rank() == 1) s.push_back({"--extra", "1"});
  EXPECT_EQ(error_of([&] { check_agreement(world(), s); }),
            "configuration: ranks disagree on the list of settings: at position 1 rank 0 has "
            "nothing and rank 1 has '--extra'");
}

TEST(Agreement, SettingValueRoundTrips) {
  EXPECT_EQ(setting_value(0.1f), "0.10000000149011612");
  EXPECT_EQ(setting_value(0.5), "0.5");
  EXPECT_EQ(std::stod(setting_value(1e-8)), 1e-8);
}

// The engine compares every field of its configuration and every parameter size.
TEST(Agreement, EngineNamesTheDifferingField) {
  if (world().size() < 2) GTEST_SKIP() << "needs two ranks";
  EngineConfig c;
  c.stage = ZeroStage::k3;
  c.optimizer.adamw.beta2 = world().rank() == 1 ? 0.99f : 0.95f;
  testing::MlpModel model(testing::MlpShape{}, world().size(), world().rank(), 1);
  MemoryTracker t;
  const std::string msg = error_of([&] { Engine e(model, world(), c, &t); });
  EXPECT_NE(msg.find("engine: ranks disagree on optimizer.adamw.beta2: 0.949999988079071 on "
                     "rank 0, 0.9900000095367432 on rank 1"),
            std::string::npos)
      << msg;
  // A model of a different shape on one rank.
  EngineConfig same;
  testing::MlpShape shape;
  if (world().rank() == 1) shape.width = 21;
  testing::MlpModel other(shape, world().size(), world().rank(), 1);
  const std::string m2 = error_of([&] { Engine e(other, world(), same, &t); });
  EXPECT_NE(m2.find("engine: ranks disagree on unit 0 parameter 0 size: 260 on rank 0, 273 on "
                    "rank 1"),
            std::string::npos)
      << m2;
}

}  // namespace
}  // namespace zs
