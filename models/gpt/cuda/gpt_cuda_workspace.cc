// gpt_cuda_workspace() (models/gpt/gpt_activations.h): the device scratch CudaGptModel's kernels
// and cuBLASLt size. Host C++ with no CUDA header, built into zs_gpt in every build so that the
// buffer table and the activation plan of models/gpt/ can size a GPU's buffers anywhere without
// including the CUDA layer kit themselves.
#include <algorithm>

#include "models/gpt/gpt_activations.h"
#include "nn/cuda/workspace_sizes.h"

namespace zs::nn {

GptCudaWorkspace gpt_cuda_workspace(const GptActivationDims& d) {
  const int64_t M = d.tokens(), C = d.width;
  const int64_t wide = std::max(d.fc_cols(), d.qkv_cols());  // dwide's columns
  GptCudaWorkspace w;
  w.bias_scratch = std::max(gpu::bias_backward_scratch_floats(M, wide),
                            gpu::layernorm_backward_scratch_floats(M, C)) *
                   4;
  w.cublas_workspace = gpu::kCublasWorkspaceBytes;
  return w;
}

}  // namespace zs::nn
