// Node grouping: which ranks share a node, for hierarchical collectives and device selection.
#pragma once

#include <memory>

#include "collectives/communicator.h"
#include "collectives/mpi_communicator.h"

namespace zs {

// `local` holds the ranks of this node, ordered by rank; `cross` holds the ranks of every node
// with the same local rank, ordered by node. Nodes are numbered by their lowest rank.
struct NodeTopology {
  std::unique_ptr<Communicator> local;
  std::unique_ptr<Communicator> cross;
  int node_index = 0;
  int num_nodes = 1;
  int local_rank = 0;
  int local_size = 1;
};

// Collective over `comm`. Nodes are found with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED), unless
// ZS_FAKE_NODES=K is set: then the ranks are taken to be spread over K nodes in contiguous blocks
// of size()/K (throws zs::Error(kInvalidArgument) when K < 1, K > size() or K does not divide
// size()), which lets one host test multi-node code paths.
NodeTopology make_node_topology(MpiCommunicator& comm);

// This process's rank among the processes of its node, for GPU selection: from the launcher's
// environment (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID) when set, else from an
// MPI_COMM_TYPE_SHARED split of MPI_COMM_WORLD (then MPI must be initialised).
int local_rank_from_env();

}  // namespace zs
