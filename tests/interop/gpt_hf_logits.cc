// The logits our decoder computes, for the Hugging Face parity checks (tests/apps/
// hf_interop.py, hf_llama.py): builds the model that DIR/config.json describes, any family
// interop/hf_config.h maps (fp32, ZeRO-3 over the ranks of the job; a rotary model's context is
// the number of tokens), loads its weights, and writes the vocab logits of every position of
// TOKENS (comma-separated token ids) to OUT as JSON
//   {"logits": [[...], ...], "tied": bool, "model_type": "...", "shards": n}.
// Usage: mpirun -np N gpt_hf_logits DIR TOKENS OUT [NATIVE]
//   without NATIVE: the weights come from DIR (nn::import_gpt_hf: HF names and layouts, one file
//   or an index's shards);
//   with NATIVE: from our own safetensors export (names "<unit>.<param>"), so that an --export-hf
//   directory is checked against weights that did not pass through the HF mapping.
// Position k's logits are those of an inference forward of tokens[0..k] (the model keeps the
// last position's logits), which is what a causal model computes at position k of the whole
// sequence.
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "interop/gpt_hf.h"
#include "models/gpt/gpt.h"
#include "runtime/engine.h"

namespace {

std::vector<int32_t> parse_tokens(const std::string& csv) {
  std::vector<int32_t> ids;
  std::stringstream in(csv);
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(std::stoi(item));
  ZS_CHECK(!ids.empty(), zs::ErrorCode::kInvalidArgument, "no tokens in '{}'", csv);
  return ids;
}

int run(int argc, char** argv) {
  if (argc != 4 && argc != 5)
    zs::fail(zs::ErrorCode::kInvalidArgument, "usage: gpt_hf_logits DIR TOKENS OUT [NATIVE]");
  const std::string dir = argv[1], out = argv[3];
  const std::vector<int32_t> tokens = parse_tokens(argv[2]);
  auto comm = zs::MpiCommunicator::world();
  zs::nn::GptConfig cfg;
  const zs::nn::HfConfig hf = zs::nn::read_gpt_hf_config(*comm, dir);
  const int n = static_cast<int>(tokens.size());
  const bool learned = hf.arch.positions == zs::nn::PositionKind::kLearned;
  cfg.arch = zs::nn::hf_run_architecture(hf, learned ? hf.max_positions : n, dir);
  cfg.run.batch = 1;
  cfg.run.threads = 1;
  ZS_CHECK(n <= cfg.arch.context, zs::ErrorCode::kInvalidArgument, "{} tokens, the context is {}",
           n, cfg.arch.context);
  zs::MemoryTracker tracker;
  zs::nn::GptModel model(cfg, &tracker);
  zs::EngineConfig ecfg;
  ecfg.stage = zs::ZeroStage::k3;
  ecfg.precision.param_dtype = zs::DType::kF32;
  zs::Engine engine(model, *comm, ecfg, &tracker);
  int shards = 1;
  if (argc == 5) {
    zs::safetensors::import_model(engine, *comm, argv[4]);
  } else {
    const zs::nn::GptHfImport r = zs::nn::import_gpt_hf(engine, *comm, cfg, dir);
    shards = r.shards;
  }
  nlohmann::json rows = nlohmann::json::array();
  for (size_t k = 1; k <= tokens.size(); ++k) {
    model.set_inference_input(tokens.data(), static_cast<int>(k));
    engine.forward();
    const std::span<const float> l = model.last_logits();
    rows.push_back(std::vector<float>(l.begin(), l.end()));
  }
  if (comm->rank() == 0) {
    std::ofstream(out) << nlohmann::json{
        {"logits", rows},
        {"tied", hf.tied},
        {"model_type", zs::nn::hf_model_type(hf.family)},
        {"shards", shards}}.dump();
    if (hf.tied)
      std::printf("tied: lm_head.weight is %s (one parameter)\n",
                  zs::nn::hf_embedding_name(hf.family));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt_hf_logits: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
