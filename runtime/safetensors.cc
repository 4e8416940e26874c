#include "runtime/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "collectives/fail_together.h"
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

// The file layout of a 2-D parameter [r, c] stored transposed: [c, r].
std::vector<int64_t> file_shape(const ParamSpec& s, bool transposed) {
  if (!transposed) return s.shape;
  return {s.shape[1], s.shape[0]};
}

// The namer's answer for every parameter of the engine, trainable [unit][param] and frozen
// [unit][frozen param], checked: transposed parameters are 2-D and, for an export (`distinct`),
// no name is given twice.
struct Names {
  std::vector<std::vector<TensorName>> trainable, frozen;
};

Names resolve_names(Engine& e, const TensorNamer& namer, bool distinct) {
  Names names;
  names.trainable.resize(e.num_units());
  names.frozen.resize(e.num_units());
  std::set<std::string> seen;
  auto resolve = [&](size_t u, const ParamSpec& s) {
    TensorName n = namer ? namer(e.unit_name(u), s) : default_tensor_name(e.unit_name(u), s);
    ZS_CHECK(!n.name.empty(), ErrorCode::kInvalidArgument,
             "safetensors: no tensor name for parameter {}.{}", e.unit_name(u), s.name);
    ZS_CHECK(seen.insert(n.name).second || !distinct, ErrorCode::kInvalidArgument,
             "safetensors: tensor name \"{}\" given to two parameters (the second: {}.{})", n.name,
             e.unit_name(u), s.name);
    ZS_CHECK(!n.transposed || s.shape.size() == 2, ErrorCode::kInvalidArgument,
             "safetensors: parameter {}.{} is stored transposed but has {} dimensions",
             e.unit_name(u), s.name, s.shape.size());
    return n;
  };
  for (size_t u = 0; u < e.num_units(); ++u) {
    for (const ParamSpec& s : e.param_specs(u)) names.trainable[u].push_back(resolve(u, s));
    for (const ParamSpec& s : e.frozen_specs(u)) names.frozen[u].push_back(resolve(u, s));
  }
  return names;
}

// dst[i * rows + j] = src[j * cols + i]: [rows, cols] -> [cols, rows].
void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < rows; ++j) {
    for (int64_t i = 0; i < cols; ++i) dst[i * rows + j] = src[j * cols + i];
  }
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  ckpt::OutFile out(tmp);
  out.write(content.data(), content.size());
  out.finish();
  ckpt::rename_path(tmp, path);
}

}  // namespace

TensorName default_tensor_name(const std::string& unit, const ParamSpec& param) {
  return {unit + "." + param.name, false};
}

void export_model(Engine& e, Communicator& comm, const std::string& path, DType dtype) {
  ExportOptions o;
  o.dtype = dtype;
  export_model(e, comm, path, o);
}

