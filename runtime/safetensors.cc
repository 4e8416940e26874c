#include "runtime/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/convert.h"
#include "core/error.h"
#include "runtime/checkpoint_io.h"

namespace zs::safetensors {
namespace {

using nlohmann::json;

[[noreturn]] void corrupt(const std::string& what) { throw Error(ErrorCode::kCorruptData, what); }

// The dtypes this module converts from.
bool to_dtype(const std::string& name, DType& out) {
  if (name == "F32")
    out = DType::kF32;
  else if (name == "BF16")
    out = DType::kBF16;
  else if (name == "F16")
    out = DType::kF16;
  else
    return false;
  return true;
}

}  // namespace

void export_model(Engine& e, Communicator& comm, const std::string& path, DType dtype) {
  ZS_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "safetensors export: dtype {} (fp32 or bf16 expected)", dtype_name(dtype));
  ZS_CHECK(!path.empty(), ErrorCode::kInvalidArgument, "safetensors export: empty path");
  const size_t esize = dtype_size(dtype);
  const char* dname = dtype == DType::kF32 ? "F32" : "BF16";
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"producer", "zeroshard"}};
  uint64_t off = 0;
  for (size_t u = 0; u < e.num_units(); ++u) {
    for (const ParamSpec& s : e.param_specs(u)) {
      const uint64_t bytes = static_cast<uint64_t>(s.numel()) * esize;
      header[e.unit_name(u) + "." + s.name] = {
          {"dtype", dname}, {"shape", s.shape}, {"data_offsets", {off, off + bytes}}};
      off += bytes;
    }
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  const bool writer = comm.rank() == 0;
  std::unique_ptr<ckpt::OutFile> out;
  std::optional<Error> err;
  auto guarded = [&](const auto& fn) {
    if (!writer || err) return;
    try {
      fn();
    } catch (const Error& x) {
      err = x;
    } catch (const std::exception& x) {
      err = Error(ErrorCode::kInternal, x.what());
    }
  };
  guarded([&] {
    out = std::make_unique<ckpt::OutFile>(tmp);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));
    out->write(len, 8);
    out->write(text.data(), text.size());
  });
  std::vector<uint16_t> half;
  for (size_t u = 0; u < e.num_units(); ++u) {
    const std::vector<float> full = e.gather_master_group(u);  // collective: every rank
    guarded([&] {
      const GroupLayout& l = e.layout(u);
      for (const ParamSlot& slot : l.params) {
        const float* src = full.data() + slot.offset;
        if (dtype == DType::kF32) {
          out->write(src, static_cast<size_t>(slot.numel) * 4);
        } else {
          half.resize(static_cast<size_t>(slot.numel));
          fp32_to_bf16(src, half.data(), half.size());
          out->write(half.data(), half.size() * 2);
        }
      }
    });
  }
  guarded([&] {
    out->finish();
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot rename to {}: {}", tmp, path,
             ec.message());
    const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
    ckpt::sync_dir(parent.string());
  });
  if (err) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
  }
  ckpt::agree(comm, [&] {
    if (err) throw *err;
  });
}

void import_model(Engine& e, Communicator& comm, const std::string& path) {
  std::vector<std::vector<float>> staged(e.num_units());
  ckpt::agree(comm, [&] {
    ckpt::InFile f(path);
    Header h;
    try {
      std::byte first[8] = {};
      if (f.size() < 8) corrupt(fmt::format("truncated: {} bytes", f.size()));
      f.read_at(0, first, 8);
      const uint64_t n = header_length(first);
      if (8 + n > static_cast<uint64_t>(f.size()))
        corrupt(fmt::format("truncated: header of {} bytes in a {}-byte file", n, f.size()));
      std::vector<std::byte> text(n);
      f.read_at(8, text.data(), text.size());
      h = parse_header(text, static_cast<uint64_t>(f.size()) - 8 - n);
    } catch (const Error& x) {
      throw Error(x.code(), fmt::format("{}: {}", path, x.what()));
    }
    std::unordered_map<std::string, const TensorInfo*> by_name;
    for (const TensorInfo& t : h.tensors) by_name[t.name] = &t;
    size_t matched = 0;
    for (size_t u = 0; u < e.num_units(); ++u) {
      const std::vector<ParamSpec>& specs = e.param_specs(u);
      const GroupLayout& l = e.layout(u);
      const UnitShardState st = e.shard_state(u);
      staged[u].assign(static_cast<size_t>(st.numel), 0.0f);
      for (size_t p = 0; p < specs.size(); ++p) {
        const std::string name = e.unit_name(u) + "." + specs[p].name;
        auto it = by_name.find(name);
        ZS_CHECK(it != by_name.end(), ErrorCode::kInvalidArgument, "{}: tensor \"{}\" is missing",
                 path, name);
        const TensorInfo& t = *it->second;
        ++matched;
        ZS_CHECK(t.shape == specs[p].shape, ErrorCode::kInvalidArgument,
                 "{}: tensor \"{}\" has shape [{}], the model needs [{}]", path, name,
                 fmt::join(t.shape, ", "), fmt::join(specs[p].shape, ", "));
        DType dt = DType::kF32;
        ZS_CHECK(to_dtype(t.dtype, dt), ErrorCode::kInvalidArgument,
                 "{}: tensor \"{}\" has dtype {} (F32, BF16 or F16 expected)", path, name, t.dtype);
        const int64_t off = l.params[p].offset;
        const int64_t lo = std::max(st.begin, off);
        const int64_t hi = std::min(st.begin + st.numel, off + l.params[p].numel);
        if (lo >= hi) continue;
        const size_t es = dtype_size(dt);
        const size_t n = static_cast<size_t>(hi - lo);
        std::vector<std::byte> raw(n * es);
        f.read_at(
            static_cast<int64_t>(h.data_start() + t.begin) + (lo - off) * static_cast<int64_t>(es),
            raw.data(), raw.size());
        convert(raw.data(), dt, staged[u].data() + (lo - st.begin), DType::kF32, n);
      }
    }
    if (matched != h.tensors.size()) {
      std::set<std::string> expected;
      for (size_t u = 0; u < e.num_units(); ++u) {
        for (const ParamSpec& s : e.param_specs(u)) expected.insert(e.unit_name(u) + "." + s.name);
      }
      std::string extra;
      for (const TensorInfo& t : h.tensors) {
        if (!expected.count(t.name)) {
          extra = t.name;
          break;
        }
      }
      fail(ErrorCode::kInvalidArgument, "{}: {} tensor(s) the model does not have, e.g. \"{}\"",
           path, h.tensors.size() - matched, extra);
    }
  });
  for (size_t u = 0; u < e.num_units(); ++u) {
    const UnitShardState st = e.shard_state(u);
    std::memcpy(st.master, staged[u].data(), staged[u].size() * sizeof(float));
  }
  e.refresh_params_from_master();
}

}  // namespace zs::safetensors
