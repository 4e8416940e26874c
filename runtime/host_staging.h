// Host bytes through a communicator that may work on device memory only.
//
// The engine's small control collectives (the set-up agreement, the step's loss, sum of squares
// and finite flags) and its state gathers (fp32 master shards, frozen bytes, for checkpoints and
// hashes) start in host memory or end there. An MpiCommunicator takes host memory; a device
// communicator (NCCL) takes only device memory. HostStaging is the one place that tells them
// apart: with host-accessible DeviceOps every call is the collective itself on the caller's
// buffer; otherwise the bytes are copied into a device staging buffer, the collective runs there,
// and the result is copied back. The staging buffer is planned (BufferPlan::ctrl_bytes,
// allocated by the owner); a call that needs more borrows a temporary device buffer
// (MemCategory::kOther) for its duration: the agreement's detail after a disagreement, the
// gathers of whole groups.
//
// Collective over the communicator passed to each call; every rank calls in the same order.
// Thread-safety: one thread.
#pragma once

#include <cstddef>

#include "collectives/communicator.h"
#include "core/buffer.h"
#include "core/dtype.h"
#include "device/device_ops.h"

namespace zs {

struct AgreementTransport;  // collectives/mpi_agreement.h

class HostStaging {
 public:
  // `staging` is device memory from `ops.allocator()` (empty for host-accessible ops, where it is
  // never used); `tracker` counts the temporaries (null: the process tracker).
  HostStaging(DeviceOps& ops, Buffer staging = Buffer(), MemoryTracker* tracker = nullptr);

  // In place in host memory: rank r's `count` elements at data + r * count (in elements) to
  // every rank (all-gather; `data` holds comm.size() * count elements).
  void all_gather(Communicator& comm, void* data, size_t count, DType dt);
  // In place in host memory: `count` elements reduced with `op` over the ranks.
  void all_reduce(Communicator& comm, void* data, size_t count, DType dt, ReduceOp op);
  // In place in host memory: `count` elements of rank `root` to every rank.
  void broadcast(Communicator& comm, void* data, size_t count, DType dt, int root);
  // Every rank's `count` elements at `src` (engine memory: the device's on a device engine) into
  // host memory `out` (comm.size() * count elements, in rank order).
  void gather_to_host(Communicator& comm, const void* src, void* out, size_t count, DType dt);

  // check_agreement's two collectives (collectives/mpi_agreement.h) over `comm` through this
  // staging; valid while both live.
  AgreementTransport agreement_transport(Communicator& comm);

  // True when calls copy through device memory (the ops are not host-accessible).
  bool staged() const { return !ops_.host_accessible(); }

 private:
  // Device memory of at least `bytes`: the planned buffer, or `temp` allocated for the call.
  void* device_bytes(size_t bytes, Buffer& temp);

  DeviceOps& ops_;
  Buffer staging_;
  MemoryTracker* tracker_;
};

}  // namespace zs