void export_model(Engine& e, Communicator& comm, const std::string& path,
                  const ExportOptions& options) {
  const DType dtype = options.dtype;
  ZS_CHECK(dtype == DType::kF32 || dtype == DType::kBF16, ErrorCode::kInvalidArgument,
           "safetensors export: dtype {} (fp32 or bf16 expected)", dtype_name(dtype));
  ZS_CHECK(!path.empty(), ErrorCode::kInvalidArgument, "safetensors export: empty path");
  // Never an export of non-finite parameters (every rank agrees before anything is written).
  fail_together(comm, [&] { e.check_master_finite(fmt::format("safetensors export {}", path)); });
  const Names names = resolve_names(e, options.namer, true);
  // What is written, per unit: trainable parameters, then frozen ones, as `include` says.
  struct Entry {
    const ParamSpec* spec;
    const TensorName* name;
  };
  std::vector<std::vector<Entry>> entries(e.num_units());
  for (size_t u = 0; u < e.num_units(); ++u) {
    auto add = [&](const std::vector<ParamSpec>& specs, const std::vector<TensorName>& n) {
      for (size_t p = 0; p < specs.size(); ++p) {
        if (!options.include || options.include(e.unit_name(u), specs[p]))
          entries[u].push_back({&specs[p], &n[p]});
      }
    };
    add(e.param_specs(u), names.trainable[u]);
    add(e.frozen_specs(u), names.frozen[u]);
  }
  const size_t esize = dtype_size(dtype);
  const char* dname = dtype == DType::kF32 ? "F32" : "BF16";
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"producer", "zeroshard"}};
  for (const auto& [k, v] : options.metadata) header["__metadata__"][k] = v;
  uint64_t off = 0;
  for (const std::vector<Entry>& unit : entries) {
    for (const Entry& en : unit) {
      const uint64_t bytes = static_cast<uint64_t>(en.spec->numel()) * esize;
      header[en.name->name] = {{"dtype", dname},
                               {"shape", file_shape(*en.spec, en.name->transposed)},
                               {"data_offsets", {off, off + bytes}}};
      off += bytes;
    }
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  const std::string tmp = path + ".tmp";
  const std::filesystem::path parent = std::filesystem::absolute(path).parent_path();
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
    if (options.create_directory) {
      std::error_code ec;
      std::filesystem::create_directories(parent, ec);
      ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create directory: {}", parent.string(),
               ec.message());
    }
    out = std::make_unique<ckpt::OutFile>(tmp);
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(text.size() >> (8 * i));
    out->write(len, 8);
    out->write(text.data(), text.size());
  });
  std::vector<float> flipped;
  std::vector<uint16_t> half;
  for (size_t u = 0; u < e.num_units(); ++u) {
    // Every parameter's full values, by name (collective: every rank gathers).
    UnitValues values;
    const GroupLayout& l = e.layout(u);
    if (l.padded_numel > 0) {
      const std::vector<float> full = e.gather_master_group(u);
      const std::vector<ParamSpec>& specs = e.param_specs(u);
      for (size_t p = 0; p < specs.size(); ++p) {
        const float* src = full.data() + l.params[p].offset;
        values[specs[p].name].assign(src, src + l.params[p].numel);
      }
    }
    for (size_t f = 0; f < e.frozen_specs(u).size(); ++f) {
      values[e.frozen_specs(u)[f].name] = e.gather_frozen_param(u, f);
    }
    guarded([&] {
      if (options.transform) {
        std::map<std::string, size_t> sizes;
        for (const auto& [k, v] : values) sizes[k] = v.size();
        options.transform(e.unit_name(u), values);
        for (const auto& [k, n] : sizes) {
          ZS_CHECK(values.count(k) && values[k].size() == n, ErrorCode::kInvalidArgument,
                   "safetensors export: the transform changed the size of {}.{}", e.unit_name(u),
                   k);
        }
      }
      for (const Entry& en : entries[u]) {
        const std::vector<float>& v = values.at(en.spec->name);
        const float* src = v.data();
        if (en.name->transposed) {
          flipped.resize(v.size());
          transpose(src, flipped.data(), en.spec->shape[0], en.spec->shape[1]);
          src = flipped.data();
        }
        if (dtype == DType::kF32) {
          out->write(src, v.size() * 4);
        } else {
          half.resize(v.size());
          fp32_to_bf16(src, half.data(), half.size());
          out->write(half.data(), half.size() * 2);
        }
      }
    });
  }
  guarded([&] {
    out->finish();
    ckpt::rename_path(tmp, path);
    for (const auto& [name, content] : options.side_files)
      write_file_atomically((parent / name).string(), content);
    ckpt::sync_dir(parent.string());
  });
  if (err) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
  }
  fail_together(comm, [&] {
    if (err) throw *err;
  });
}

