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
// fake_nodes = K >= 1: then the ranks are taken to be spread over K nodes in contiguous blocks of
// size()/K (throws zs::Error(kInvalidArgument) when K < 0, K > size() or K does not divide size()),
// so one host can test multi-node code paths. Every rank must pass the same fake_nodes: it is
// compared first (collectives/mpi_agreement.h), and a difference throws zs::Error(kInvalidArgument)
// on every rank ("node topology: ranks disagree on ZS_FAKE_NODES: 0 on rank 0, 2 on rank 1").
// The communicators made take `comm`'s options. Without fake_nodes: Settings::fake_nodes from the
// environment (ZS_FAKE_NODES=K; [Note: environment settings] in core/settings.h), which throws for
// a bad ZS_* variable.
NodeTopology make_node_topology(MpiCommunicator& comm, int fake_nodes);
NodeTopology make_node_topology(MpiCommunicator& comm);

// This process's rank among the processes of its node, for GPU selection: from the launcher's
// environment (LaunchEnvironment::local_rank in core/settings.h: OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, SLURM_LOCALID) when set, else from an MPI_COMM_TYPE_SHARED split of
// MPI_COMM_WORLD (then MPI must be initialised).
int local_rank_from_env();

}  // namespace zs
