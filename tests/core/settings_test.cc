// Settings::from_environment() and LaunchEnvironment::from_environment(): each variable of
// [Note: environment settings] is parsed, an unset or empty one takes the default, and a bad value
// is refused with a message naming the variable, the value and the allowed values.
#include "core/settings.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace zs {
namespace {

// Every variable the two readers look at; each test starts with all of them unset.
const std::vector<std::string> kVariables = {"ZS_MAX_ISA",
                                             "ZS_FORCE_SCALAR",
                                             "ZS_COLLECTIVES_SHM",
                                             "ZS_COLLECTIVES_SHM_PASS",
                                             "ZS_CHECK_COLLECTIVES",
                                             "ZS_FAKE_NODES",
                                             "ZS_WATCHDOG_S",
                                             "ONEDNN_MAX_CPU_ISA",
                                             "ZS_TEST_SAVE_DELAY_MS",
                                             "ZS_TEST_PAUSE_AFTER_STEP",
                                             "ZS_TEST_PAUSE_AT_RESUME",
                                             "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "MPI_LOCALRANKID",
                                             "SLURM_LOCALID",
                                             "OMPI_COMM_WORLD_LOCAL_SIZE",
                                             "MPI_LOCALNRANKS",
                                             "SLURM_NTASKS_PER_NODE",
                                             "CUDA_VISIBLE_DEVICES"};

// Unsets kVariables for the test and puts back what the process had.
class SettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string& name : kVariables) {
      const char* v = std::getenv(name.c_str());
      saved_.push_back(v != nullptr ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name.c_str());
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < kVariables.size(); ++i) {
      if (saved_[i]) {
        setenv(kVariables[i].c_str(), saved_[i]->c_str(), 1);
      } else {
        unsetenv(kVariables[i].c_str());
      }
    }
  }
  static void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::vector<std::optional<std::string>> saved_;
};

// Settings::from_environment() must throw kInvalidArgument with exactly `message`.
void expect_refused(const std::string& message) {
  try {
    Settings::from_environment();
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()), message);
  }
}

TEST_F(SettingsTest, DefaultsWhenUnset) {
  const Settings s = Settings::from_environment();
  const Settings d;
  EXPECT_EQ(s.max_isa, SimdLevel::kAvx512);
  EXPECT_FALSE(s.force_scalar);
  EXPECT_TRUE(s.collectives_shm);
  EXPECT_EQ(s.collectives_shm_pass, size_t{512} << 10);
  EXPECT_FALSE(s.check_collectives);
  EXPECT_EQ(s.fake_nodes, 0);
  EXPECT_EQ(s.max_isa, d.max_isa);
  EXPECT_EQ(s.collectives_shm_pass, d.collectives_shm_pass);
}

TEST_F(SettingsTest, EmptyMeansUnset) {
  for (const char* name : {"ZS_MAX_ISA", "ZS_FORCE_SCALAR", "ZS_COLLECTIVES_SHM",
                           "ZS_COLLECTIVES_SHM_PASS", "ZS_CHECK_COLLECTIVES", "ZS_FAKE_NODES"}) {
    set(name, "");
  }
  const Settings s = Settings::from_environment();
  EXPECT_EQ(s.max_isa, SimdLevel::kAvx512);
  EXPECT_FALSE(s.force_scalar);
  EXPECT_TRUE(s.collectives_shm);
  EXPECT_EQ(s.collectives_shm_pass, size_t{512} << 10);
  EXPECT_FALSE(s.check_collectives);
  EXPECT_EQ(s.fake_nodes, 0);
}

TEST_F(SettingsTest, MaxIsa) {
  const std::pair<const char*, SimdLevel> cases[] = {{"scalar", SimdLevel::kScalar},
                                                     {"avx2", SimdLevel::kAvx2},
                                                     {"avx512", SimdLevel::kAvx512},
                                                     {"AVX2", SimdLevel::kAvx2},
                                                     {"Scalar", SimdLevel::kScalar}};
  for (const auto& [value, level] : cases) {
    set("ZS_MAX_ISA", value);
    EXPECT_EQ(Settings::from_environment().max_isa, level) << value;
  }
  // The wording tests/apps/zs_train_test.sh looks for.
  set("ZS_MAX_ISA", "avx9");
  expect_refused("ZS_MAX_ISA=avx9: unknown instruction-set cap (allowed: scalar, avx2, avx512)");
  set("ZS_MAX_ISA", "avx512 ");
  expect_refused("ZS_MAX_ISA=avx512 : unknown instruction-set cap (allowed: scalar, avx2, avx512)");
}

