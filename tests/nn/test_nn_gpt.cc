// The CPU GPT: the shared model suite (tests/nn/gpt_model_typed_test.h) instantiated for
// GptModel through CpuGptRunner (UnitHarness: host parameters and gradients), and the CPU-only
// default_threads().
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "models/gpt/gpt.h"
#include "tests/nn/gpt_model_typed_test.h"
#include "unit/unit_harness.h"

namespace zs::nn {
namespace {

// The Runner of gpt_model_typed_test.h for the CPU model.
class CpuGptRunner {
 public:
  // The CPU runs fp16 products in fp32 (fp16 weights converted), bf16 products on bf16 operands.
  static constexpr double kBf16LossRel = 2e-2;
  static constexpr double kFp16LossRel = 2e-3;
  static const char* unavailable() { return nullptr; }

  CpuGptRunner(const GptConfig& c, uint64_t seed, MemoryTracker* tracker = nullptr)
      : model_(c, tracker), host_(model_, c.run.compute_dtype, seed) {}

  GptModel& model() { return model_; }
  std::vector<float>& master(size_t u, size_t i) { return host_.master(u, i); }
  void refresh() { host_.refresh(); }
  void forward(bool training = true) { host_.forward(training); }
  void backward(float loss_scale = 1.0f) { host_.backward(loss_scale); }
  std::vector<float> grad(size_t u, size_t i) const { return host_.grad(u, i); }
  bool produced_all() const { return host_.produced_all(); }
  void sgd(float lr, float loss_scale = 1.0f) { host_.sgd(lr, loss_scale); }
  size_t num_units() const { return host_.num_units(); }
  size_t num_params(size_t u) const { return host_.num_params(u); }
  const ParamSpec& spec(size_t u, size_t i) const { return host_.spec(u, i); }

 private:
  GptModel model_;
  UnitHarness host_;
};

}  // namespace

namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Cpu, GptModelTest, CpuGptRunner);
}  // namespace testing

namespace {

TEST(NnGpt, DefaultThreadsSplitsCoresByLocalRanks) {
  const char* old = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const std::string saved = old ? old : "";
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int all = default_threads();
  EXPECT_GE(all, 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_EQ(default_threads(), std::max(1, all / 2));
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000", 1);
  EXPECT_EQ(default_threads(), 1);
  if (old)
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", saved.c_str(), 1);
  else
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

}  // namespace
}  // namespace zs::nn
