// Thread budget of the nn compute: one count per model, applied to OpenMP (which oneDNN's OpenMP
// runtime and Eigen follow) for the duration of a unit call.
#pragma once

namespace zs::nn {

// Cores available to this process divided by the ranks on this node (OMPI_COMM_WORLD_LOCAL_SIZE,
// 1 when unset), at least 1: the team of a model built with threads 0.
int default_threads();

// Cores available to this process divided by `local_ranks`, at least 1: default_threads() for a
// node of `local_ranks` ranks (a planner's, which runs outside the job).
int default_threads_for(int local_ranks);

// Sets omp_set_num_threads(n) (and Eigen's count) for the scope, restores the previous value on
// exit. n <= 0 leaves the settings alone. Thread-safety: affects the calling thread only.
class ThreadScope {
 public:
  explicit ThreadScope(int n);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace zs::nn
