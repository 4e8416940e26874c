// custom_model: trains the spiral classifier of spiral_model.h with zeroshard under mpirun.
//
//   mpirun -np 2 ./custom_model --stage 3 --steps 300
//
// Each rank runs this same program. It initialises MPI, wraps MPI_COMM_WORLD in a zeroshard
// communicator, builds the model and the engine, and calls Engine::step() once per optimizer
// step. Rank 0 prints the loss every --log-every steps, then the accuracy on held-out samples
// and `param_hash:`, a hash of the trained fp32 parameters that is the same for every ZeRO stage
// at one world size.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>

#include <zeroshard/collectives/mpi_communicator.h>
#include <zeroshard/core/dtype.h>
#include <zeroshard/core/error.h>
#include <zeroshard/runtime/engine.h>

#include "spiral_model.h"

namespace {

struct Options {
  int stage = 3;
  int steps = 300;
  std::string dtype = "fp32";
  int micro_batches = 1;
  int batch = 32;  // samples per rank per micro-batch
  int hidden = 64;
  float lr = 1e-2f;
  int log_every = 50;
  int eval_batches = 16;  // per rank
  bool help = false;
};

const char* const kUsage =
    "usage: custom_model [--stage 0-3] [--steps N] [--dtype fp32|bf16|fp16]\n"
    "                    [--gradient-accumulation-steps N] [--batch N (per rank)] [--hidden N]\n"
    "                    [--lr X] [--log-every N]\n";

// A flag's number; throws std::invalid_argument naming the flag.
double number(std::string_view flag, const std::string& value) {
  size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(value, &used);
  } catch (const std::exception&) {
  }
  if (used == 0 || used != value.size())
    throw std::invalid_argument(std::string(flag) + " needs a number, not '" + value + "'");
  return v;
}

// "--name value" pairs; throws std::invalid_argument for anything else.
Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help") {
      o.help = true;
      return o;
    }
    if (i + 1 >= argc) throw std::invalid_argument("missing value after " + std::string(flag));
    const std::string value = argv[++i];
    if (flag == "--dtype") {
      o.dtype = value;
      continue;
    }
    const double v = number(flag, value);
    if (flag == "--stage") {
      o.stage = static_cast<int>(v);
    } else if (flag == "--steps") {
      o.steps = static_cast<int>(v);
    } else if (flag == "--gradient-accumulation-steps") {
      o.micro_batches = static_cast<int>(v);
    } else if (flag == "--batch") {
      o.batch = static_cast<int>(v);
    } else if (flag == "--hidden") {
      o.hidden = static_cast<int>(v);
    } else if (flag == "--lr") {
      o.lr = static_cast<float>(v);
    } else if (flag == "--log-every") {
      o.log_every = static_cast<int>(v);
    } else {
      throw std::invalid_argument("unknown flag " + std::string(flag));
    }
  }
  if (o.steps < 1 || o.batch < 1 || o.hidden < 1 || o.log_every < 1)
    throw std::invalid_argument("--steps, --batch, --hidden and --log-every must be >= 1");
  if (o.stage < 0 || o.stage > 3) throw std::invalid_argument("--stage must be 0, 1, 2 or 3");
  return o;
}

// The engine's configuration: our flags mapped onto zeroshard's policy structs
// (zeroshard/runtime/engine_config.h). Invalid values are refused by the Engine's constructor.
zs::EngineConfig engine_config(const Options& o) {
  zs::EngineConfig cfg;
  cfg.stage = zs::zero_stage_from_int(o.stage);
  // Parameters in the compute dtype, gradients reduced and accumulated in fp32.
  cfg.precision = {zs::parse_dtype(o.dtype), zs::DType::kF32};
  cfg.micro_batches = o.micro_batches;
  cfg.optimizer.kind = zs::OptimizerKind::kAdamW;
  cfg.optimizer.adamw.weight_decay = 1e-4f;
  cfg.optimizer.schedule.lr = o.lr;
  cfg.optimizer.schedule.warmup_steps = 10;
  cfg.optimizer.schedule.total_steps = o.steps;
  cfg.clip_norm = 1.0f;
  return cfg;
}

