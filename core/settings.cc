#include "core/settings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"

namespace zs {
namespace {

// [Note: environment settings] Each parser takes a set, non-empty value and throws for a bad one.

bool parse_switch(const char* name, std::string_view v) {
  if (v == "0") return false;
  if (v == "1") return true;
  fail(ErrorCode::kInvalidArgument, "{}={}: not a switch (allowed: 0, 1)", name, v);
}

SimdLevel parse_isa(const char* name, std::string_view v) {
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "scalar") return SimdLevel::kScalar;
  if (s == "avx2") return SimdLevel::kAvx2;
  if (s == "avx512") return SimdLevel::kAvx512;
  fail(ErrorCode::kInvalidArgument,
       "{}={}: unknown instruction-set cap (allowed: scalar, avx2, avx512)", name, v);
}

// A decimal integer >= 1 that fits T; `what` and `allowed` word the error.
template <typename T>
T parse_count(const char* name, std::string_view v, const char* what, const char* allowed) {
  T x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < 1) {
    fail(ErrorCode::kInvalidArgument, "{}={}: not {} (allowed: {})", name, v, what, allowed);
  }
  return x;
}

// A finite decimal number >= 0.
double parse_seconds(const char* name, std::string_view v) {
  std::string s(v);
  char* end = nullptr;
  const double x = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(x) || x < 0) {
    fail(ErrorCode::kInvalidArgument, "{}={}: not a time (allowed: a number of seconds >= 0)", name,
         v);
  }
  return x;
}

}  // namespace

Settings Settings::from_environment() {
  // The only place the library reads a ZS_* variable.
  auto get = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] != '\0' ? v : nullptr;
  };
  Settings s;
  if (const char* v = get("ZS_MAX_ISA")) s.max_isa = parse_isa("ZS_MAX_ISA", v);
  if (const char* v = get("ZS_FORCE_SCALAR")) s.force_scalar = parse_switch("ZS_FORCE_SCALAR", v);
  if (const char* v = get("ZS_COLLECTIVES_SHM")) {
    s.collectives_shm = parse_switch("ZS_COLLECTIVES_SHM", v);
  }
  if (const char* v = get("ZS_COLLECTIVES_SHM_PASS")) {
    s.collectives_shm_pass =
        parse_count<size_t>("ZS_COLLECTIVES_SHM_PASS", v, "a byte count", "an integer >= 1");
  }
  if (const char* v = get("ZS_CHECK_COLLECTIVES")) {
    s.check_collectives = parse_switch("ZS_CHECK_COLLECTIVES", v);
  }
  if (const char* v = get("ZS_FAKE_NODES")) {
    s.fake_nodes = parse_count<int>("ZS_FAKE_NODES", v, "a node count",
                                    "an integer >= 1 that divides the world size");
  }
  if (const char* v = get("ZS_WATCHDOG_S")) s.watchdog_s = parse_seconds("ZS_WATCHDOG_S", v);
  if (const char* v = get("ONEDNN_MAX_CPU_ISA")) s.onednn_max_cpu_isa = v;
  if (const char* v = get("ZS_TEST_SAVE_DELAY_MS")) {
    s.test_save_delay_ms =
        parse_count<int>("ZS_TEST_SAVE_DELAY_MS", v, "a delay in milliseconds", "an integer >= 1");
  }
  if (const char* v = get("ZS_TEST_PAUSE_AFTER_STEP")) {
    s.test_pause_after_step =
        parse_count<int64_t>("ZS_TEST_PAUSE_AFTER_STEP", v, "a step", "an integer >= 1");
  }
  if (const char* v = get("ZS_TEST_PAUSE_AT_RESUME")) {
    s.test_pause_at_resume =
        parse_count<int64_t>("ZS_TEST_PAUSE_AT_RESUME", v, "a step", "an integer >= 1");
  }
  return s;
}

std::vector<Setting> Settings::items() const {
  auto flag = [](bool b) { return std::string(b ? "1" : "0"); };
  return {
      {"ZS_MAX_ISA", std::string(simd_level_name(max_isa))},
      {"ZS_FORCE_SCALAR", flag(force_scalar)},
      {"ZS_COLLECTIVES_SHM", flag(collectives_shm)},
      {"ZS_COLLECTIVES_SHM_PASS", std::to_string(collectives_shm_pass)},
      {"ZS_CHECK_COLLECTIVES", flag(check_collectives)},
      {"ZS_FAKE_NODES", std::to_string(fake_nodes)},
      {"ZS_WATCHDOG_S", watchdog_s ? fmt::format("{}", *watchdog_s) : "unset"},
      {"ONEDNN_MAX_CPU_ISA", onednn_max_cpu_isa.empty() ? "unset" : onednn_max_cpu_isa},
      {"ZS_TEST_SAVE_DELAY_MS", std::to_string(test_save_delay_ms)},
      {"ZS_TEST_PAUSE_AFTER_STEP", std::to_string(test_pause_after_step)},
      {"ZS_TEST_PAUSE_AT_RESUME", std::to_string(test_pause_at_resume)},
  };
}

std::vector<Setting> Settings::agreed_items() const {
  std::vector<Setting> all = items();
  std::erase_if(
      all, [](const Setting& s) { return s.name == "ZS_MAX_ISA" || s.name == "ZS_FORCE_SCALAR"; });
  return all;
}

LaunchEnvironment LaunchEnvironment::from_environment() {
  // The only place the library reads a launcher's variable.
  auto get = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v != nullptr && v[0] != '\0' ? v : nullptr;
  };
  auto first_int = [&](std::initializer_list<const char*> names) -> std::optional<int> {
    for (const char* n : names) {
      if (const char* v = get(n)) return std::atoi(v);
    }
    return std::nullopt;
  };
  LaunchEnvironment e;
  e.local_rank = first_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"});
  e.local_size =
      first_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"});
  e.openmpi_local_size = first_int({"OMPI_COMM_WORLD_LOCAL_SIZE"});
  // Not get(): an empty CUDA_VISIBLE_DEVICES means "no device", which errors should show.
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) e.cuda_visible_devices = v;
  for (const char* n : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    if (const char* v = get(n)) {
      e.job_id = v;
      break;
    }
  }
  if (const char* v = get("TMPDIR")) e.tmpdir = v;
  return e;
}

}  // namespace zs
