#include "collectives/mpi_agreement.h"

#include <algorithm>
#include <string>

#include <xxhash.h>

#include "collectives/fail_together.h"
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

// `text` of rank `root`, on every rank.
std::string broadcast_text(const AgreementTransport& t, const std::string& text, int root) {
  uint64_t n = text.size();
  t.broadcast(&n, sizeof(n), root);
  std::string out = t.rank == root ? text : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) t.broadcast(out.data(), static_cast<size_t>(n), root);
  return out;
}

void check_mpi(int rc, const char* call, std::string_view what, int rank, int size) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(ErrorCode::kCommunication, "{}: {} failed on rank {} of {} (agreement check): {}", what,
       call, rank, size, std::string(text, static_cast<size_t>(len)));
}

}  // namespace

void check_agreement(const AgreementTransport& t, std::span<const Setting> settings,
                     std::string_view what) {
  std::vector<uint64_t> hashes;
  hashes.reserve(settings.size());
  uint64_t whole = XXH64(nullptr, 0, settings.size());
  for (const Setting& s : settings) {
    hashes.push_back(hash_of(s));
    whole = XXH64(&hashes.back(), sizeof(uint64_t), whole);
  }
  const std::vector<uint64_t> all = t.all_gather(whole);
  int other = -1;  // the lowest rank whose list differs from rank 0's
  for (int r = 1; r < t.size && other < 0; ++r) {
    if (all[static_cast<size_t>(r)] != all[0]) other = r;
  }
  if (other < 0) return;
  // Find the first differing position: rank 0 broadcasts its per-setting hashes.
  const std::vector<uint64_t> counts = t.all_gather(settings.size());
  std::vector<uint64_t> ref(static_cast<size_t>(counts[0]));
  if (t.rank == 0) ref = hashes;
  if (!ref.empty()) t.broadcast(ref.data(), ref.size() * sizeof(uint64_t), 0);
  uint64_t first = std::min(counts[0], counts[static_cast<size_t>(other)]);
  if (t.rank == other) {
    for (uint64_t i = 0; i < first; ++i) {
      if (hashes[i] != ref[i]) {
        first = i;
        break;
      }
    }
  }
  t.broadcast(&first, sizeof(first), other);
  auto at = [&](int rank) {
    const bool has = t.rank == rank && first < settings.size();
    return broadcast_text(t, has ? settings[first].name + '\n' + settings[first].value : "", rank);
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

void check_agreement(MPI_Comm comm, std::span<const Setting> settings, std::string_view what) {
  AgreementTransport t;
  MPI_Comm_rank(comm, &t.rank);
  MPI_Comm_size(comm, &t.size);
  if (t.size == 1) return;  // one rank agrees with itself
  t.all_gather = [&](uint64_t mine) {
    std::vector<uint64_t> all(static_cast<size_t>(t.size));
    check_mpi(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm),
              "MPI_Allgather", what, t.rank, t.size);
    return all;
  };
  t.broadcast = [&](void* buf, size_t bytes, int root) {
    check_mpi(MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, comm), "MPI_Bcast", what,
              t.rank, t.size);
  };
  check_agreement(t, settings, what);
}

void fail_together(MPI_Comm comm, const std::function<void()>& work) {
  FailTransport t;
  MPI_Comm_rank(comm, &t.rank);
  MPI_Comm_size(comm, &t.size);
  const char* what = "fail_together";
  t.all_reduce_max = [&](double mine) {
    double worst = 0.0;
    check_mpi(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce", what,
              t.rank, t.size);
    return worst;
  };
  t.broadcast = [&](void* buf, size_t bytes, int root) {
    check_mpi(MPI_Bcast(buf, static_cast<int>(bytes), MPI_BYTE, root, comm), "MPI_Bcast", what,
              t.rank, t.size);
  };
  fail_together(t, work);
}

void check_settings_agreement(MPI_Comm comm, const Settings& settings) {
  check_agreement(comm, settings.agreed_items(), "environment");
}

}  // namespace zs
