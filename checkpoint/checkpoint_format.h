// The on-disk formats of a sharded checkpoint (docs/checkpoints.md) as pure values: the binary
// header of a shard file and the JSON manifest. Parsers take bytes in memory and never touch the
// file system, so they are tested and fuzzed on their own (fuzz/).
//
// A checkpoint is a directory step-NNNNNNNN/ holding one shard file per writing rank
// (shard-RRRRR.bin) and manifest.json, written last.
//
// Shard file (all integers little-endian):
//   0   char[8]  magic "ZSCKSHRD"
//   8   u32      format version (kFormatVersion)
//   12  u32      header bytes H: 64 + 16 * units, rounded up to a multiple of 64
//   16  u32      rank that wrote the file
//   20  u32      world size it was written with
//   24  u32      number of units
//   28  u32      state mask (bit 0 fp32 master, bit 1 exp_avg, bit 2 exp_avg_sq)
//   32  u64      data bytes D = 4 * states * sum(numel)
//   40  i64      step
//   48  u8[16]   zero
//   64  units x {i64 begin, i64 numel}: the elements [begin, begin + numel) of the unit's padded
//       group (group coordinates of the writer's layout) held in this file; zero padding to H
//   H   data: for each unit, for each state in mask order, numel fp32 values
// The file is exactly H + D bytes.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "optim/loss_scaler.h"
#include "runtime/engine_config.h"

namespace zs::ckpt {

inline constexpr uint32_t kFormatVersion = 1;
inline constexpr char kShardMagic[8] = {'Z', 'S', 'C', 'K', 'S', 'H', 'R', 'D'};
inline constexpr int64_t kShardFixedHeaderBytes = 64;
inline constexpr int64_t kShardUnitEntryBytes = 16;
inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kManifestFormat = "zeroshard-checkpoint";

// State bits, in file order.
inline constexpr uint32_t kStateMaster = 1u;
inline constexpr uint32_t kStateExpAvg = 2u;
inline constexpr uint32_t kStateExpAvgSq = 4u;
inline constexpr uint32_t kStateAll = 7u;
// Number of states in a mask; the position of state bit `bit` among them (-1 when absent).
int state_count(uint32_t mask);
int state_index(uint32_t mask, uint32_t bit);
// "master+exp_avg+exp_avg_sq" style text for messages.
std::string state_mask_text(uint32_t mask);
// The states an engine with optimizer `o` saves: the master; exp_avg for AdamW, Muon (Muon's
// momentum for its parameters, AdamW's m for the others) and SGD with momentum; exp_avg_sq for
// AdamW and Muon (zeros at Muon parameters' elements).
uint32_t optimizer_state_mask(const OptimizerConfig& o);

struct UnitRange {
  int64_t begin = 0;  // first element of the padded group
  int64_t numel = 0;
  bool operator==(const UnitRange&) const = default;
};

struct ShardHeader {
  uint32_t version = kFormatVersion;
  uint32_t rank = 0;
  uint32_t world = 1;
  uint32_t state_mask = kStateMaster;
  int64_t step = 0;
  std::vector<UnitRange> units;

  int64_t header_bytes() const;
  int64_t data_bytes() const;
  int64_t file_bytes() const { return header_bytes() + data_bytes(); }
  // Byte offset in the file of group element `elem` (begin <= elem <= begin + numel) of the state
  // at position `state_pos` (see state_index) of unit `unit`.
  int64_t offset_of(size_t unit, int state_pos, int64_t elem) const;
};

std::vector<std::byte> serialize_shard_header(const ShardHeader& h);
// From the first kShardFixedHeaderBytes bytes of a file: the full header size H. Throws
// zs::Error(kCorruptData) for a bad magic, too few bytes or an impossible unit count, and
// zs::Error(kInvalidArgument) for another format version.
int64_t shard_header_size(std::span<const std::byte> bytes);
// Parses a whole header (at least H bytes; more are ignored). Same errors; messages say what is
// wrong but not which file (callers prefix it).
ShardHeader parse_shard_header(std::span<const std::byte> bytes);

// The manifest: everything needed to check a checkpoint against a model and to read it back at
// any world size and stage.
struct ParamEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // in the writer's padded group (independent of the world size)
  int64_t numel = 0;
};

struct UnitEntry {
  std::string name;
  int64_t padded_numel = 0;  // the writer's padded group size
  std::vector<ParamEntry> params;
};

struct FileEntry {
  std::string name;  // plain file name inside the checkpoint directory
  int rank = 0;
  int64_t size = 0;              // bytes
  uint64_t xxh3 = 0;             // XXH3_64bits of the whole file, seed 0
  std::vector<UnitRange> units;  // one per unit, as in the file's header
};

struct Manifest {
  uint32_t version = kFormatVersion;
  int64_t step = 0;
  int world_size = 1;
  int stage = 0;
  std::string optimizer;  // "adamw", "sgd" or "muon"
  // Which optimizer updated which parameters (optimizer_rules(), runtime/engine_config.h): with
  // "muon", e.g. "muon: 2-D parameters of units block.* (...); adamw: every other parameter".
  // Muon parameters keep their momentum in exp_avg; exp_avg_sq holds zeros at their elements.
  // Written only for muon (absent otherwise: every parameter has `optimizer`); at most 4096 bytes.
  std::string optimizer_rules;
  // How AdamW's moments were stored (state_storage_name(), runtime/engine_config.h): "fp32", or
  // e.g. "int8 (block 256, fp32 under 4096 elements)", or "... elements and for [embed.*])" with
  // OptimizerConfig::state_fp32 (at most 16384 bytes). The files hold their decoded fp32 values
  // either way; a load needs the same storage ([Note: decoded state round trip]). Written only when
  // not "fp32" (absent in older checkpoints: fp32).
  std::string optimizer_states = "fp32";
  uint32_t state_mask = kStateMaster;
  int64_t align = 32;
  std::vector<UnitEntry> units;
  optim::LossScalerState loss_scaler;
  std::string trainer_state = "{}";      // JSON text of an object, opaque to the library
  std::string model_description = "{}";  // JSON text, opaque; compared on load when asked
  // The frozen base the trainable state was trained on (Engine::frozen_hash() as 16 hex digits),
  // or empty when the model has no frozen parameters. Frozen parameters are not saved: a load
  // requires the engine to hold the same base.
  std::string frozen_hash;
  // Where that base came from, in the writer's words (e.g. "--init-safetensors base.st"), for
  // the message when a load finds another base; empty when not given. Not compared.
  std::string frozen_source;
  // The run that wrote the checkpoint (save_dir.h): a resumed run keeps it. Empty in checkpoints
  // of runs without one (and of versions before run ids).
  std::string run_id;
  std::vector<FileEntry> files;
};

// JSON text: {"format", "format_version", "body": {...}, "body_xxh3"}; the checksum covers the
// compact serialisation of "body".
std::string serialize_manifest(const Manifest& m);
// Throws zs::Error(kCorruptData) for malformed JSON, a wrong checksum, missing or ill-typed
// fields or inconsistent values (shapes against numels, overlapping parameters, files that do not
// cover every parameter element), and zs::Error(kInvalidArgument) for another format version.
Manifest parse_manifest(std::string_view text);

std::string hex64(uint64_t v);
// "step-NNNNNNNN" (at least 8 digits), and the step of such a name (-1 for any other name).
std::string step_dir_name(int64_t step);
int64_t parse_step_dir_name(std::string_view name);

// A run id: 1 to 64 characters of [A-Za-z0-9._-] (safe in file names and messages).
bool valid_run_id(std::string_view id);

}  // namespace zs::ckpt
