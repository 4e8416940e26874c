#include "backend.h"

#include "core/error.h"
#include "nn/gpt.h"

namespace zs::train {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const nn::GptConfig& cfg, MpiCommunicator& world, MemoryTracker& tracker)
      : world_(world), model_(cfg, &tracker) {}
  std::string device_name() const override { return "cpu"; }
  Communicator& engine_comm() override { return world_; }
  DeviceOps* ops() override { return nullptr; }
  nn::GptModelBase& model() override { return model_; }

 private:
  MpiCommunicator& world_;
  nn::GptModel model_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, const nn::GptConfig& cfg,
                                      MpiCommunicator& world, MemoryTracker& tracker) {
  if (device == "cpu") return std::make_unique<CpuBackend>(cfg, world, tracker);
  if (device == "cuda") {
#ifdef ZS_TRAIN_CUDA
    return make_cuda_backend(cfg, world, tracker);
#else
    fail(ErrorCode::kUnsupported,
         "--device cuda: this build has no CUDA backend (the CUDA toolkit was not found when it "
         "was configured; see docs/gpu.md)");
#endif
  }
  fail(ErrorCode::kInvalidArgument, "--device must be cpu or cuda, not '{}'", device);
}

}  // namespace zs::train
