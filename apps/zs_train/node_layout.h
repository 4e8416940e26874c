// The node layout ZeRO++ needs ([Note: node layout] in runtime/engine_config.h), read off the job.
#pragma once

#include "collectives/mpi_communicator.h"

namespace zs::train {

// Collective over `comm`: the ranks per node when every node has the same number of ranks and
// ranks are placed in blocks (node k holds ranks [L*k, L*k + L)), as make_node_topology() finds
// them (ZS_FAKE_NODES=K fakes K nodes). Throws zs::Error(kInvalidArgument) on every rank naming
// `what` (the switch that needs it) and the layout otherwise.
int block_node_size(MpiCommunicator& comm, const char* what);

}  // namespace zs::train
