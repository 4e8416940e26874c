// Writes what the Python interop check (safetensors_interop.py) compares: a small trained model
// exported to safetensors in fp32 and bf16, and a plain dump of the same fp32 values
// (dump.json: names and shapes in order; dump.bin: their fp32 values, little-endian).
// Usage: mpirun -np N safetensors_dump OUTDIR
#include <mpi.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../runtime/mlp_model.h"
#include "checkpoint/safetensors.h"
#include "collectives/mpi_communicator.h"
#include "core/error.h"
#include "runtime/engine.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 0;
  try {
    if (argc != 2) zs::fail(zs::ErrorCode::kInvalidArgument, "usage: safetensors_dump OUTDIR");
    const std::string out = argv[1];
    auto comm = zs::MpiCommunicator::world();
    zs::EngineConfig cfg;
    cfg.stage = zs::ZeroStage::k3;
    cfg.precision.param_dtype = zs::DType::kBF16;
    zs::testing::MlpModel model({}, comm->size(), comm->rank(), 1);
    zs::MemoryTracker tracker;
    zs::Engine engine(model, *comm, cfg, &tracker);
    for (int s = 0; s < 2; ++s) {
      model.set_step(s);
      engine.step();
    }
    zs::safetensors::export_model(engine, *comm, out + "/model_f32.safetensors", zs::DType::kF32);
    zs::safetensors::export_model(engine, *comm, out + "/model_bf16.safetensors", zs::DType::kBF16);
    nlohmann::json index = nlohmann::json::array();
    std::ofstream bin;
    if (comm->rank() == 0) bin.open(out + "/dump.bin", std::ios::binary);
    for (size_t u = 0; u < engine.num_units(); ++u) {
      for (size_t p = 0; p < engine.param_specs(u).size(); ++p) {
        const std::vector<float> v = engine.gather_master_param(u, p);
        const zs::ParamSpec& s = engine.param_specs(u)[p];
        index.push_back({{"name", engine.unit_name(u) + "." + s.name}, {"shape", s.shape}});
        if (comm->rank() == 0) bin.write(reinterpret_cast<const char*>(v.data()), v.size() * 4);
      }
    }
    if (comm->rank() == 0) std::ofstream(out + "/dump.json") << index.dump(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "safetensors_dump: %s\n", e.what());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
