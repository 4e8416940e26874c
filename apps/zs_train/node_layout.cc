#include "node_layout.h"

#include "collectives/topology.h"
#include "core/error.h"

namespace zs::train {

int block_node_size(MpiCommunicator& comm, const char* what) {
  const NodeTopology t = make_node_topology(comm);
  const bool block = comm.rank() == t.node_index * t.local_size + t.local_rank;
  // The max over ranks of L, -L and "not block-placed" (small integers, exact in fp32): nodes
  // are uniform when max L == -max(-L).
  const float mine[3] = {static_cast<float>(t.local_size), -static_cast<float>(t.local_size),
                         block ? 0.0f : 1.0f};
  float all[3];
  comm.all_reduce(mine, all, 3, DType::kF32, ReduceOp::kMax);
  const int most = static_cast<int>(all[0]), least = static_cast<int>(-all[1]);
  ZS_CHECK(most == least && all[2] == 0.0f, ErrorCode::kInvalidArgument,
           "{} needs nodes with the same number of ranks, placed in blocks (ranks 0..L-1 on the "
           "first node, L..2L-1 on the next, ...): this job has {} to {} ranks per node{}",
           what, least, most,
           all[2] == 0.0f ? ""
                          : ", not in blocks (use mpirun --map-by node:"
                            "PE=1 --rank-by slot or a hostfile in node order)");
  return most;
}

}  // namespace zs::train
