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
#include "checkpoint/safetensors_names.h"
#include "checkpoint/safetensors_shards.h"
#include "collectives/fail_together.h"
#include "core/convert.h"
#include "core/error.h"

namespace zs::safetensors {
namespace {

using nlohmann::json;

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

ExportReport export_model(Engine& e, Communicator& comm, const std::string& path, DType dtype) {
  ExportOptions o;
  o.dtype = dtype;
  return export_model(e, comm, path, o);
}

namespace {

// One tensor an export writes: a parameter's spec and its name in the file.
struct Entry {
  const ParamSpec* spec;
  const TensorName* name;
  int frozen = -1;  // its index among the unit's frozen parameters; -1: trainable
};

// What is written, per unit: trainable parameters, then frozen ones, as `include` says.
std::vector<std::vector<Entry>> export_entries(Engine& e, const Names& names,
                                               const ExportOptions& options) {
  std::vector<std::vector<Entry>> entries(e.num_units());
  for (size_t u = 0; u < e.num_units(); ++u) {
    auto add = [&](const std::vector<ParamSpec>& specs, const std::vector<TensorName>& n,
                   bool frozen) {
      for (size_t p = 0; p < specs.size(); ++p) {
        if (!options.include || options.include(e.unit_name(u), specs[p]))
          entries[u].push_back({&specs[p], &n[p], frozen ? static_cast<int>(p) : -1});
      }
    };
    add(e.param_specs(u), names.trainable[u], false);
    add(e.frozen_specs(u), names.frozen[u], true);
  }
  return entries;
}

// One tensor of the file(s): a piece of a parameter (or the whole of it), in file order.
struct FileTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t bytes = 0;
};

std::vector<FileTensor> file_tensors(const std::vector<std::vector<Entry>>& entries,
                                     const ExportOptions& options) {
  const int64_t esize = static_cast<int64_t>(dtype_size(options.dtype));
  std::vector<FileTensor> ts;
  for (const std::vector<Entry>& unit : entries) {
    for (const Entry& en : unit) {
      // Pieces are consecutive row ranges: the parameter's data, in order.
      for (const TensorPiece& p : pieces_of(*en.name, *en.spec))
        ts.push_back(
            {p.name, piece_shape(*en.spec, *en.name, p), p.rows * row_numel(*en.spec) * esize});
    }
  }
  return ts;
}

// The JSON header of file `shard` of the plan, padded with spaces to a multiple of 8 bytes.
std::string export_header(const std::vector<FileTensor>& ts, const ShardPlan& plan, int shard,
                          const ExportOptions& options) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}, {"producer", "zeroshard"}};
  for (const auto& [k, v] : options.metadata) header["__metadata__"][k] = v;
  uint64_t off = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (plan.shard_of[i] != shard) continue;
    const uint64_t bytes = static_cast<uint64_t>(ts[i].bytes);
    header[ts[i].name] = {{"dtype", options.dtype == DType::kF32 ? "F32" : "BF16"},
                          {"shape", ts[i].shape},
                          {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// The full master values of unit u's trainable parameters, by name (collective: every rank
// gathers).
UnitValues gather_trainable_values(Engine& e, size_t u) {
  UnitValues values;
  const GroupLayout& l = e.layout(u);
  if (l.padded_numel == 0) return values;
  const std::vector<float> full = e.gather_master_group(u);
  const std::vector<ParamSpec>& specs = e.param_specs(u);
  for (size_t p = 0; p < specs.size(); ++p) {
    const float* src = full.data() + l.params[p].offset;
    values[specs[p].name].assign(src, src + l.params[p].numel);
  }
  return values;
}

// Rank 0's side of an export ([Note: export commit]): the files written under temporary names in
// order, then put in place. Every step is skipped on other ranks and after the first error, which
// is kept for the ranks' agreement at the end.
//
// [Note: export commit] Each file is written to NAME.tmp and fsynced. Once every one is complete:
// (1) in Hugging Face's layout (max_shard_bytes > 0), the directory's old entry points (the single
// weights file, the index) are removed: from here to (3) the directory loads nothing rather than
// a mix; (2) the shards are renamed into place and the side files (config.json) written; (3) the
// entry point, the single weights file or the index, is renamed into place last; (4) in that
// layout, files of the layout (is_layout_file) that the new export does not use are removed. An
// export interrupted before (1) leaves the old model as it was; one interrupted in (1)-(3) leaves
// a directory that loads nothing.
class ExportWriter {
 public:
  ExportWriter(const std::string& path, const ExportOptions& options, bool writer,
               std::vector<FileTensor> tensors, ShardPlan plan)
      : options_(options),
        parent_(std::filesystem::absolute(path).parent_path()),
        weights_(std::filesystem::path(path).filename().string()),
        tensors_(std::move(tensors)),
        plan_(std::move(plan)),
        names_(shard_file_names(weights_, plan_.count())),
        writer_(writer) {
    guarded([&] {
      if (!options_.create_directory) return;
      std::error_code ec;
      std::filesystem::create_directories(parent_, ec);
      ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create directory: {}",
               parent_.string(), ec.message());
    });
  }

  int files() const { return plan_.count(); }

  // Unit u's entries from its gathered values: each frozen one decoded from `frozen` into one
  // reused buffer (options_.threads), then transformed.
  void write_unit(Engine& e, size_t u, const std::vector<Entry>& entries,
                  const UnitValues& trainable, const FrozenUnitBytes& frozen) {
    guarded([&] {
      for (const Entry& en : entries) {
        if (en.frozen < 0) {
          write_entry(en, trainable.at(en.spec->name));
          continue;
        }
        frozen.decode(static_cast<size_t>(en.frozen), values_, options_.threads);
        if (options_.transform_frozen) {
          const size_t n = values_.size();
          options_.transform_frozen(e.unit_name(u), en.spec->name, trainable, values_);
          ZS_CHECK(values_.size() == n, ErrorCode::kInvalidArgument,
                   "safetensors export: the transform changed the size of {}.{}", e.unit_name(u),
                   en.spec->name);
        }
        write_entry(en, values_);
      }
    });
  }

  // Puts the files in place ([Note: export commit]); on an error removes the temporary files.
  // Returns the error, if any.
  std::optional<Error> finish() {
    guarded([&] {
      open_through(plan_.count() - 1);  // files with no tensor left (an empty model)
      if (out_) out_->finish();
      const bool hf = options_.max_shard_bytes > 0, sharded = plan_.count() > 1;
      const std::string index = shard_index_name(weights_);
      if (hf) {
        for (const std::string& old : {weights_, index}) remove_if_there(old);
      }
      if (sharded) {
        for (const std::string& n : names_) zs::rename_path(tmp(n), path(n));
      }
      for (const auto& [name, content] : options_.side_files)
        write_file_atomically(path(name), content);
      if (sharded) {
        std::vector<std::string> tn, fn;
        for (size_t i = 0; i < tensors_.size(); ++i) {
          tn.push_back(tensors_[i].name);
          fn.push_back(names_[static_cast<size_t>(plan_.shard_of[i])]);
        }
        int64_t total = 0;
        for (const int64_t b : plan_.shard_bytes) total += b;
        write_file_atomically(path(index), shard_index_json(tn, fn, total));
      } else {
        zs::rename_path(tmp(weights_), path(weights_));
      }
      zs::sync_dir(parent_.string());
      if (hf) remove_stale(sharded ? index : weights_);
    });
    if (err_) {
      std::error_code ignored;
      for (const std::string& n : names_) std::filesystem::remove(tmp(n), ignored);
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

  std::string path(const std::string& name) const { return (parent_ / name).string(); }
  std::string tmp(const std::string& name) const { return path(name) + ".tmp"; }

  void remove_if_there(const std::string& name) {
    std::error_code ec;
    std::filesystem::remove(path(name), ec);
    ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot remove: {}", path(name), ec.message());
  }

  // Files of the layout in the directory that the new export does not use (`entry`: its entry
  // point).
  void remove_stale(const std::string& entry) {
    std::vector<std::string> stale;
    for (const auto& f : std::filesystem::directory_iterator(parent_)) {
      const std::string n = f.path().filename().string();
      if (!is_layout_file(weights_, n) || n == entry) continue;
      if (std::find(names_.begin(), names_.end(), n) == names_.end()) stale.push_back(n);
    }
    for (const std::string& n : stale) remove_if_there(n);
    if (!stale.empty()) zs::sync_dir(parent_.string());
  }

  // Opens files up to `shard` (finishing the current one), each with its header.
  void open_through(int shard) {
    while (current_ < shard) {
      if (out_) out_->finish();
      ++current_;
      out_ = std::make_unique<ckpt::OutFile>(tmp(names_[static_cast<size_t>(current_)]));
      const std::string header = export_header(tensors_, plan_, current_, options_);
      uint8_t len[8];
      for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(header.size() >> (8 * i));
      out_->write(len, 8);
      out_->write(header.data(), header.size());
    }
  }

  void write_entry(const Entry& en, const std::vector<float>& v) {
    const float* src = v.data();
    if (en.name->transposed) {
      if (flipped_.capacity() < v.size()) std::vector<float>().swap(flipped_);
      flipped_.resize(v.size());
      transpose(src, flipped_.data(), en.spec->shape[0], en.spec->shape[1]);
      src = flipped_.data();
    }
    const char* bytes = reinterpret_cast<const char*>(src);
    if (options_.dtype == DType::kBF16) {
      if (half_.capacity() < v.size()) std::vector<uint16_t>().swap(half_);
      half_.resize(v.size());
      fp32_to_bf16(src, half_.data(), half_.size());
      bytes = reinterpret_cast<const char*>(half_.data());
    }
    // Its pieces, each a tensor of the plan, in order.
    for (size_t k = 0; k < pieces_of(*en.name, *en.spec).size(); ++k) {
      open_through(plan_.shard_of[next_]);
      out_->write(bytes, static_cast<size_t>(tensors_[next_].bytes));
      bytes += tensors_[next_].bytes;
      ++next_;
    }
  }

  const ExportOptions& options_;
  const std::filesystem::path parent_;
  const std::string weights_;
  const std::vector<FileTensor> tensors_;
  const ShardPlan plan_;
  const std::vector<std::string> names_;  // the files, in order
  const bool writer_;
  int current_ = -1;  // the file being written
  size_t next_ = 0;   // the next tensor of tensors_
  std::unique_ptr<ckpt::OutFile> out_;
  std::optional<Error> err_;
  std::vector<float> values_;  // the frozen parameter being written
  std::vector<float> flipped_;
  std::vector<uint16_t> half_;
};

}  // namespace

ExportReport export_model(Engine& e, Communicator& comm, const std::string& path,
                          const ExportOptions& options) {
  ZS_CHECK(options.dtype == DType::kF32 || options.dtype == DType::kBF16,
           ErrorCode::kInvalidArgument, "safetensors export: dtype {} (fp32 or bf16 expected)",
           dtype_name(options.dtype));
  ZS_CHECK(!path.empty(), ErrorCode::kInvalidArgument, "safetensors export: empty path");
  // Never an export of non-finite parameters (every rank agrees before anything is written).
  fail_together(comm, [&] { e.check_master_finite(fmt::format("safetensors export {}", path)); });
  const Names names = resolve_names(e, options.namer, true);
  const std::vector<std::vector<Entry>> entries = export_entries(e, names, options);
  std::vector<FileTensor> tensors = file_tensors(entries, options);
  std::vector<int64_t> bytes;
  for (const FileTensor& t : tensors) bytes.push_back(t.bytes);
  // One file unless a shard size is given: the limit is then every file's.
  ShardPlan plan =
      plan_shards(bytes, options.max_shard_bytes > 0 ? options.max_shard_bytes
                                                     : std::numeric_limits<int64_t>::max());
  ExportReport report;
  report.files = plan.count();
  for (const int64_t b : bytes) report.data_bytes += b;
  ExportWriter writer(path, options, comm.rank() == 0, std::move(tensors), std::move(plan));
  for (size_t u = 0; u < e.num_units(); ++u) {
    const UnitValues trainable = gather_trainable_values(e, u);
    const FrozenUnitBytes frozen = e.gather_frozen_unit(u);
    writer.write_unit(e, u, entries[u], trainable, frozen);
  }
  const std::optional<Error> err = writer.finish();
  fail_together(comm, [&] {
    if (err) throw *err;
  });
  return report;
}

}  // namespace zs::safetensors
