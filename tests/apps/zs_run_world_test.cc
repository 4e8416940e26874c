// zs_run's pure choices (apps/zs_run/world.h, supervisor.h): the world a policy picks from the
// surviving slots, --hosts parsing, and the arguments of a relaunch.
#include <gtest/gtest.h>

#include "core/error.h"
#include "supervisor.h"
#include "world.h"

namespace zs::run {
namespace {

TEST(ZsRunWorld, Pow2IsTheLargestPowerOfTwoThatFitsAndNeverGrows) {
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 4, 4), 4);
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 4, 3), 2);
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 8, 7), 4);
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 4, 16), 4);
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 6, 6), 4);
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 4, 1), 1);
  EXPECT_EQ(next_world(WorldPolicy::kPow2, 4, 0), 0);
}

TEST(ZsRunWorld, SameGivesUpBelowNpAndAnyTakesWhatFits) {
  EXPECT_EQ(next_world(WorldPolicy::kSame, 4, 4), 4);
  EXPECT_EQ(next_world(WorldPolicy::kSame, 4, 8), 4);
  EXPECT_EQ(next_world(WorldPolicy::kSame, 4, 3), 0);
  EXPECT_EQ(next_world(WorldPolicy::kAny, 4, 3), 3);
  EXPECT_EQ(next_world(WorldPolicy::kAny, 4, 9), 4);
  EXPECT_EQ(next_world(WorldPolicy::kAny, 4, 0), 0);
  EXPECT_THROW(parse_world_policy("half"), Error);
  EXPECT_EQ(parse_world_policy("same"), WorldPolicy::kSame);
}

TEST(ZsRunWorld, Hosts) {
  const std::vector<HostSlots> h = parse_hosts("n1:4,n2,n3:2");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[1].host, "n2");
  EXPECT_EQ(h[1].slots, 1);
  EXPECT_EQ(total_slots(h), 7);
  EXPECT_EQ(hosts_text(h), "n1:4,n2:1,n3:2");
  EXPECT_THROW(parse_hosts("n1:0"), Error);
  EXPECT_THROW(parse_hosts("n1:x"), Error);
  EXPECT_THROW(parse_hosts("n1,,n2"), Error);
  EXPECT_THROW(parse_hosts("n1:2,n1:2"), Error);
}

TEST(ZsRunWorld, RelaunchResumesItsOwnRun) {
  using V = std::vector<std::string>;
  EXPECT_EQ(relaunch_args(V{"zs_train", "--save-dir", "ck", "--overwrite"}),
            (V{"zs_train", "--save-dir", "ck", "--resume"}));
  EXPECT_EQ(relaunch_args(V{"zs_train", "--resume-from", "ck/step-00000004", "--save-dir", "ck"}),
            (V{"zs_train", "--save-dir", "ck", "--resume"}));
  EXPECT_EQ(relaunch_args(V{"zs_train", "--resume-from=x", "--save-dir=ck", "--resume"}),
            (V{"zs_train", "--save-dir=ck", "--resume"}));
}

TEST(ZsRunWorld, RefusesAJobWithoutASaveDir) {
  SupervisorOptions o;
  o.np = 2;
  o.train = {"zs_train", "--steps", "10"};
  try {
    check_options(o);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no --save-dir"), std::string::npos) << e.what();
  }
  o.train.push_back("--save-dir=ck");
  EXPECT_NO_THROW(check_options(o));
}

}  // namespace
}  // namespace zs::run
