#include "runtime/host_staging.h"

#include <vector>

#include "collectives/mpi_agreement.h"

namespace zs {

HostStaging::HostStaging(DeviceOps& ops, Buffer staging, MemoryTracker* tracker)
    : ops_(ops), staging_(std::move(staging)), tracker_(tracker) {}

void* HostStaging::device_bytes(size_t bytes, Buffer& temp) {
  if (bytes <= staging_.size()) return staging_.data();
  temp = Buffer(bytes, MemCategory::kOther, tracker_, &ops_.allocator());
  return temp.data();
}

void HostStaging::all_gather(Communicator& comm, void* data, size_t count, DType dt) {
  const size_t piece = count * dtype_size(dt);
  const size_t own = piece * static_cast<size_t>(comm.rank());
  if (!staged()) {
    comm.all_gather(static_cast<char*>(data) + own, data, count, dt);
    return;
  }
  const size_t bytes = piece * static_cast<size_t>(comm.size());
  Buffer temp;
  void* dev = device_bytes(bytes, temp);
  ops_.copy_from_host(static_cast<char*>(dev) + own, static_cast<char*>(data) + own, piece);
  comm.all_gather(static_cast<char*>(dev) + own, dev, count, dt);
  ops_.copy_to_host(data, dev, bytes);
}

void HostStaging::all_reduce(Communicator& comm, void* data, size_t count, DType dt, ReduceOp op) {
  if (!staged()) {
    comm.all_reduce(data, data, count, dt, op);
    return;
  }
  const size_t bytes = count * dtype_size(dt);
  Buffer temp;
  void* dev = device_bytes(bytes, temp);
  ops_.copy_from_host(dev, data, bytes);
  comm.all_reduce(dev, dev, count, dt, op);
  ops_.copy_to_host(data, dev, bytes);
}

void HostStaging::broadcast(Communicator& comm, void* data, size_t count, DType dt, int root) {
  if (!staged()) {
    comm.broadcast(data, count, dt, root);
    return;
  }
  const size_t bytes = count * dtype_size(dt);
  Buffer temp;
  void* dev = device_bytes(bytes, temp);
  ops_.copy_from_host(dev, data, bytes);
  comm.broadcast(dev, count, dt, root);
  ops_.copy_to_host(data, dev, bytes);
}

void HostStaging::gather_to_host(Communicator& comm, const void* src, void* out, size_t count,
                                 DType dt) {
  if (!staged()) {
    comm.all_gather(src, out, count, dt);
    return;
  }
  const size_t bytes = count * dtype_size(dt) * static_cast<size_t>(comm.size());
  Buffer temp;
  void* dev = device_bytes(bytes, temp);
  comm.all_gather(src, dev, count, dt);
  ops_.copy_to_host(out, dev, bytes);
}

AgreementTransport HostStaging::agreement_transport(Communicator& comm) {
  AgreementTransport t;
  t.rank = comm.rank();
  t.size = comm.size();
  t.all_gather = [this, &comm](uint64_t mine) {
    std::vector<uint64_t> all(static_cast<size_t>(comm.size()));
    all[static_cast<size_t>(comm.rank())] = mine;
    all_gather(comm, all.data(), sizeof(uint64_t), DType::kU8);
    return all;
  };
  t.broadcast = [this, &comm](void* buf, size_t bytes, int root) {
    broadcast(comm, buf, bytes, DType::kU8, root);
  };
  return t;
}

}  // namespace zs
