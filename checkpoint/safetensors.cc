#include "checkpoint/safetensors.h"

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

#include "checkpoint/checkpoint_io.h"
#include "collectives/fail_together.h"
#include "core/convert.h"
#include "core/error.h"

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

// Rows of a parameter as TensorPiece counts them: its first dimension (a scalar: one).
int64_t rows_of(const ParamSpec& s) { return s.shape.empty() ? 1 : s.shape[0]; }
// Elements per row.
int64_t row_numel(const ParamSpec& s) {
  const int64_t r = rows_of(s);
  return r == 0 ? 0 : s.numel() / r;
}

// The tensors of a parameter: its pieces, or the one tensor covering every row.
std::vector<TensorPiece> pieces_of(const TensorName& n, const ParamSpec& s) {
  if (!n.pieces.empty()) return n.pieces;
  return {TensorPiece{n.name, 0, rows_of(s)}};
}

// The file layout of piece `p` of parameter `s`: [p.rows, the other dimensions...], or the
// transpose of a whole parameter stored transposed.
std::vector<int64_t> piece_shape(const ParamSpec& s, const TensorName& n, const TensorPiece& p) {
  if (n.transposed) return file_shape(s, true);
  std::vector<int64_t> shape = s.shape;
  if (!shape.empty()) shape[0] = p.rows;
  return shape;
}

// Pieces cover the parameter's rows in order from 0, none empty, none transposed.
void check_pieces(const std::string& unit, const ParamSpec& s, const TensorName& n) {
  if (n.pieces.empty()) return;
  ZS_CHECK(!n.transposed, ErrorCode::kInvalidArgument,
           "safetensors: parameter {}.{} is assembled from pieces and stored transposed", unit,
           s.name);
  int64_t next = 0;
  for (const TensorPiece& p : n.pieces) {
    ZS_CHECK(!p.name.empty() && p.rows > 0 && p.first_row == next, ErrorCode::kInvalidArgument,
             "safetensors: piece \"{}\" of {}.{} covers rows [{}, {}), row {} expected first",
             p.name, unit, s.name, p.first_row, p.first_row + p.rows, next);
    next += p.rows;
  }
  ZS_CHECK(next == rows_of(s), ErrorCode::kInvalidArgument,
           "safetensors: the pieces of {}.{} cover {} rows of {}", unit, s.name, next, rows_of(s));
}

// The namer's answer for every parameter of the engine, trainable [unit][param] and frozen
// [unit][frozen param], checked: transposed parameters are 2-D, pieces cover their parameter and,
// for an export (`distinct`), no name is given twice.
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
    ZS_CHECK(!n.name.empty() || !n.pieces.empty(), ErrorCode::kInvalidArgument,
             "safetensors: no tensor name for parameter {}.{}", e.unit_name(u), s.name);
    check_pieces(e.unit_name(u), s, n);
    for (const TensorPiece& p : pieces_of(n, s)) {
      ZS_CHECK(seen.insert(p.name).second || !distinct, ErrorCode::kInvalidArgument,
               "safetensors: tensor name \"{}\" given to two parameters (the second: {}.{})",
               p.name, e.unit_name(u), s.name);
    }
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
  zs::rename_path(tmp, path);
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

