// Our fp32 logits and one backward's gradients for a Hugging Face directory, for the parity
// check with transformers (tests/interop/hf_parity.py): builds the model DIR/config.json
// describes (fp32, one process), loads DIR's weights through the Hugging Face import, and for the
// token sequences of TOKENS (JSON {"tokens": [[t0, ..., tT], ...]}, B sequences of T + 1 ids)
//   - the vocab logits of every position of sequence 0 (position k from an inference forward of
//     tokens[0..k], what a causal model computes at k of the whole sequence),
//   - the gradient of every parameter of the mean cross-entropy of predicting tokens[:, 1:] from
//     tokens[:, :-1] over the B sequences (one forward and backward, unit by unit as the engine
//     runs them, on the imported weights),
// written to OUT.bin (fp32, native byte order) with OUT.json indexing it: {"logits": [offset,
// T, V], "grads": {"<unit>.<param>": [offset, numel], ...}, "tied": bool}.
// Usage: hf_parity DIR TOKENS OUT
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "interop/gpt_hf.h"
#include "models/gpt/gpt.h"
#include "runtime/engine.h"
#include "unit/unit_harness.h"

namespace {

using nlohmann::json;

struct Sequences {
  std::vector<int32_t> flat;  // [B][T + 1]
  int batch = 0, length = 0;  // B, T + 1
};

Sequences read_tokens(const std::string& path) {
  std::ifstream in(path);
  ZS_CHECK(in.good(), zs::ErrorCode::kNotFound, "cannot read {}", path);
  const json j = json::parse(in);
  Sequences s;
  for (const json& row : j.at("tokens")) {
    const auto ids = row.get<std::vector<int32_t>>();
    ZS_CHECK(s.batch == 0 || static_cast<int>(ids.size()) == s.length,
             zs::ErrorCode::kInvalidArgument, "{}: sequences of different lengths", path);
    s.length = static_cast<int>(ids.size());
    s.flat.insert(s.flat.end(), ids.begin(), ids.end());
    ++s.batch;
  }
  ZS_CHECK(s.batch > 0 && s.length > 1, zs::ErrorCode::kInvalidArgument, "{}: no sequences", path);
  return s;
}

// Appends `v` to the binary file and returns its [offset, count] entry.
json append(std::ofstream& bin, int64_t& offset, const std::vector<float>& v) {
  bin.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  const json entry = {offset, v.size()};
  offset += static_cast<int64_t>(v.size());
  return entry;
}

int run(int argc, char** argv) {
  ZS_CHECK(argc == 4, zs::ErrorCode::kInvalidArgument, "usage: hf_parity DIR TOKENS OUT");
  const std::string dir = argv[1], out = argv[3];
  const Sequences seq = read_tokens(argv[2]);
  auto comm = zs::MpiCommunicator::world();
  ZS_CHECK(comm->size() == 1, zs::ErrorCode::kInvalidArgument, "hf_parity runs on one process");
  zs::nn::GptConfig cfg;
  const zs::nn::HfConfig hf = zs::nn::read_gpt_hf_config(*comm, dir);
  cfg.arch = hf.arch;
  cfg.arch.tied_embeddings = hf.tied;  // one parameter, as transformers has it
  cfg.arch.context = seq.length - 1;
  cfg.run.batch = seq.batch;
  cfg.run.threads = 1;
  zs::MemoryTracker tracker;
  zs::nn::GptModel model(cfg, &tracker);
  zs::EngineConfig ecfg;
  ecfg.stage = zs::ZeroStage::k0;
  ecfg.precision.param_dtype = zs::DType::kF32;
  zs::Engine engine(model, *comm, ecfg, &tracker);
  zs::nn::import_gpt_hf(engine, *comm, cfg, dir);

  std::ofstream bin(out + ".bin", std::ios::binary);
  int64_t offset = 0;
  json index;
  std::vector<float> logits;
  std::vector<int32_t> prompt(seq.flat.begin(), seq.flat.begin() + seq.length - 1);
  for (int k = 1; k <= seq.length - 1; ++k) {
    model.set_inference_input(prompt.data(), k);
    engine.forward();
    const std::span<const float> l = model.last_logits();
    logits.insert(logits.end(), l.begin(), l.end());
  }
  index["logits"] = append(bin, offset, logits);
  index["logits"].push_back(cfg.arch.vocab);

  // The imported weights in a single-process harness: forward and backward unit by unit.
  zs::UnitHarness h(model, zs::DType::kF32, 0);
  // The harness lists a tied parameter in both units (the owner's values); the engine once.
  for (size_t u = 0; u < h.num_units(); ++u)
    for (size_t i = 0, e = 0; i < h.num_params(u); ++i)
      if (!h.spec(u, i).tied()) h.master(u, i) = engine.gather_master_param(u, e++);
  h.refresh();
  model.set_tokens(seq.flat);
  model.load_micro_batch(0);
  h.forward();
  h.backward();
  index["loss"] = model.loss();
  for (size_t u = 0; u < h.num_units(); ++u)
    for (size_t i = 0; i < h.num_params(u); ++i)
      if (!h.spec(u, i).tied())  // a tied parameter's gradient is its owner's: both uses
        index["grads"][model.unit(u).name() + "." + h.spec(u, i).name] =
            append(bin, offset, h.grad(u, i));
  index["tied"] = hf.tied;
  std::ofstream(out + ".json") << index.dump();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    rc = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hf_parity: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
