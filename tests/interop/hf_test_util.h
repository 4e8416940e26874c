// Helpers of the Hugging Face interop tests (gpt_hf_test.cc, hf_llama_test.cc): a temporary
// directory shared by the ranks, a model with its engine, safetensors files as named fp32 tensors
// and variants of an exported directory.
#pragma once

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../runtime/test_world.h"
#include "checkpoint/safetensors_format.h"
#include "collectives/mpi_communicator.h"
#include "core/convert.h"
#include "core/error.h"
#include "models/gpt/gpt.h"
#include "runtime/engine.h"

namespace zs::nn {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::TempDir;
using testing::world;

// A GPT and its engine (fp32, ZeRO-3 over the world), initialised from `seed`.
struct Rig {
  Rig(uint64_t seed, GptConfig c) : config(c), model(c, &tracker) {
    EngineConfig e;
    e.stage = ZeroStage::k3;
    e.precision.param_dtype = DType::kF32;
    e.seed = seed;
    engine = std::make_unique<Engine>(model, world(), e, &tracker);
  }
  // Every parameter's full master, [unit][param]. Collective.
  std::vector<std::vector<std::vector<float>>> masters() {
    std::vector<std::vector<std::vector<float>>> m(engine->num_units());
    for (size_t u = 0; u < engine->num_units(); ++u) {
      for (size_t p = 0; p < engine->param_specs(u).size(); ++p)
        m[u].push_back(engine->gather_master_param(u, p));
    }
    return m;
  }
  GptConfig config;
  MemoryTracker tracker;
  GptModel model;
  std::unique_ptr<Engine> engine;
};

// Every value of `m` rounded to bf16 (nearest even), as an fp32 master.
inline std::vector<std::vector<std::vector<float>>> bf16_rounded(
    std::vector<std::vector<std::vector<float>>> m) {
  for (auto& unit : m) {
    for (auto& p : unit) {
      std::vector<uint16_t> h(p.size());
      fp32_to_bf16(p.data(), h.data(), p.size());
      convert(h.data(), DType::kBF16, p.data(), DType::kF32, p.size());
    }
  }
  return m;
}

// A safetensors file as named fp32 tensors, in file order.
struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using Tensors = std::vector<Tensor>;

Tensors read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* b = reinterpret_cast<const std::byte*>(raw.data());
  const uint64_t n = safetensors::header_length({b, 8});
  const safetensors::Header h = safetensors::parse_header({b + 8, n}, raw.size() - 8 - n);
  Tensors out;
  for (const safetensors::TensorInfo& t : h.tensors) {
    EXPECT_EQ(t.dtype, "F32") << t.name;
    Tensor x{t.name, t.shape, std::vector<float>((t.end - t.begin) / 4)};
    std::memcpy(x.data.data(), raw.data() + h.data_start() + t.begin, t.end - t.begin);
    out.push_back(std::move(x));
  }
  return out;
}

void write_f32(const std::string& path, const Tensors& ts) {
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  uint64_t off = 0;
  for (const Tensor& t : ts) {
    h[t.name] = {
        {"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + 4 * t.data.size()}}};
    off += 4 * t.data.size();
  }
  std::string text = h.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), text.size());
  for (const Tensor& t : ts)
    out.write(reinterpret_cast<const char*>(t.data.data()), 4 * t.data.size());
}

Tensor* find(Tensors& ts, const std::string& name) {
  for (Tensor& t : ts) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Rank 0 copies directory `from` into `to`, changing its tensors and config.json; then a barrier.
void variant(const std::string& from, const std::string& to,
             const std::function<void(Tensors&)>& tensors,
             const std::function<void(json&)>& config = {}) {
  if (world().rank() == 0) {
    fs::create_directories(to);
    Tensors ts = read_f32(from + "/model.safetensors");
    tensors(ts);
    write_f32(to + "/model.safetensors", ts);
    std::ifstream in(from + "/config.json");
    json c = json::parse(in);
    if (config) config(c);
    std::ofstream(to + "/config.json") << c.dump(2);
  }
  world().barrier();
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace
}  // namespace zs::nn