namespace {

// One tensor an export writes: a parameter's spec and its name in the file.
struct Entry {
  const ParamSpec* spec;
  const TensorName* name;
};

// What is written, per unit: trainable parameters, then frozen ones, as `include` says.
std::vector<std::vector<Entry>> export_entries(Engine& e, const Names& names,
                                               const ExportOptions& options) {
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
  return entries;
}

// The JSON header of the file, padded with spaces to a multiple of 8 bytes.
std::string export_header(const std::vector<std::vector<Entry>>& entries,
                          const ExportOptions& options) {
  const size_t esize = dtype_size(options.dtype);
  const char* dname = options.dtype == DType::kF32 ? "F32" : "BF16";
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"producer", "zeroshard"}};
  for (const auto& [k, v] : options.metadata) header["__metadata__"][k] = v;
  uint64_t off = 0;
  for (const std::vector<Entry>& unit : entries) {
    for (const Entry& en : unit) {
      // Pieces are consecutive row ranges: the parameter's data, written whole, is theirs in order.
      for (const TensorPiece& p : pieces_of(*en.name, *en.spec)) {
        const uint64_t bytes = static_cast<uint64_t>(p.rows * row_numel(*en.spec)) * esize;
        header[p.name] = {{"dtype", dname},
                          {"shape", piece_shape(*en.spec, *en.name, p)},
                          {"data_offsets", {off, off + bytes}}};
        off += bytes;
      }
    }
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// Every parameter's full values of unit u, by name (collective: every rank gathers).
UnitValues gather_unit_values(Engine& e, size_t u) {
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
  return values;
}

// options.transform on unit u's values; it must keep every size.
void transform_unit(Engine& e, size_t u, const ExportOptions& options, UnitValues& values) {
  if (!options.transform) return;
  std::map<std::string, size_t> sizes;
  for (const auto& [k, v] : values) sizes[k] = v.size();
  options.transform(e.unit_name(u), values);
  for (const auto& [k, n] : sizes) {
    ZS_CHECK(values.count(k) && values[k].size() == n, ErrorCode::kInvalidArgument,
             "safetensors export: the transform changed the size of {}.{}", e.unit_name(u), k);
  }
}

// Rank 0's side of an export: the file written to path.tmp, then renamed, with the side files.
// Every step is skipped on other ranks and after the first error, which is kept for the ranks'
// agreement at the end.
class ExportWriter {
 public:
  ExportWriter(const std::string& path, const ExportOptions& options, bool writer)
      : options_(options),
        tmp_(path + ".tmp"),
        path_(path),
        parent_(std::filesystem::absolute(path).parent_path()),
        writer_(writer) {}

  void begin(const std::string& header) {
    guarded([&] {
      if (options_.create_directory) {
        std::error_code ec;
        std::filesystem::create_directories(parent_, ec);
        ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create directory: {}",
                 parent_.string(), ec.message());
      }
      out_ = std::make_unique<ckpt::OutFile>(tmp_);
      uint8_t len[8];
      for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header.size() >> (8 * i));
      out_->write(len, 8);
      out_->write(header.data(), header.size());
    });
  }

  // Unit u's entries from its gathered values.
  void write_unit(Engine& e, size_t u, const std::vector<Entry>& entries, UnitValues& values) {
    guarded([&] {
      transform_unit(e, u, options_, values);
      for (const Entry& en : entries) write_entry(en, values.at(en.spec->name));
    });
  }

  // Renames the file into place and writes the side files; on an error removes path.tmp.
  // Returns the error, if any.
  std::optional<Error> finish() {
    guarded([&] {
      out_->finish();
      zs::rename_path(tmp_, path_);
      for (const auto& [name, content] : options_.side_files)
        write_file_atomically((parent_ / name).string(), content);
      zs::sync_dir(parent_.string());
    });
    if (err_) {
      std::error_code ignored;
      std::filesystem::remove(tmp_, ignored);
    }
    return err_;
  }

 private:
  template <typename Fn>
  void guarded(const Fn& fn) {
    if (!writer_ || err_) return;
    try {
      fn();
    } catch (const Error& x) {
      err_ = x;
    } catch (const std::exception& x) {
      err_ = Error(ErrorCode::kInternal, x.what());
    }
  }

  void write_entry(const Entry& en, const std::vector<float>& v) {
    const float* src = v.data();
    if (en.name->transposed) {
      flipped_.resize(v.size());
      transpose(src, flipped_.data(), en.spec->shape[0], en.spec->shape[1]);
      src = flipped_.data();
    }
    if (options_.dtype == DType::kF32) {
      out_->write(src, v.size() * 4);
    } else {
      half_.resize(v.size());
      fp32_to_bf16(src, half_.data(), half_.size());
      out_->write(half_.data(), half_.size() * 2);
    }
  }

  const ExportOptions& options_;
  const std::string tmp_, path_;
  const std::filesystem::path parent_;
  const bool writer_;
  std::unique_ptr<ckpt::OutFile> out_;
  std::optional<Error> err_;
  std::vector<float> flipped_;
  std::vector<uint16_t> half_;
};

