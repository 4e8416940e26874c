// Run-wide agreement: every rank must run with the same settings. A program (or the engine)
// lists what it was configured with as named values; check_agreement compares them across ranks
// with one all-gather of a hash and, only when they differ, names the first differing setting and
// both values. The library's answer to "ranks started with different flags either hang in a
// collective or train garbage".
//
// The comparison is collectives/mpi_agreement.h's, which also runs it over a raw MPI_Comm before
// any communicator exists (the environment's settings); Setting is core/settings.h's.
//
// Collective over `comm`: every rank calls it at the same point. The first form needs a
// communicator on host buffers (MpiCommunicator); the second runs over any communicator through
// the engine's staging seam (runtime/host_staging.h), so a device engine compares the same named
// settings. Thread-safety: one thread.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/communicator.h"
#include "core/settings.h"
#include "runtime/host_staging.h"

namespace zs {

// Throws zs::Error(kInvalidArgument) on every rank when the lists differ between ranks:
//   "<what>: ranks disagree on <name>: <value> on rank 0, <value> on rank r"
// naming the lowest rank that differs from rank 0 and the first setting (in list order) where it
// does; or, when the lists themselves differ in length or names, the first position where they
// do. Returns normally (every rank) when all lists are equal.
void check_agreement(Communicator& comm, std::span<const Setting> settings,
                     std::string_view what = "configuration");
// The same over `comm` whatever memory it works on, host bytes staged through `staging`.
void check_agreement(Communicator& comm, HostStaging& staging, std::span<const Setting> settings,
                     std::string_view what);

// A float or double as text that parses back to the same value ("0.1" -> "0.1", NaN -> "nan").
std::string setting_value(double v);

}  // namespace zs
