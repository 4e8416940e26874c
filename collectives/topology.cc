#include "collectives/topology.h"

#include <mpi.h>

#include <string>

#include "collectives/mpi_agreement.h"
#include "core/error.h"
#include "core/settings.h"

namespace zs {

NodeTopology make_node_topology(MpiCommunicator& comm) {
  return make_node_topology(comm, Settings::from_environment().fake_nodes);
}

NodeTopology make_node_topology(MpiCommunicator& comm, int fake_nodes) {
  NodeTopology t;
  const int rank = comm.rank();
  const int size = comm.size();
  // Why before the value's check and any split ([Note: environment agreement] in
  // collectives/mpi_agreement.h): ranks with other values would split differently, or one would
  // throw while the others split, and hang.
  const Setting mine[] = {{"ZS_FAKE_NODES", std::to_string(fake_nodes)}};
  check_agreement(comm.handle(), mine, "node topology");
  ZS_CHECK(fake_nodes >= 0 && fake_nodes <= size && (fake_nodes == 0 || size % fake_nodes == 0),
           ErrorCode::kInvalidArgument,
           "node topology: ZS_FAKE_NODES={} must be in [1, {}] and divide the world size {} "
           "(rank {})",
           fake_nodes, size, size, rank);
  if (fake_nodes > 0) {
    const int block = size / fake_nodes;
    t.node_index = rank / block;
    t.num_nodes = fake_nodes;
    t.local = comm.split(t.node_index, rank);
  } else {
    auto local = comm.split_shared();
    // Node index = rank of this node's leader (local rank 0) among the leaders, by world rank.
    int leader_index = 0, num_nodes = 0;
    MPI_Comm leaders = MPI_COMM_NULL;
    MPI_Comm_split(comm.handle(), local->rank() == 0 ? 0 : MPI_UNDEFINED, rank, &leaders);
    if (leaders != MPI_COMM_NULL) {
      MPI_Comm_rank(leaders, &leader_index);
      MPI_Comm_size(leaders, &num_nodes);
      MPI_Comm_free(&leaders);
    }
    int info[2] = {leader_index, num_nodes};
    MPI_Bcast(info, 2, MPI_INT, 0, local->handle());
    t.node_index = info[0];
    t.num_nodes = info[1];
    t.local = std::move(local);
  }
  t.local_rank = t.local->rank();
  t.local_size = t.local->size();
  t.cross = comm.split(t.local_rank, rank);
  return t;
}

int local_rank_from_env() {
  if (const auto r = LaunchEnvironment::from_environment().local_rank) return *r;
  int initialized = 0;
  MPI_Initialized(&initialized);
  ZS_CHECK(initialized, ErrorCode::kInvalidArgument,
           "local_rank_from_env: no launcher variable (OMPI_COMM_WORLD_LOCAL_RANK, "
           "MPI_LOCALRANKID, SLURM_LOCALID) and MPI is not initialised");
  MPI_Comm shared = MPI_COMM_NULL;
  int world_rank = 0, local = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &shared);
  MPI_Comm_rank(shared, &local);
  MPI_Comm_free(&shared);
  return local;
}

}  // namespace zs
