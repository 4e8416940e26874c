// Thread budget of the nn compute: one count per model, applied to OpenMP (which oneDNN's OpenMP
// runtime and Eigen follow) for the duration of a unit call.
#pragma once

namespace zs::nn {

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