TEST_F(SettingsTest, Switches) {
  struct Case {
    const char* name;
    bool Settings::*field;
  };
  const Case cases[] = {{"ZS_FORCE_SCALAR", &Settings::force_scalar},
                        {"ZS_COLLECTIVES_SHM", &Settings::collectives_shm},
                        {"ZS_CHECK_COLLECTIVES", &Settings::check_collectives}};
  for (const Case& c : cases) {
    set(c.name, "1");
    EXPECT_TRUE(Settings::from_environment().*c.field) << c.name;
    set(c.name, "0");
    EXPECT_FALSE(Settings::from_environment().*c.field) << c.name;
    for (const char* bad : {"yes", "true", "2", "01", "-1"}) {
      set(c.name, bad);
      expect_refused(std::string(c.name) + "=" + bad + ": not a switch (allowed: 0, 1)");
    }
    unsetenv(c.name);
  }
}

TEST_F(SettingsTest, ShmPassBytes) {
  set("ZS_COLLECTIVES_SHM_PASS", "4096");
  EXPECT_EQ(Settings::from_environment().collectives_shm_pass, 4096u);
  set("ZS_COLLECTIVES_SHM_PASS", "1");
  EXPECT_EQ(Settings::from_environment().collectives_shm_pass, 1u);
  for (const char* bad : {"0", "-64", "64k", "1e6", "x", "99999999999999999999999"}) {
    set("ZS_COLLECTIVES_SHM_PASS", bad);
    expect_refused(std::string("ZS_COLLECTIVES_SHM_PASS=") + bad +
                   ": not a byte count (allowed: an integer >= 1)");
  }
}

TEST_F(SettingsTest, FakeNodes) {
  set("ZS_FAKE_NODES", "2");
  EXPECT_EQ(Settings::from_environment().fake_nodes, 2);
  set("ZS_FAKE_NODES", "64");
  EXPECT_EQ(Settings::from_environment().fake_nodes, 64);
  for (const char* bad : {"0", "-2", "x", "2.5", "99999999999"}) {
    set("ZS_FAKE_NODES", bad);
    expect_refused(std::string("ZS_FAKE_NODES=") + bad +
                   ": not a node count (allowed: an integer >= 1 that divides the world size)");
  }
}

TEST_F(SettingsTest, PauseAfterStep) {
  set("ZS_TEST_PAUSE_AFTER_STEP", "14");
  EXPECT_EQ(Settings::from_environment().test_pause_after_step, 14);
  set("ZS_TEST_PAUSE_AFTER_STEP", "99999999999");
  EXPECT_EQ(Settings::from_environment().test_pause_after_step, 99999999999);
  for (const char* bad : {"0", "-1", "x", "1.5"}) {
    set("ZS_TEST_PAUSE_AFTER_STEP", bad);
    expect_refused(std::string("ZS_TEST_PAUSE_AFTER_STEP=") + bad +
                   ": not a step (allowed: an integer >= 1)");
  }
}

TEST_F(SettingsTest, PauseAtResume) {
  set("ZS_TEST_PAUSE_AT_RESUME", "8");
  EXPECT_EQ(Settings::from_environment().test_pause_at_resume, 8);
  set("ZS_TEST_PAUSE_AT_RESUME", "99999999999");
  EXPECT_EQ(Settings::from_environment().test_pause_at_resume, 99999999999);
  for (const char* bad : {"0", "-1", "x", "1.5", "8 "}) {
    set("ZS_TEST_PAUSE_AT_RESUME", bad);
    expect_refused(std::string("ZS_TEST_PAUSE_AT_RESUME=") + bad +
                   ": not a step (allowed: an integer >= 1)");
  }
}

TEST_F(SettingsTest, WatchdogSeconds) {
  EXPECT_FALSE(Settings::from_environment().watchdog_s);
  set("ZS_WATCHDOG_S", "");
  EXPECT_FALSE(Settings::from_environment().watchdog_s);
  set("ZS_WATCHDOG_S", "300");
  EXPECT_EQ(Settings::from_environment().watchdog_s, 300.0);
  set("ZS_WATCHDOG_S", "0.5");
  EXPECT_EQ(Settings::from_environment().watchdog_s, 0.5);
  set("ZS_WATCHDOG_S", "0");
  EXPECT_EQ(Settings::from_environment().watchdog_s, 0.0);
  for (const char* bad : {"-1", "x", "5s", "inf", "nan"}) {
    set("ZS_WATCHDOG_S", bad);
    expect_refused(std::string("ZS_WATCHDOG_S=") + bad +
                   ": not a time (allowed: a number of seconds >= 0)");
  }
}

// Any bad variable fails the whole read, whichever part asks: the first in the table's order.
TEST_F(SettingsTest, FirstBadVariableIsReported) {
  set("ZS_FAKE_NODES", "x");
  set("ZS_COLLECTIVES_SHM", "on");
  expect_refused("ZS_COLLECTIVES_SHM=on: not a switch (allowed: 0, 1)");
}

