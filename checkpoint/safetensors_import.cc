// The safetensors import (checkpoint/safetensors.h): every header checked before any value is
// read, then the values streamed a parameter at a time ([Note: streaming import]).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <unordered_map>

#include <fmt/ranges.h>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_names.h"
#include "collectives/fail_together.h"
#include "core/convert.h"
#include "core/error.h"

namespace zs::safetensors {
namespace {

[[noreturn]] void corrupt(const std::string& what) { throw Error(ErrorCode::kCorruptData, what); }

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

// [Note: streaming import] An import runs in two phases. First, on every rank and before any
// value is read: every file's header, a tensor in two files, each parameter's tensors present
// with its shape and a dtype we convert, and no tensor left that is neither read nor ignorable;
// any error here leaves the engine as it was. Then, unit by unit: this rank reads its shard of the
// unit's trainable master into one buffer; then, one frozen parameter at a time, the elements its
// stored bytes depend on (Engine::frozen_param_needs: of an int8 matrix only the rows whose values
// it stores, the row scales being exchanged when it is set) into another; each is checked finite,
// the ranks agree, the frozen parameter is set, and the trainable shard is copied into the master
// after the unit's last frozen one. Peak memory is one unit's trainable shard plus the largest
// frozen parameter's part on this rank, not a unit's frozen part or the model's. A non-finite value
// stops the import on every rank with the same error; the frozen parameters before it and the
// units before its unit were already set.

// A tensor of one of the import's files.
struct Located {
  size_t file = 0;
  const TensorInfo* info = nullptr;
};

// Where each parameter's tensors are: [unit][param] -> its pieces' tensors (empty: an optional
// parameter the files lack, kept).
struct Plan {
  std::vector<std::vector<std::vector<Located>>> trainable, frozen;
};

// One frozen parameter's part on this rank, read before it is set: the elements [at.first, at.end)
// (Engine::frozen_param_needs; none when not needed here). `set`: the parameter is in the files, so
// every rank sets it (the same on every rank: the plan is).
struct FrozenStage {
  std::vector<float> values;
  ElementRange at;
  bool set = false;
};

// Raw bytes per read: large contiguous pread()s, converted a chunk at a time.
constexpr size_t kReadChunkBytes = size_t{64} << 20;

// v resized to n, without a moment where its old and new allocations are both held (the values are
// about to be overwritten): the peak of a buffer reused for parts of several sizes is the largest.
void grow(std::vector<float>& v, int64_t n) {
  if (v.capacity() < static_cast<size_t>(n)) std::vector<float>().swap(v);
  v.resize(static_cast<size_t>(n));
}

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

  // Phase one: every parameter's tensors found and checked (no value read), then every tensor of
  // the files read or ignorable.
  void plan(const Names& names) {
    plan_.trainable.resize(e_.num_units());
    plan_.frozen.resize(e_.num_units());
    for (size_t u = 0; u < e_.num_units(); ++u) {
      for (size_t q = 0; q < e_.frozen_specs(u).size(); ++q)
        plan_.frozen[u].push_back(find(u, e_.frozen_specs(u)[q], names.frozen[u][q]));
      for (size_t p = 0; p < e_.param_specs(u).size(); ++p)
        plan_.trainable[u].push_back(find(u, e_.param_specs(u)[p], names.trainable[u][p]));
    }
    check_all_read();
    names_ = &names;
  }

  // Phase two, frozen parameter q of unit u: this rank's part of it into `st` (its buffer reused),
  // each value checked finite.
  void stage_frozen(size_t u, size_t q, FrozenStage& st) {
    const std::vector<Located>& found = plan_.frozen[u][q];
    st.set = !found.empty();
    st.at = ElementRange{};
    if (!st.set) return;
    st.at = e_.frozen_param_needs(u, q);
    grow(st.values, st.at.count());
    if (st.at.count() > 0)
      read_param_range(e_.frozen_specs(u)[q], names_->frozen[u][q], found, st.at.first, st.at.end,
                       st.values.data());
  }

