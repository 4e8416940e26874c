#include "runtime/agreement.h"

#include <cstdint>

#include <fmt/format.h>

#include "collectives/mpi_agreement.h"

namespace zs {

std::string setting_value(double v) { return fmt::format("{}", v); }

void check_agreement(Communicator& comm, std::span<const Setting> settings, std::string_view what) {
  HostStaging host(cpu_device_ops());
  check_agreement(comm, host, settings, what);
}

void check_agreement(Communicator& comm, HostStaging& staging, std::span<const Setting> settings,
                     std::string_view what) {
  check_agreement(staging.agreement_transport(comm), settings, what);
}

}  // namespace zs
