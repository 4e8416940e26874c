// A deliberately induced hang for the watchdog ([Note: flight recorder]): every rank runs five
// all-reduces, then the last rank skips the sixth and sleeps while the others wait in it. With
// ZS_WATCHDOG_S set, the waiting ranks' watchdog must end the job (exit 3) and name seq 6 and the
// last rank. Run by hang_test.sh; exits 0 only if no watchdog fired (a failure).
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "collectives/mpi_communicator.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    auto comm = zs::MpiCommunicator::world();
    std::vector<float> v(8, 1.0f);
    for (int i = 0; i < 5; ++i) {
      comm->all_reduce(v.data(), v.data(), v.size(), zs::DType::kF32, zs::ReduceOp::kSum);
    }
    if (comm->rank() == comm->size() - 1) {
      sleep(60);  // never arrives at the sixth
    } else {
      comm->all_reduce(v.data(), v.data(), v.size(), zs::DType::kF32, zs::ReduceOp::kSum);
    }
    std::fprintf(stderr, "hang_test: rank %d: no watchdog fired\n", comm->rank());
  }
  MPI_Finalize();
  return 0;
}
