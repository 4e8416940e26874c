#include "runtime/agreement.h"

#include <cstdint>

#include <fmt/format.h>

#include "collectives/mpi_agreement.h"

namespace zs {

std::string setting_value(double v) { return fmt::format("{}", v); }

void check_agreement(Communicator& comm, std::span<const Setting> settings, std::string_view what) {
  AgreementTransport t;
  t.rank = comm.rank();
  t.size = comm.size();
  t.all_gather = [&](uint64_t mine) {
    std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
    comm.all_gather(&mine, all.data(), sizeof(uint64_t), DType::kU8);
    return all;
  };
  t.broadcast = [&](void* buf, size_t bytes, int root) {
    comm.broadcast(buf, bytes, DType::kU8, root);
  };
  check_agreement(t, settings, what);
}

}  // namespace zs
