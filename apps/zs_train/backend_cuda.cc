// The CUDA backend of zs_train: one GPU per rank, NCCL for the engine's collectives, the engine's
// element-wise work and the model's kernels on one compute stream (docs/gpu.md).
#include <cuda_runtime_api.h>

#include <cstring>

#include "backend.h"
#include "collectives/nccl_communicator.h"
#include "core/error.h"
#include "device/cuda/cuda_allocator.h"
#include "device/cuda/cuda_device_ops.h"
#include "device/cuda/cuda_error.h"
#include "models/gpt/cuda/gpt_cuda.h"

namespace zs::train {
namespace {

// Dense bf16/fp16 tensor-core peak (TFLOP/s, no sparsity) of the GPUs we know; 0 otherwise.
double known_peak_tflops(const cudaDeviceProp& p) {
  const std::string name = p.name;
  if (name.find("H100") != std::string::npos) {
    return name.find("PCIe") != std::string::npos ? 756.0 : 989.4;
  }
  if (name.find("H200") != std::string::npos) return 989.4;
  if (name.find("A100") != std::string::npos) return 312.0;
  return 0.0;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const nn::GptConfig& cfg, MpiCommunicator& world, MemoryTracker& tracker) {
    device_ = select_local_device();  // one GPU per rank; refuses two ranks on one GPU
    cudaDeviceProp prop{};
    cuda_check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
    name_ = fmt::format("cuda:{} ({})", device_, prop.name);
    peak_ = known_peak_tflops(prop);
    cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      comm_ = std::make_unique<NcclCommunicator>(world.handle(), stream_);
      ops_ = std::make_unique<CudaDeviceOps>(stream_);
      model_ = std::make_unique<nn::CudaGptModel>(cfg, stream_, &tracker, &ops_->allocator());
    } catch (...) {
      release();  // the destructor does not run when the constructor throws
      throw;
    }
  }
  ~CudaBackend() override { release(); }
  std::string device_name() const override { return name_; }
  Communicator& engine_comm() override { return *comm_; }
  DeviceOps* ops() override { return ops_.get(); }
  nn::GptModelBase& model() override { return *model_; }
  void synchronize() override { ops_->synchronize(); }
  double peak_tflops() const override { return peak_; }

 private:
  void release() {
    model_.reset();
    ops_.reset();
    comm_.reset();
    if (stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  int device_ = 0;
  std::string name_;
  double peak_ = 0.0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<NcclCommunicator> comm_;
  std::unique_ptr<CudaDeviceOps> ops_;
  std::unique_ptr<nn::CudaGptModel> model_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const nn::GptConfig& cfg, MpiCommunicator& world,
                                           MemoryTracker& tracker) {
  return std::make_unique<CudaBackend>(cfg, world, tracker);
}

}  // namespace zs::train
