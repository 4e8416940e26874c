// Crash injection for checkpoints ([Note: fault injection] in checkpoint/checkpoint_io.h): a
// process that dies at a write point of a save. Run through mpirun by crash_save_test.sh:
//   crash_save DIR save K    train 1 step, save; train 1 more, save again with rank 0 dying
//                            (_exit, no cleanup, no unwinding) at its K-th write point; prints
//                            "points N" when K is past the last point (the save completed)
//   crash_save DIR check     load the latest checkpoint in DIR and print its step and hash
// Open MPI ends the job when rank 0 dies, so the other ranks die wherever they are too.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "../runtime/mlp_model.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/checkpoint_io.h"
#include "collectives/mpi_communicator.h"
#include "runtime/engine.h"

namespace {

class DieAt : public zs::FaultInjector {
 public:
  explicit DieAt(int k) : k_(k) {}
  zs::Fault at(const char* op, const std::string& path) override {
    if (count_++ == k_) {
      std::fprintf(stderr, "crash_save: dying at write point %d (%s %s)\n", k_, op, path.c_str());
      std::fflush(stderr);
      _exit(9);
    }
    return zs::Fault::kNone;
  }
  int count() const { return count_; }

 private:
  int k_;
  int count_ = 0;
};

zs::EngineConfig config() {
  zs::EngineConfig c;
  c.stage = zs::ZeroStage::k3;
  c.precision.param_dtype = zs::DType::kBF16;
  c.optimizer.schedule.lr = 1e-2f;
  return c;
}

int run(const std::string& dir, const std::string& mode, int k) {
  auto comm = zs::MpiCommunicator::world();
  zs::testing::MlpModel model(zs::testing::MlpShape{}, comm->size(), comm->rank(), 1);
  zs::MemoryTracker tracker;
  zs::Engine engine(model, *comm, config(), &tracker);
  if (mode == "check") {
    const auto latest = zs::latest_checkpoint(dir);
    if (!latest) {
      if (comm->rank() == 0) std::printf("no checkpoint\n");
      return 1;
    }
    zs::load_checkpoint(engine, *comm, *latest);
    const std::string h = zs::param_hash_hex(engine.param_hash());
    if (comm->rank() == 0) std::printf("latest %s hash %s\n", latest->c_str(), h.c_str());
    return 0;
  }
  for (int step = 0; step < 2; ++step) {
    model.set_step(step);
    engine.step();
    const std::string h = zs::param_hash_hex(engine.param_hash());
    if (comm->rank() == 0) std::printf("step %d hash %s\n", step + 1, h.c_str());
    std::fflush(stdout);
    DieAt die(comm->rank() == 0 && step == 1 ? k : -1);
    zs::install_fault_injector(&die);
    zs::save_checkpoint(engine, *comm, dir);
    zs::install_fault_injector(nullptr);
    if (comm->rank() == 0 && step == 1) std::printf("points %d\n", die.count());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rc = 2;
  if (argc >= 3) {
    try {
      rc = run(argv[1], argv[2], argc > 3 ? std::atoi(argv[3]) : -1);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "crash_save: %s\n", e.what());
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
