#include "checkpoint/async_checkpoint.h"

#include <chrono>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/async_writer.h"
#include "checkpoint/save_phases.h"
#include "core/error.h"

namespace zs {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

struct AsyncCheckpointSaver::Impl {
  AsyncSaveOptions options;
  // This rank's shard file image, allocated once and reused by every save (header, then each
  // unit's states in mask order: ckpt::copy_shard_image).
  std::vector<std::byte> snapshot;
  ckpt::AsyncFileWriter writer;
  std::optional<ckpt::SaveJob> job;  // the save in flight, until its commit
  AsyncSaveResult result;            // its figures so far

  AsyncSaveResult commit(Communicator& comm) {
    const ckpt::ShardWritten mine = writer.wait();
    const auto t0 = Clock::now();
    ckpt::SaveJob j = std::move(*job);
    job.reset();  // also when the commit throws: the save is over
    AsyncSaveResult r = result;
    std::string error = writer.error();
    if (!error.empty())
      error = fmt::format("the background write of checkpoint step {} failed: {}", r.step, error);
    r.path = ckpt::commit_save(comm, j, mine, error, writer.error_code(), &r.write_s);
    r.commit_s = seconds_since(t0);
    return r;
  }
};

AsyncCheckpointSaver::AsyncCheckpointSaver(AsyncSaveOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

AsyncCheckpointSaver::~AsyncCheckpointSaver() = default;

int64_t AsyncCheckpointSaver::snapshot_bytes(Engine& e, int rank) {
  const bool writes = (e.config().stage != ZeroStage::k0 || rank == 0) && e.replica_index() == 0;
  if (!writes) return 0;
  ckpt::ShardHeader h;
  const OptimizerConfig& o = e.config().optimizer;
  h.state_mask = ckpt::optimizer_state_mask(o);
  for (size_t u = 0; u < e.num_units(); ++u) {
    const ShardExtent st = e.shard_extent(u);
    h.units.push_back({st.begin, st.numel});
  }
  return h.file_bytes();
}

void AsyncCheckpointSaver::reserve(Engine& e, int rank) {
  const size_t n = static_cast<size_t>(snapshot_bytes(e, rank));
  if (impl_->snapshot.size() != n) impl_->snapshot.assign(n, std::byte{0});
}

AsyncSaveResult AsyncCheckpointSaver::save(Engine& e, Communicator& comm, const std::string& dir,
                                           const CheckpointSaveOptions& options,
                                           std::optional<AsyncSaveResult>& previous) {
  const auto t0 = Clock::now();
  previous.reset();
  const bool writing = impl_->job && !written();
  if (impl_->job) previous = impl_->commit(comm);
  const double waited = seconds_since(t0);
  const auto t1 = Clock::now();
  ckpt::SaveJob job = ckpt::begin_save(e, comm, dir, options);
  if (job.writes) {
    reserve(e, comm.rank());
    ZS_ASSERT(static_cast<int64_t>(impl_->snapshot.size()) == job.header.file_bytes());
    ckpt::copy_shard_image(e, job, impl_->snapshot.data());
  }
  impl_->result = {};
  impl_->result.step = job.manifest.step;
  impl_->result.waited_s = waited;
  impl_->result.found_writing = writing;
  impl_->result.snapshot_s = seconds_since(t1);
  if (job.writes)
    impl_->writer.start(job.shard_path, impl_->snapshot.data(), impl_->snapshot.size(),
                        impl_->options.test_delay_ms);
  impl_->job = std::move(job);
  return impl_->result;
}

bool AsyncCheckpointSaver::pending() const { return impl_->job.has_value(); }

bool AsyncCheckpointSaver::written() const { return impl_->writer.done(); }

std::optional<AsyncSaveResult> AsyncCheckpointSaver::poll(Communicator& comm) {
  if (!impl_->job) return std::nullopt;
  // Why an all-reduce: the commit is collective, so every rank must decide alike. 1 = this rank's
  // write is still running; the maximum over the ranks is 0 when every write has ended.
  double running = written() ? 0.0 : 1.0;
  comm.all_reduce(&running, &running, 1, DType::kF64, ReduceOp::kMax);
  if (running > 0.0) return std::nullopt;
  return impl_->commit(comm);
}

std::optional<AsyncSaveResult> AsyncCheckpointSaver::finish(Communicator& comm) {
  if (!impl_->job) return std::nullopt;
  return impl_->commit(comm);
}

}  // namespace zs
