#include "runtime/agreement.h"

#include <cstdint>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/error.h"

namespace zs {

namespace {

uint64_t hash_of(const Setting& s) {
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  XXH64_update(h, s.name.data(), s.name.size());
  const char sep = '\0';
  XXH64_update(h, &sep, 1);
  XXH64_update(h, s.value.data(), s.value.size());
  const uint64_t d = XXH64_digest(h);
  XXH64_freeState(h);
  return d;
}

// Every rank's `mine`, in rank order.
std::vector<uint64_t> gather_u64(Communicator& comm, uint64_t mine) {
  std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
  comm.all_gather(&mine, all.data(), sizeof(uint64_t), DType::kU8);
  return all;
}

// `text` of rank `root`, on every rank.
std::string broadcast_text(Communicator& comm, const std::string& text, int root) {
  uint64_t n = text.size();
  comm.broadcast(&n, sizeof(n), DType::kU8, root);
  std::string out = comm.rank() == root ? text : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) comm.broadcast(out.data(), static_cast<size_t>(n), DType::kU8, root);
  return out;
}

}  // namespace

std::string setting_value(double v) { return fmt::format("{}", v); }

void check_agreement(Communicator& comm, std::span<const Setting> settings, std::string_view what) {
  std::vector<uint64_t> hashes;
  hashes.reserve(settings.size());
  uint64_t whole = XXH64(nullptr, 0, settings.size());
  for (const Setting& s : settings) {
    hashes.push_back(hash_of(s));
    whole = XXH64(&hashes.back(), sizeof(uint64_t), whole);
  }
  const std::vector<uint64_t> all = gather_u64(comm, whole);
  int other = -1;  // the lowest rank whose list differs from rank 0's
  for (int r = 1; r < comm.size() && other < 0; ++r) {
    if (all[static_cast<size_t>(r)] != all[0]) other = r;
  }
  if (other < 0) return;
  // Find the first differing position: rank 0 broadcasts its per-setting hashes.
  const std::vector<uint64_t> counts = gather_u64(comm, settings.size());
  std::vector<uint64_t> ref(static_cast<size_t>(counts[0]));
  if (comm.rank() == 0) ref = hashes;
  if (!ref.empty()) comm.broadcast(ref.data(), ref.size() * sizeof(uint64_t), DType::kU8, 0);
  uint64_t first = std::min(counts[0], counts[static_cast<size_t>(other)]);
  if (comm.rank() == other) {
    for (uint64_t i = 0; i < first; ++i) {
      if (hashes[i] != ref[i]) {
        first = i;
        break;
      }
    }
  }
  comm.broadcast(&first, sizeof(first), DType::kU8, other);
  auto at = [&](int rank) {
    const bool has = comm.rank() == rank && first < settings.size();
    return broadcast_text(comm, has ? settings[first].name + '\n' + settings[first].value : "",
                          rank);
  };
  const std::string a = at(0), b = at(other);
  const size_t ka = a.find('\n'), kb = b.find('\n');
  const std::string name_a = a.substr(0, ka), name_b = b.substr(0, kb);
  if (a.empty() || b.empty() || name_a != name_b) {
    fail(ErrorCode::kInvalidArgument,
         "{}: ranks disagree on the list of settings: at position {} rank 0 has {} and rank {} "
         "has {}",
         what, first, a.empty() ? "nothing" : "'" + name_a + "'", other,
         b.empty() ? "nothing" : "'" + name_b + "'");
  }
  fail(ErrorCode::kInvalidArgument, "{}: ranks disagree on {}: {} on rank 0, {} on rank {}", what,
       name_a, a.substr(ka + 1), b.substr(kb + 1), other);
}

}  // namespace zs