// The header of the safetensors file f (named `path` in errors).
Header read_file_header(const ckpt::InFile& f, const std::string& path) {
  try {
    std::byte first[8] = {};
    if (f.size() < 8) corrupt(fmt::format("truncated: {} bytes", f.size()));
    f.read_at(0, first, 8);
    const uint64_t n = header_length(first);
    if (8 + n > static_cast<uint64_t>(f.size()))
      corrupt(fmt::format("truncated: header of {} bytes in a {}-byte file", n, f.size()));
    std::vector<std::byte> text(n);
    f.read_at(8, text.data(), text.size());
    return parse_header(text, static_cast<uint64_t>(f.size()) - 8 - n);
  } catch (const Error& x) {
    throw Error(x.code(), fmt::format("{}: {}", path, x.what()));
  }
}

// Values read from the file before any is applied: unit u's shard of the fp32 master
// (trainable[u]) and its frozen parameters whole (frozen[u][q]; empty: absent, kept).
struct Staged {
  std::vector<std::vector<float>> trainable;
  std::vector<std::vector<std::vector<float>>> frozen;
};

// A tensor of one of the import's files.
struct Located {
  size_t file = 0;
  const TensorInfo* info = nullptr;
};

// One import on this rank: finds each parameter's tensors, checks them and reads this rank's part.
class Importer {
 public:
  Importer(Engine& e, const std::vector<std::string>& paths, const std::string& where,
           const ImportOptions& options, ImportReport& report)
      : e_(e), paths_(paths), where_(where), options_(options), report_(report) {
    headers_.reserve(paths.size());
    for (size_t f = 0; f < paths.size(); ++f) {
      files_.push_back(std::make_unique<ckpt::InFile>(paths[f]));
      headers_.push_back(read_file_header(*files_[f], paths[f]));
    }
    for (size_t f = 0; f < paths.size(); ++f) {
      for (const TensorInfo& t : headers_[f].tensors) {
        const auto [it, fresh] = by_name_.emplace(t.name, Located{f, &t});
        if (!fresh)
          corrupt(fmt::format("tensor \"{}\" is in both {} and {}", t.name, paths[it->second.file],
                              paths[f]));
      }
    }
  }

  // Reads every parameter of every unit into `staged`, then checks that every tensor of the
  // files was read or may be ignored.
  void read_all(const Names& names, Staged& staged) {
    for (size_t u = 0; u < e_.num_units(); ++u) {
      stage_frozen(u, names.frozen[u], staged.frozen[u]);
      stage_trainable(u, names.trainable[u], staged.trainable[u]);
    }
    check_all_read();
  }

 private:
  // A parameter's tensors (one per piece), checked: shape and dtype. Empty when the parameter is
  // optional and its first tensor absent.
  std::vector<Located> find(size_t u, const ParamSpec& spec, const TensorName& tn) {
    std::vector<Located> found;
    for (const TensorPiece& p : pieces_of(tn, spec)) {
      auto it = by_name_.find(p.name);
      if (it == by_name_.end() && found.empty() && options_.optional &&
          options_.optional(e_.unit_name(u), spec)) {
        report_.absent.push_back(e_.unit_name(u) + "." + spec.name);
        return {};
      }
      ZS_CHECK(it != by_name_.end(), ErrorCode::kInvalidArgument, "{}: tensor \"{}\" is missing",
               where_, p.name);
      check_tensor(u, spec, tn, p, it->second);
      read_.insert(p.name);
      found.push_back(it->second);
    }
    return found;
  }

  void check_tensor(size_t u, const ParamSpec& spec, const TensorName& tn, const TensorPiece& p,
                    const Located& at) {
    const TensorInfo& t = *at.info;
    const std::vector<int64_t> want = piece_shape(spec, tn, p);
    ZS_CHECK(t.shape == want, ErrorCode::kInvalidArgument,
             "{}: tensor \"{}\" has shape [{}], the model needs [{}]{}", paths_[at.file], p.name,
             fmt::join(t.shape, ", "), fmt::join(want, ", "),
             tn.transposed ? fmt::format(" (the transpose of {}.{})", e_.unit_name(u), spec.name)
                           : std::string());
    DType dt = DType::kF32;
    ZS_CHECK(to_dtype(t.dtype, dt), ErrorCode::kInvalidArgument,
             "{}: tensor \"{}\" has dtype {} (F32, BF16 or F16 expected)", paths_[at.file], p.name,
             t.dtype);
  }

