#include "nn/threads.h"

#include <omp.h>
#include <sched.h>

#include <Eigen/Core>
#include <thread>

#include "core/settings.h"

namespace zs::nn {

int default_threads_for(int local) {
  int cores = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  if (cores <= 0) cores = 1;
  if (local <= 0) local = 1;
  // An mpirun that binds each rank to one core already shrinks the affinity mask.
  if (cores < local) return 1;
  const int t = cores / local;
  return t < 1 ? 1 : t;
}

int default_threads() {
  // The launcher's count of ranks on this node (LaunchEnvironment::openmpi_local_size).
  return default_threads_for(LaunchEnvironment::from_environment().openmpi_local_size.value_or(1));
}

ThreadScope::ThreadScope(int n) {
  if (n <= 0) return;
  previous_ = omp_get_max_threads();
  if (previous_ != n) {
    omp_set_num_threads(n);
    Eigen::setNbThreads(n);
  } else {
    previous_ = 0;
  }
}

ThreadScope::~ThreadScope() {
  if (previous_ > 0) {
    omp_set_num_threads(previous_);
    Eigen::setNbThreads(previous_);
  }
}

}  // namespace zs::nn
