#include "collectives/fail_together.h"

#include <exception>
#include <new>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace zs {
namespace {

// This rank's failure, as every rank will see it.
struct Caught {
  ErrorCode code;
  std::string message;
};

std::optional<Caught> run_caught(const std::function<void()>& work) {
  try {
    work();
  } catch (const Error& e) {
    return Caught{e.code(), e.what()};
  } catch (const std::bad_alloc&) {
    return Caught{ErrorCode::kOutOfMemory, "out of host memory"};
  } catch (const std::exception& e) {
    return Caught{ErrorCode::kInternal, e.what()};
  }
  return std::nullopt;
}

}  // namespace

RankFailure::RankFailure(ErrorCode code, int rank, int size, std::string cause)
    : Error(code, size > 1 ? fmt::format("rank {}: {}", rank, cause) : cause),
      rank_(rank),
      cause_(std::move(cause)) {}

void fail_together(const FailTransport& t, const std::function<void()>& work) {
  const std::optional<Caught> mine = run_caught(work);
  // The lowest failing rank r is encoded as size - r so that a max finds it; 0: nobody failed.
  const double worst = t.all_reduce_max(mine ? static_cast<double>(t.size - t.rank) : 0.0);
  if (worst == 0.0) return;
  const int root = t.size - static_cast<int>(worst);
  // {code, length} from the root, then its message.
  double meta[2] = {0.0, 0.0};
  if (t.rank == root) meta[0] = static_cast<double>(mine->code);
  if (t.rank == root) meta[1] = static_cast<double>(mine->message.size());
  t.broadcast(meta, sizeof(meta), root);
  std::string text = t.rank == root ? mine->message : std::string(static_cast<size_t>(meta[1]), 0);
  if (!text.empty()) t.broadcast(text.data(), text.size(), root);
  throw RankFailure(static_cast<ErrorCode>(static_cast<int>(meta[0])), root, t.size,
                    std::move(text));
}

void fail_together(Communicator& comm, const std::function<void()>& work) {
  FailTransport t;
  t.rank = comm.rank();
  t.size = comm.size();
  t.all_reduce_max = [&](double mine) {
    double worst = 0.0;
    comm.all_reduce(&mine, &worst, 1, DType::kF64, ReduceOp::kMax);
    return worst;
  };
  t.broadcast = [&](void* buf, size_t bytes, int root) {
    comm.broadcast(buf, bytes, DType::kU8, root);
  };
  fail_together(t, work);
}

}  // namespace zs