// items() lists every variable of the table, in its order, as the variable spells the value; each
// variable set changes its own item and no other, so ranks that differ in any one of them differ
// in the list they compare ([Note: environment agreement] in collectives/mpi_agreement.h).
TEST_F(SettingsTest, ItemsNameEveryVariable) {
  const std::vector<Setting> defaults = Settings::from_environment().items();
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"ZS_MAX_ISA", "avx512"},        {"ZS_FORCE_SCALAR", "0"},
      {"ZS_COLLECTIVES_SHM", "1"},     {"ZS_COLLECTIVES_SHM_PASS", "524288"},
      {"ZS_CHECK_COLLECTIVES", "0"},   {"ZS_FAKE_NODES", "0"},
      {"ZS_WATCHDOG_S", "unset"},      {"ONEDNN_MAX_CPU_ISA", "unset"},
      {"ZS_TEST_SAVE_DELAY_MS", "0"},  {"ZS_TEST_PAUSE_AFTER_STEP", "0"},
      {"ZS_TEST_PAUSE_AT_RESUME", "0"}};
  ASSERT_EQ(defaults.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(defaults[i].name, expected[i].first);
    EXPECT_EQ(defaults[i].value, expected[i].second) << expected[i].first;
  }
  const std::vector<std::pair<const char*, const char*>> changes = {
      {"ZS_MAX_ISA", "avx2"},           {"ZS_FORCE_SCALAR", "1"},
      {"ZS_COLLECTIVES_SHM", "0"},      {"ZS_COLLECTIVES_SHM_PASS", "4096"},
      {"ZS_CHECK_COLLECTIVES", "1"},    {"ZS_FAKE_NODES", "2"},
      {"ZS_WATCHDOG_S", "0.1"},         {"ONEDNN_MAX_CPU_ISA", "AVX2"},
      {"ZS_TEST_SAVE_DELAY_MS", "250"}, {"ZS_TEST_PAUSE_AFTER_STEP", "14"},
      {"ZS_TEST_PAUSE_AT_RESUME", "8"}};
  for (const auto& [name, value] : changes) {
    set(name, value);
    const std::vector<Setting> items = Settings::from_environment().items();
    unsetenv(name);
    ASSERT_EQ(items.size(), defaults.size());
    for (size_t i = 0; i < items.size(); ++i) {
      if (items[i].name == name) {
        EXPECT_EQ(items[i].value, value) << name;
      } else {
        EXPECT_EQ(items[i].value, defaults[i].value) << name << " changed " << items[i].name;
      }
    }
  }
  Settings s;
  s.watchdog_s = 0.1f;  // a float's double: enough digits to round-trip
  EXPECT_EQ(s.items()[6].value, "0.10000000149011612");
  // What ranks compare: every item but the ISA caps, in the same order.
  const std::vector<Setting> agreed = Settings::from_environment().agreed_items();
  ASSERT_EQ(agreed.size(), expected.size() - 2);
  for (size_t i = 0; i < agreed.size(); ++i) EXPECT_EQ(agreed[i].name, expected[i + 2].first);
}

TEST_F(SettingsTest, LaunchEnvironmentUnset) {
  const LaunchEnvironment e = LaunchEnvironment::from_environment();
  EXPECT_FALSE(e.local_rank);
  EXPECT_FALSE(e.local_size);
  EXPECT_FALSE(e.openmpi_local_size);
  EXPECT_FALSE(e.cuda_visible_devices);
}

TEST_F(SettingsTest, LaunchEnvironmentFirstLauncherWins) {
  set("SLURM_LOCALID", "3");
  set("SLURM_NTASKS_PER_NODE", "8");
  LaunchEnvironment e = LaunchEnvironment::from_environment();
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.local_size, 8);
  EXPECT_FALSE(e.openmpi_local_size);  // a Slurm count alone does not split the CPU threads
  set("MPI_LOCALRANKID", "2");
  set("MPI_LOCALNRANKS", "4");
  e = LaunchEnvironment::from_environment();
  EXPECT_EQ(e.local_rank, 2);
  EXPECT_EQ(e.local_size, 4);
  set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  set("OMPI_COMM_WORLD_LOCAL_SIZE", "2");
  set("MPI_LOCALRANKID", "");  // empty counts as unset
  e = LaunchEnvironment::from_environment();
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.openmpi_local_size, 2);
}

TEST_F(SettingsTest, LaunchEnvironmentCudaVisibleDevices) {
  set("CUDA_VISIBLE_DEVICES", "1,0");
  EXPECT_EQ(LaunchEnvironment::from_environment().cuda_visible_devices, "1,0");
  set("CUDA_VISIBLE_DEVICES", "");  // "no device": kept, not taken for unset
  EXPECT_EQ(LaunchEnvironment::from_environment().cuda_visible_devices, "");
}

}  // namespace
}  // namespace zs
