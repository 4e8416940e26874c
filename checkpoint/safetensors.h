// safetensors export and import of an Engine's consolidated fp32 master weights
// (https://github.com/huggingface/safetensors, docs/checkpoints.md).
//
// File: u64 little-endian N, then N bytes of a UTF-8 JSON header (padded with spaces to a
// multiple of 8), then the tensor data. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the data start) and may
// hold "__metadata__" (string to string). Tensors are named "<unit_name>.<param_name>", stored
// row-major in the order of the units and their parameters, unless the caller supplies a
// TensorNamer: the hook through which a model maps its parameters onto another framework's names
// and layouts (interop/gpt_hf.h: the GPT as Hugging Face's GPT-2) without the runtime knowing
// either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/safetensors_format.h"
#include "collectives/communicator.h"
#include "core/dtype.h"
#include "runtime/engine.h"

namespace zs::safetensors {

// Rows [first_row, first_row + rows) of a parameter stored as a tensor of their own, shaped
// [rows, the parameter's other dimensions...] (a 1-D parameter's rows are its elements).
struct TensorPiece {
  std::string name;
  int64_t first_row = 0;
  int64_t rows = 0;
};
// How one parameter is stored in a file: a TensorNamer's answer.
struct TensorName {
  std::string name;         // the tensor's name in the file
  bool transposed = false;  // a 2-D parameter [r, c] is stored as its transpose [c, r]
  // Non-empty: the parameter is assembled from these tensors by rows (a fused q|k|v weight from
  // three); they cover its rows in order from 0, `name` is not used and none is transposed.
  // Empty: the parameter is the one tensor `name`.
  std::vector<TensorPiece> pieces{};
};
// (unit name, parameter) -> its tensor. An export needs distinct names for distinct parameters;
// an import may read one tensor into several parameters (an output embedding tied to the input
// embedding and stored once).
using TensorNamer = std::function<TensorName(const std::string& unit, const ParamSpec& param)>;
// Our own naming: "<unit>.<param>", not transposed.
TensorName default_tensor_name(const std::string& unit, const ParamSpec& param);

// A unit's trainable parameters by name, their full fp32 master values, for an export's
// transform_frozen.
using UnitValues = std::map<std::string, std::vector<float>>;

struct ExportOptions {
  DType dtype = DType::kF32;  // kF32 or kBF16 (rounded to nearest even)
  TensorNamer namer;          // empty: default_tensor_name
  // Which parameters to write (trainable and frozen alike); empty: every one.
  std::function<bool(const std::string& unit, const ParamSpec& param)> include;
  // Called on the writing rank with each frozen parameter's full values before they are written,
  // beside its unit's trainable values (the master, written as they are); may change `values` but
  // not their size (a model merges its adapters into the base weights here). Frozen parameters are
  // gathered a unit at a time and decoded one at a time, so the writer holds one of them in fp32.
  std::function<void(const std::string& unit, const std::string& param, const UnitValues& trainable,
                     std::vector<float>& values)>
      transform_frozen;
  // Added to "__metadata__" (which always holds format "pt" and producer "zeroshard").
  std::map<std::string, std::string> metadata;
  // Small files written beside the safetensors file (file name -> content), e.g. a config.json;
  // each atomically (name.tmp, fsync, rename) by rank 0 after the tensors.
  std::map<std::string, std::string> side_files;
  bool create_directory = false;  // create the file's directory when missing (else an error)
  // 0: one file, `path`. > 0: Hugging Face's layout of a directory
  // (checkpoint/safetensors_shards.h, save_pretrained's max_shard_size): `path`
  // ("DIR/model.safetensors") when every tensor fits in one file of at most this many data bytes,
  // else "DIR/model-00001-of-0000N.safetensors"... and "DIR/model.safetensors.index.json"; files of
  // another layout there are replaced.
  int64_t max_shard_bytes = 0;
  // OpenMP threads that decode frozen parameters (int8 dequantization) and convert the values to
  // options.dtype on the writing rank; 0: the OpenMP default. The bytes do not depend on it.
  int threads = 1;
};

struct ExportReport {
  int files = 1;           // safetensors files written (> 1: with an index)
  int64_t data_bytes = 0;  // tensor data, every file together (the index's total_size)
};

struct ImportOptions {
  TensorNamer namer;  // empty: default_tensor_name
  // Parameters the file may lack (adapters a base does not have): they keep their values.
  std::function<bool(const std::string& unit, const ParamSpec& param)> optional;
  // Tensors that no parameter reads and that may be present (another framework's buffers); they
  // are skipped. Any other extra tensor is an error. Empty: none may be.
  std::function<bool(const std::string& name)> ignorable;
  int threads = 1;  // OpenMP threads that encode frozen parameters (int8 quantization); 0: default
};

struct ImportReport {
  std::vector<std::string> ignored;  // ignorable tensors present in the file, in file order
  std::vector<std::string> absent;   // optional parameters the file lacked ("unit.param")
};

// Writes the consolidated fp32 master weights and the frozen parameters (Engine::frozen_specs;
// per unit, trainable then frozen) to `path` as options.dtype under options.namer's names and
// layouts, or to the shards options.max_shard_bytes asks for (tensors in that order, greedily, a
// tensor never split): every rank gathers a unit at a time, rank 0 writes. Atomic
// ([Note: export commit] in safetensors.cc): every file is written to NAME.tmp and fsynced, the
// side files (options.side_files, e.g. a config.json) are written beside them, and the entry
// point (the single file or the index) is put in place last; in the sharded layout the
// directory's old single file, index and shards the new export does not name are removed, the
// last only after the new export is in place. Creates the directory if options.create_directory.
// Collective; errors (an unsupported dtype, duplicate names, a transposed parameter that is not
// 2-D, I/O) are thrown on every rank, and leave no temporary file.
ExportReport export_model(Engine& engine, Communicator& comm, const std::string& path,
                          const ExportOptions& options);
ExportReport export_model(Engine& engine, Communicator& comm, const std::string& path,
                          DType dtype = DType::kF32);

// Sets the fp32 master weights and the frozen parameters (encoded in their storage dtype, int8
// quantized) from a safetensors file (F32, BF16 or F16 tensors). First, on every rank and before
// anything is changed: the header is read and every parameter's tensor or pieces (options.namer)
// must be present with the parameter's shape (transposed where the namer says so) and a dtype
// above, and no tensor that is neither read nor ignorable may be: zs::Error(kInvalidArgument)
// naming the file and the tensor; a malformed or truncated file gives kCorruptData, a missing one
// kNotFound; the engine is left as it was. Then unit by unit, streaming ([Note: streaming import]
// in safetensors_import.cc): each rank reads only its part of each parameter (of a trainable one
// its shard's ranges, the whole tensor where it is stored transposed; of a frozen one the elements
// Engine::frozen_param_needs names: of an int8 matrix the rows whose values it stores, the row
// scales being exchanged) and checks it finite; the ranks agree, then each frozen parameter is set
// and, after the unit's last, the unit's trainable shard. A non-finite value gives
// kInvalidArgument naming the file, the tensor and the element on every rank; what was set before
// it stays set, so the engine's parameters are then unspecified (import again, or discard the
// engine), but no non-finite value reaches the master. Peak extra memory: the unit's trainable
// shard, the largest frozen parameter's part on this rank in fp32, a 64 MiB read buffer, and a
// tensor stored transposed. Optimizer state and step are left as they are. Collective.
ImportReport import_model(Engine& engine, Communicator& comm, const std::string& path,
                          const ImportOptions& options = {});
// import_model over several files (a sharded checkpoint: each tensor in exactly one of them, a
// tensor in two is kCorruptData). `where` (e.g. the index file) names the set in the errors about
// a missing tensor or tensors the model does not have; other errors name the tensor's file.
// Collective.
ImportReport import_model_files(Engine& engine, Communicator& comm,
                                const std::vector<std::string>& paths, const std::string& where,
                                const ImportOptions& options = {});

// The content of a small file beside a model file (a config.json): rank 0 reads it (at most
// `max_bytes`), every rank gets the same bytes, or the same zs::Error (kNotFound when missing).
// Collective.
std::string read_side_file(Communicator& comm, const std::string& path,
                           int64_t max_bytes = int64_t{1} << 20);

}  // namespace zs::safetensors
