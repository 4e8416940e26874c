#include "backend.h"

#include "core/error.h"
#include "models/gpt/gpt.h"

namespace zs::train {
namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend(const nn::GptConfig& cfg, MpiCommunicator& world, MemoryTracker& tracker,
             bool hierarchical)
      : world_(world), model_(cfg, &tracker) {
    if (world.size() > 1) {
      hier_ = std::make_unique<HierarchicalCommunicator>(world);
      hier_->set_hierarchical(hierarchical);
    }
  }
  std::string device_name() const override { return "cpu"; }
  Communicator& engine_comm() override {
    return hier_ ? static_cast<Communicator&>(*hier_) : world_;
  }
  DeviceOps* ops() override { return nullptr; }
  nn::GptModelBase& model() override { return model_; }
  HierarchicalCommunicator* hierarchical() override { return hier_.get(); }

 private:
  MpiCommunicator& world_;
  std::unique_ptr<HierarchicalCommunicator> hier_;
  nn::GptModel model_;
};

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& device, const nn::GptConfig& cfg,
                                      MpiCommunicator& world, MemoryTracker& tracker,
                                      bool hierarchical_collectives) {
  if (device == "cpu") {
    return std::make_unique<CpuBackend>(cfg, world, tracker, hierarchical_collectives);
  }
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