// Mean loss and accuracy over held-out samples (indices far past any training step), each rank
// evaluating its own share; the sums are all-reduced. Collective.
void evaluate(zs::Engine& engine, spiral::SpiralModel& model, zs::Communicator& comm, int batches,
              double* loss, double* accuracy) {
  constexpr int64_t kHeldOut = int64_t{1} << 40;
  const int64_t b = model.shape.batch;
  double sums[3] = {0.0, 0.0, 0.0};  // loss * samples, correct, samples
  for (int e = 0; e < batches; ++e) {
    model.load_samples(kHeldOut + (static_cast<int64_t>(e) * comm.size() + comm.rank()) * b);
    engine.forward();  // gathers parameters as the stage requires; StepInfo::training = false
    sums[0] += model.loss() * b;
    sums[1] += model.correct();
    sums[2] += b;
  }
  comm.all_reduce(sums, sums, 3, zs::DType::kF64, zs::ReduceOp::kSum);  // in place
  *loss = sums[0] / sums[2];
  *accuracy = sums[1] / sums[2];
}

int train(const Options& o, zs::Communicator& comm) {
  const bool root = comm.rank() == 0;
  spiral::Shape shape;
  shape.hidden = o.hidden;
  shape.batch = o.batch;
  shape.micro_batches = o.micro_batches;
  shape.world = comm.size();
  shape.rank = comm.rank();
  spiral::SpiralModel model(shape);
  // Lays out, allocates and initialises every parameter, sharded as the stage says.
  zs::Engine engine(model, comm, engine_config(o));
  if (root)
    std::printf(
        "custom_model: %zu units, %lld parameters, ZeRO-%d, %s, world size %d, %d samples "
        "per rank per step\n",
        engine.num_units(), static_cast<long long>(engine.num_params()), o.stage, o.dtype.c_str(),
        comm.size(), o.batch * o.micro_batches);

  double first_loss = 0.0, last_loss = 0.0;
  for (int s = 0; s < o.steps; ++s) {
    model.set_step(s);
    // Forward and backward of every micro-batch (load_micro_batch first), gradient reduction,
    // clipping, AdamW, re-sharding. The loss is the mean over micro-batches and ranks.
    const zs::StepStats st = engine.step();
    if (s == 0) first_loss = st.loss;
    last_loss = st.loss;
    if (root && (s == 0 || (s + 1) % o.log_every == 0 || s + 1 == o.steps))
      std::printf("step %4d  loss %.4f  lr %.2e  grad_norm %.3f%s\n", s + 1, st.loss, st.lr,
                  st.grad_norm, st.skipped ? "  (skipped: non-finite gradient)" : "");
  }

  double eval_loss = 0.0, accuracy = 0.0;
  evaluate(engine, model, comm, o.eval_batches, &eval_loss, &accuracy);
  const std::string hash = zs::param_hash_hex(engine.param_hash());  // collective
  if (root) {
    std::printf("train loss %.4f -> %.4f\n", first_loss, last_loss);
    std::printf("held-out loss %.4f  accuracy %.3f\n", eval_loss, accuracy);
    std::printf("param_hash: %s\n", hash.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // zeroshard uses MPI from the thread that calls it; the program owns MPI_Init/MPI_Finalize.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  Options options;
  try {
    options = parse_options(argc, argv);  // the same on every rank: all exit alike
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "custom_model: %s\n%s", e.what(), kUsage);
    MPI_Finalize();
    return 2;
  }
  if (options.help) {
    if (rank == 0) std::printf("%s", kUsage);
    MPI_Finalize();
    return 0;
  }

  int rc = 1;
  try {
    // The communicator the engine reduces and gathers over: a dup of MPI_COMM_WORLD.
    auto comm = zs::MpiCommunicator::world();
    rc = train(options, *comm);
  } catch (const std::exception& e) {
    // zs::Error names the operation, the rank and the sizes. One rank may fail while the others
    // wait in a collective, so stop them all.
    std::fprintf(stderr, "custom_model: rank %d: error: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