  // Phase two, the trainable parameters of unit u: this rank's shard of the unit's fp32 master
  // into `staged` (its buffer reused; optional parameters the files lack keep their values), each
  // value checked finite before any of them reaches the master.
  void stage_trainable(size_t u, std::vector<float>& staged) {
    const std::vector<ParamSpec>& specs = e_.param_specs(u);
    const GroupLayout& l = e_.layout(u);
    const ShardExtent st = e_.shard_extent(u);
    grow(staged, st.numel);
    for (const ShardExtent& piece : e_.shard_pieces(u)) {  // one piece's state copies at a time
      const UnitShardState ps = e_.shard_state(u, piece);
      std::copy(ps.master, ps.master + ps.numel, staged.begin() + (piece.begin - st.begin));
      e_.release_shard_state(u, false);
    }
    for (size_t p = 0; p < specs.size(); ++p) {
      const std::vector<Located>& found = plan_.trainable[u][p];
      if (found.empty()) continue;
      const int64_t off = l.params[p].offset;
      const int64_t lo = std::max(st.begin, off);
      const int64_t hi = std::min(st.begin + st.numel, off + l.params[p].numel);
      if (lo >= hi) continue;
      read_param_range(specs[p], names_->trainable[u][p], found, lo - off, hi - off,
                       staged.data() + (lo - st.begin));
    }
  }

  // A transposed tensor's buffer is not kept past its unit.
  void release_unit() { std::vector<float>().swap(whole_); }

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

  // Elements [a, b) of tensor `at` (its own row-major layout) as fp32 into out: contiguous reads
  // of up to kReadChunkBytes, each converted (core/convert.h) as it arrives.
  void read_elements(const Located& at, int64_t a, int64_t b, float* out) {
    DType dt = DType::kF32;
    to_dtype(at.info->dtype, dt);
    const int64_t es = static_cast<int64_t>(dtype_size(dt));
    const int64_t start = static_cast<int64_t>(headers_[at.file].data_start() + at.info->begin);
    const int64_t per = static_cast<int64_t>(kReadChunkBytes) / es;
    for (int64_t k = a; k < b; k += per) {
      const int64_t n = std::min(per, b - k);
      if (dt == DType::kF32) {  // straight into place
        files_[at.file]->read_at(start + k * es, out + (k - a), static_cast<size_t>(n * es));
        continue;
      }
      raw_.resize(static_cast<size_t>(n * es));
      files_[at.file]->read_at(start + k * es, raw_.data(), raw_.size());
      convert(raw_.data(), dt, out + (k - a), DType::kF32, static_cast<size_t>(n));
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
      // The range of the row-major piece: contiguous in the file.
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
  Plan plan_;
  const Names* names_ = nullptr;
  std::vector<float> whole_;
  std::vector<std::byte> raw_;
};

}  // namespace

ImportReport import_model(Engine& e, Communicator& comm, const std::string& path,
                          const ImportOptions& options) {
  return import_model_files(e, comm, {path}, path, options);
}

ImportReport import_model_files(Engine& e, Communicator& comm,
                                const std::vector<std::string>& paths, const std::string& where,
                                const ImportOptions& options) {
  ImportReport report;
  Names names;
  std::unique_ptr<Importer> importer;
  fail_together(comm, [&] {
    names = resolve_names(e, options.namer, false);
    importer = std::make_unique<Importer>(e, paths, where, options, report);
    importer->plan(names);
  });
  // One frozen parameter's part staged at a time (the largest is the peak), set collectively:
  // every rank sets every frozen parameter the files hold, also one it needs nothing of (an int8
  // matrix's row scales are exchanged, Engine::set_frozen_param_range).
  // A unit's trainable shard is staged whole and copied into the master once every rank has
  // read its part.
  FrozenStage st;
  std::vector<float> trainable;
  for (size_t u = 0; u < e.num_units(); ++u) {
    fail_together(comm, [&] { importer->stage_trainable(u, trainable); });
    for (size_t q = 0; q < e.frozen_specs(u).size(); ++q) {
      fail_together(comm, [&] { importer->stage_frozen(u, q, st); });
      if (st.set)
        e.set_frozen_param_range(u, q, st.at.first, st.at.count(), st.values.data(),
                                 options.threads);
    }
    const ShardExtent ext = e.shard_extent(u);
    for (const ShardExtent& piece : e.shard_pieces(u)) {
      const UnitShardState ps = e.shard_state(u, piece);
      std::memcpy(ps.master, trainable.data() + (piece.begin - ext.begin),
                  static_cast<size_t>(piece.numel) * sizeof(float));
      e.release_shard_state(u, true);
    }
    importer->release_unit();
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
