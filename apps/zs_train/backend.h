// The device one zs_train rank computes on (--device): the engine's communicator, its DeviceOps
// and the GPT model written for that device. The trainer's own host-side collectives (option
// agreement, validation loss, memory peaks, checkpoints) always use the MPI world communicator.
#pragma once

#include <memory>
#include <string>

#include "collectives/hierarchical_communicator.h"
#include "collectives/mpi_communicator.h"
#include "core/memory_tracker.h"
#include "device/device_ops.h"
#include "models/gpt/gpt_model_base.h"

namespace zs::train {

class Backend {
 public:
  virtual ~Backend() = default;
  // Where the model and the engine's buffers live, e.g. "cpu" or "cuda:0 (NVIDIA H100 ...)".
  virtual std::string device_name() const = 0;
  // The communicator the engine reduces and gathers with (device memory).
  virtual Communicator& engine_comm() = 0;
  // The engine's DeviceOps; null for the CPU (the engine's default).
  virtual DeviceOps* ops() = 0;
  virtual nn::GptModelBase& model() = 0;
  // Waits until the device finished the work enqueued so far (for step timing).
  virtual void synchronize() {}
  // Dense bf16/fp16 peak of one device in TFLOP/s for MFU; 0 when unknown.
  virtual double peak_tflops() const { return 0.0; }
  // engine_comm() as a HierarchicalCommunicator, for its node layout and link counters; null
  // when it is not one (CUDA, one rank).
  virtual HierarchicalCommunicator* hierarchical() { return nullptr; }
};

// device: "cpu" or "cuda". Throws zs::Error(kUnsupported) for "cuda" in a build without the CUDA
// backend or on a node without a GPU for this rank, kInvalidArgument for another name.
// The CPU backend with more than one rank gives the engine a HierarchicalCommunicator over
// `world` (collective: every rank constructs it), running the two-level algorithms when
// `hierarchical_collectives` and the node layout allows them, the flat ones otherwise; either
// way its link counters split the bytes by link class.
std::unique_ptr<Backend> make_backend(const std::string& device, const nn::GptConfig& cfg,
                                      MpiCommunicator& world, MemoryTracker& tracker,
                                      bool hierarchical_collectives = false);

// The CUDA backend (backend_cuda.cc, built with the toolkit only).
std::unique_ptr<Backend> make_cuda_backend(const nn::GptConfig& cfg, MpiCommunicator& world,
                                           MemoryTracker& tracker);

}  // namespace zs::train