  // Elements [a, b) of tensor `at` (its own row-major layout) as fp32 into out.
  void read_elements(const Located& at, int64_t a, int64_t b, float* out) {
    DType dt = DType::kF32;
    to_dtype(at.info->dtype, dt);
    const size_t es = dtype_size(dt);
    std::vector<std::byte> raw(static_cast<size_t>(b - a) * es);
    const int64_t start = static_cast<int64_t>(headers_[at.file].data_start() + at.info->begin);
    files_[at.file]->read_at(start + a * static_cast<int64_t>(es), raw.data(), raw.size());
    convert(raw.data(), dt, out, DType::kF32, static_cast<size_t>(b - a));
  }

  // Frozen parameters: the whole tensor on every rank (int8 rows need whole rows).
  void stage_frozen(size_t u, const std::vector<TensorName>& names,
                    std::vector<std::vector<float>>& staged) {
    const std::vector<ParamSpec>& fspecs = e_.frozen_specs(u);
    staged.resize(fspecs.size());
    for (size_t q = 0; q < fspecs.size(); ++q) {
      const std::vector<Located> found = find(u, fspecs[q], names[q]);
      if (found.empty()) continue;
      staged[q].resize(static_cast<size_t>(fspecs[q].numel()));
      read_param_range(fspecs[q], names[q], found, 0, fspecs[q].numel(), staged[q].data());
    }
  }

  // Trainable parameters: this rank's shard of each; optional ones the files lack keep their
  // values.
  void stage_trainable(size_t u, const std::vector<TensorName>& names, std::vector<float>& staged) {
    const std::vector<ParamSpec>& specs = e_.param_specs(u);
    const GroupLayout& l = e_.layout(u);
    const UnitShardState st = e_.shard_state(u);
    staged.assign(st.master, st.master + st.numel);
    for (size_t p = 0; p < specs.size(); ++p) {
      const std::vector<Located> found = find(u, specs[p], names[p]);
      if (found.empty()) continue;
      const int64_t off = l.params[p].offset;
      const int64_t lo = std::max(st.begin, off);
      const int64_t hi = std::min(st.begin + st.numel, off + l.params[p].numel);
      if (lo >= hi) continue;
      read_param_range(specs[p], names[p], found, lo - off, hi - off,
                       staged.data() + (lo - st.begin));
    }
  }

  // Elements [a, b) of the parameter (its own row-major layout) into dst, as fp32, from its
  // tensors `found`, each part checked finite.
  void read_param_range(const ParamSpec& spec, const TensorName& tn,
                        const std::vector<Located>& found, int64_t a, int64_t b, float* dst) {
    if (tn.transposed) {
      read_transposed(spec, tn, found[0], a, b, dst);
      return;
    }
    const std::vector<TensorPiece> pieces = pieces_of(tn, spec);
    const int64_t row = row_numel(spec);
    for (size_t k = 0; k < pieces.size(); ++k) {
      const int64_t p0 = pieces[k].first_row * row, p1 = p0 + pieces[k].rows * row;
      const int64_t lo = std::max(a, p0), hi = std::min(b, p1);
      if (lo >= hi) continue;
      // The shard's range of the row-major piece: one read.
      float* out = dst + (lo - a);
      read_elements(found[k], lo - p0, hi - p0, out);
      const int64_t bad = ckpt::first_nonfinite(out, static_cast<size_t>(hi - lo));
      if (bad >= 0) nonfinite(pieces[k].name, out[bad], lo - p0 + bad);
    }
  }

  // Elements [a, b) of a 2-D parameter stored transposed: scattered in the file, so the whole
  // tensor is read and the range picked.
  void read_transposed(const ParamSpec& spec, const TensorName& tn, const Located& at, int64_t a,
                       int64_t b, float* dst) {
    whole_.resize(static_cast<size_t>(spec.numel()));
    read_elements(at, 0, spec.numel(), whole_.data());
    const int64_t rows = spec.shape[0], cols = spec.shape[1];
    for (int64_t k = a; k < b; ++k) {
      const int64_t i = (k % cols) * rows + k / cols;  // element k's index in the file's layout
      dst[k - a] = whole_[static_cast<size_t>(i)];
      if (!std::isfinite(dst[k - a])) nonfinite(tn.name, dst[k - a], i);
    }
  }