ImportReport import_model(Engine& e, Communicator& comm, const std::string& path,
                          const ImportOptions& options) {
  std::vector<std::vector<float>> staged(e.num_units());
  std::vector<std::vector<std::vector<float>>> staged_frozen(e.num_units());
  ImportReport report;
  fail_together(comm, [&] {
    const Names all_names = resolve_names(e, options.namer, false);
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
    std::set<std::string> read;
    std::vector<float> whole;
    // The tensor of parameter `spec`, checked; null when it is optional and absent.
    auto find = [&](size_t u, const ParamSpec& spec, const TensorName& tn,
                    DType& dt) -> const TensorInfo* {
      const std::string& name = tn.name;
      auto it = by_name.find(name);
      if (it == by_name.end() && options.optional && options.optional(e.unit_name(u), spec)) {
        report.absent.push_back(e.unit_name(u) + "." + spec.name);
        return nullptr;
      }
      ZS_CHECK(it != by_name.end(), ErrorCode::kInvalidArgument, "{}: tensor \"{}\" is missing",
               path, name);
      const TensorInfo& t = *it->second;
      read.insert(name);
      const std::vector<int64_t> want = file_shape(spec, tn.transposed);
      ZS_CHECK(t.shape == want, ErrorCode::kInvalidArgument,
               "{}: tensor \"{}\" has shape [{}], the model needs [{}]{}", path, name,
               fmt::join(t.shape, ", "), fmt::join(want, ", "),
               tn.transposed ? fmt::format(" (the transpose of {}.{})", e.unit_name(u), spec.name)
                             : std::string());
      ZS_CHECK(to_dtype(t.dtype, dt), ErrorCode::kInvalidArgument,
               "{}: tensor \"{}\" has dtype {} (F32, BF16 or F16 expected)", path, name, t.dtype);
      return &t;
    };
    for (size_t u = 0; u < e.num_units(); ++u) {
      // Frozen parameters: the whole tensor on every rank (int8 rows need whole rows).
      const std::vector<ParamSpec>& fspecs = e.frozen_specs(u);
      staged_frozen[u].resize(fspecs.size());
      for (size_t q = 0; q < fspecs.size(); ++q) {
        const TensorName& tn = all_names.frozen[u][q];
        DType dt = DType::kF32;
        const TensorInfo* t = find(u, fspecs[q], tn, dt);
        if (t == nullptr) continue;
        const size_t numel = static_cast<size_t>(fspecs[q].numel());
        std::vector<std::byte> raw(numel * dtype_size(dt));
        f.read_at(static_cast<int64_t>(h.data_start() + t->begin), raw.data(), raw.size());
        std::vector<float>& dst = staged_frozen[u][q];
        dst.resize(numel);
        if (!tn.transposed) {
          convert(raw.data(), dt, dst.data(), DType::kF32, numel);
        } else {
          whole.resize(numel);
          convert(raw.data(), dt, whole.data(), DType::kF32, numel);
          transpose(whole.data(), dst.data(), fspecs[q].shape[1], fspecs[q].shape[0]);
        }
        const int64_t bad = ckpt::first_nonfinite(dst.data(), numel);
        ZS_CHECK(bad < 0, ErrorCode::kInvalidArgument,
                 "{}: tensor \"{}\" holds a non-finite value at element {} of {}.{}", path, tn.name,
                 bad, e.unit_name(u), fspecs[q].name);
      }
      const std::vector<ParamSpec>& specs = e.param_specs(u);
      const GroupLayout& l = e.layout(u);
      const UnitShardState st = e.shard_state(u);
      // Optional parameters the file lacks keep their values.
      staged[u].assign(st.master, st.master + st.numel);
      for (size_t p = 0; p < specs.size(); ++p) {
        const TensorName& tn = all_names.trainable[u][p];
        const std::string& name = tn.name;
        DType dt = DType::kF32;
        const TensorInfo* tp = find(u, specs[p], tn, dt);
        if (tp == nullptr) continue;
        const TensorInfo& t = *tp;
        const int64_t off = l.params[p].offset;
        const int64_t lo = std::max(st.begin, off);
        const int64_t hi = std::min(st.begin + st.numel, off + l.params[p].numel);
        if (lo >= hi) continue;
        const size_t es = dtype_size(dt);
        float* dst = staged[u].data() + (lo - st.begin);
        const size_t n = static_cast<size_t>(hi - lo);
        if (!tn.transposed) {
          // The shard's range of the row-major tensor: one read.
          std::vector<std::byte> raw(n * es);
          f.read_at(static_cast<int64_t>(h.data_start() + t.begin) +
                        (lo - off) * static_cast<int64_t>(es),
                    raw.data(), raw.size());
          convert(raw.data(), dt, dst, DType::kF32, n);
        } else {
          // Scattered in the file: read the whole tensor and pick the range.
          const size_t numel = static_cast<size_t>(specs[p].numel());
          std::vector<std::byte> raw(numel * es);
          f.read_at(static_cast<int64_t>(h.data_start() + t.begin), raw.data(), raw.size());
          whole.resize(numel);
          convert(raw.data(), dt, whole.data(), DType::kF32, numel);
          const int64_t rows = specs[p].shape[0], cols = specs[p].shape[1];
          for (int64_t k = lo - off; k < hi - off; ++k)
            dst[k - (lo - off)] = whole[static_cast<size_t>((k % cols) * rows + k / cols)];
        }
        const int64_t bad = ckpt::first_nonfinite(dst, n);
        if (bad >= 0) {
          // The element's index in the file's layout.
          int64_t k = lo - off + bad;
          if (tn.transposed)
            k = (k % specs[p].shape[1]) * specs[p].shape[0] + k / specs[p].shape[1];
          fail(ErrorCode::kInvalidArgument,
               "{}: tensor \"{}\" holds a non-finite value ({}) at element {}", path, name,
               dst[bad], k);
        }
      }
    }
    size_t extra = 0;
    std::string first_extra;
    for (const TensorInfo& t : h.tensors) {
      if (read.count(t.name)) continue;
      if (options.ignorable && options.ignorable(t.name)) {
        report.ignored.push_back(t.name);
      } else if (extra++ == 0) {
        first_extra = t.name;
      }
    }
    ZS_CHECK(extra == 0, ErrorCode::kInvalidArgument,
             "{}: {} tensor(s) the model does not have, e.g. \"{}\"", path, extra, first_extra);
  });
  for (size_t u = 0; u < e.num_units(); ++u) {
    const UnitShardState st = e.shard_state(u);
    if (!staged[u].empty()) {
      std::memcpy(st.master, staged[u].data(), staged[u].size() * sizeof(float));
    }
    for (size_t f = 0; f < staged_frozen[u].size(); ++f) {
      if (!staged_frozen[u][f].empty()) e.set_frozen_param(u, f, staged_frozen[u][f].data());
    }
  }
  e.refresh_params_from_master();
  return report;
}

std::string read_side_file(Communicator& comm, const std::string& path, int64_t max_bytes) {
  std::string text;
  fail_together(comm, [&] {
    if (comm.rank() == 0) text = ckpt::read_whole_file(path, max_bytes);
  });
  double n = static_cast<double>(text.size());
  comm.broadcast(&n, 1, DType::kF64, 0);
  text.resize(static_cast<size_t>(n));
  if (!text.empty()) comm.broadcast(text.data(), text.size(), DType::kU8, 0);
  return text;
}

}  // namespace zs::safetensors