  [[noreturn]] void nonfinite(const std::string& name, float v, int64_t element) {
    const Located& at = by_name_.at(name);
    fail(ErrorCode::kInvalidArgument,
         "{}: tensor \"{}\" holds a non-finite value ({}) at element {}", paths_[at.file], name, v,
         element);
  }

  // Every tensor of the files was read, or the options say it may be ignored.
  void check_all_read() {
    size_t extra = 0;
    std::string first_extra;
    for (const Header& h : headers_) {
      for (const TensorInfo& t : h.tensors) {
        if (read_.count(t.name)) continue;
        if (options_.ignorable && options_.ignorable(t.name)) {
          report_.ignored.push_back(t.name);
        } else if (extra++ == 0) {
          first_extra = t.name;
        }
      }
    }
    ZS_CHECK(extra == 0, ErrorCode::kInvalidArgument,
             "{}: {} tensor(s) the model does not have, e.g. \"{}\"", where_, extra, first_extra);
  }

  Engine& e_;
  const std::vector<std::string>& paths_;
  const std::string& where_;
  const ImportOptions& options_;
  ImportReport& report_;
  std::vector<std::unique_ptr<ckpt::InFile>> files_;
  std::vector<Header> headers_;
  std::unordered_map<std::string, Located> by_name_;
  std::set<std::string> read_;
  std::vector<float> whole_;
};

// The staged values into the engine (every rank has read its part).
void apply_staged(Engine& e, const Staged& staged) {
  for (size_t u = 0; u < e.num_units(); ++u) {
    const UnitShardState st = e.shard_state(u);
    if (!staged.trainable[u].empty()) {
      std::memcpy(st.master, staged.trainable[u].data(),
                  staged.trainable[u].size() * sizeof(float));
    }
    for (size_t f = 0; f < staged.frozen[u].size(); ++f) {
      if (!staged.frozen[u][f].empty()) e.set_frozen_param(u, f, staged.frozen[u][f].data());
    }
  }
  e.refresh_params_from_master();
}

}  // namespace

void export_model(Engine& e, Communicator& comm, const std::string& path,
                  const ExportOptions& options) {
  ZS_CHECK(options.dtype == DType::kF32 || options.dtype == DType::kBF16,
           ErrorCode::kInvalidArgument, "safetensors export: dtype {} (fp32 or bf16 expected)",
           dtype_name(options.dtype));
  ZS_CHECK(!path.empty(), ErrorCode::kInvalidArgument, "safetensors export: empty path");
  // Never an export of non-finite parameters (every rank agrees before anything is written).
  fail_together(comm, [&] { e.check_master_finite(fmt::format("safetensors export {}", path)); });
  const Names names = resolve_names(e, options.namer, true);
  const std::vector<std::vector<Entry>> entries = export_entries(e, names, options);
  ExportWriter writer(path, options, comm.rank() == 0);
  writer.begin(export_header(entries, options));
  for (size_t u = 0; u < e.num_units(); ++u) {
    UnitValues values = gather_unit_values(e, u);
    writer.write_unit(e, u, entries[u], values);
  }
  const std::optional<Error> err = writer.finish();
  fail_together(comm, [&] {
    if (err) throw *err;
  });
}

ImportReport import_model(Engine& e, Communicator& comm, const std::string& path,
                          const ImportOptions& options) {
  return import_model_files(e, comm, {path}, path, options);
}

ImportReport import_model_files(Engine& e, Communicator& comm,
                                const std::vector<std::string>& paths, const std::string& where,
                                const ImportOptions& options) {
  Staged staged;
  staged.trainable.resize(e.num_units());
  staged.frozen.resize(e.num_units());
  ImportReport report;
  fail_together(comm, [&] {
    const Names names = resolve_names(e, options.namer, false);
    Importer(e, paths, where, options, report).read_all(names, staged);
  });
  apply_staged(e, staged);
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
