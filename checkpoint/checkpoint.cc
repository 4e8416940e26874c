#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_format.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/save_dir.h"
#include "checkpoint/save_phases.h"
#include "collectives/fail_together.h"
#include "core/error.h"

namespace zs {
namespace fs = std::filesystem;
using ckpt::FileEntry;
using ckpt::Manifest;
using ckpt::ShardHeader;
using ckpt::UnitRange;

namespace {

constexpr int64_t kMaxManifestBytes = int64_t{256} << 20;

const char* optimizer_name(OptimizerKind k) { return optimizer_kind_name(k); }

// The manifest's optimizer_rules: written for Muon only (AdamW and SGD update every parameter).
std::string manifest_rules(const OptimizerConfig& o) {
  return o.kind == OptimizerKind::kMuon ? optimizer_rules(o) : std::string();
}

// From the configuration (a unit whose parameters are all frozen holds no state to look at):
// AdamW keeps m and v, SGD with momentum its momentum (in exp_avg), Muon AdamW's m and v for its
// AdamW parameters and its momentum in exp_avg for the others (zeros in their exp_avg_sq).
uint32_t engine_state_mask(Engine& e) { return ckpt::optimizer_state_mask(e.config().optimizer); }

// Collective: the base a checkpoint's trainable state belongs to, or "" without frozen
// parameters.
std::string engine_frozen_hash(Engine& e) {
  return e.num_frozen_params() > 0 ? ckpt::hex64(e.frozen_hash()) : std::string();
}

// The state arrays of a shard in mask order.
// Values per read of a load ([Note: load phases]): 64 MiB of fp32.
constexpr int64_t kLoadChunk = int64_t{16} << 20;

std::vector<float*> state_ptrs(const UnitShardState& st, uint32_t mask) {
  std::vector<float*> v{st.master};
  if (mask & ckpt::kStateExpAvg) v.push_back(st.exp_avg);
  if (mask & ckpt::kStateExpAvgSq) v.push_back(st.exp_avg_sq);
  return v;
}

std::string shard_file_name(int rank) { return fmt::format("shard-{:05d}.bin", rank); }

void check_json_object(const std::string& text, const char* what) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  ZS_CHECK(!j.is_discarded(), ErrorCode::kInvalidArgument, "save_checkpoint: {} is not valid JSON",
           what);
  ZS_CHECK(j.is_object(), ErrorCode::kInvalidArgument, "save_checkpoint: {} is not a JSON object",
           what);
}

Manifest describe_engine(Engine& e, Communicator& comm) {
  Manifest m;
  m.step = e.steps_taken();
  m.world_size = comm.size();
  m.stage = static_cast<int>(e.config().stage);
  m.optimizer = optimizer_name(e.config().optimizer.kind);
  m.optimizer_rules = manifest_rules(e.config().optimizer);
  m.optimizer_states = state_storage_name(e.config().optimizer);
  m.state_mask = engine_state_mask(e);
  m.align = e.config().align;
  m.loss_scaler = e.loss_scaler_state();
  m.frozen_hash = engine_frozen_hash(e);
  for (size_t u = 0; u < e.num_units(); ++u) {
    const GroupLayout& l = e.layout(u);
    const std::vector<ParamSpec>& specs = e.param_specs(u);
    ckpt::UnitEntry ue;
    ue.name = e.unit_name(u);
    ue.padded_numel = l.padded_numel;
    for (size_t p = 0; p < specs.size(); ++p) {
      ue.params.push_back({specs[p].name, specs[p].shape, l.params[p].offset, l.params[p].numel});
    }
    m.units.push_back(std::move(ue));
  }
  return m;
}

// This rank's shard header at the engine's current state.
ShardHeader shard_header(Engine& e, int rank, int world, uint32_t mask) {
  ShardHeader h;
  h.rank = static_cast<uint32_t>(rank);
  h.world = static_cast<uint32_t>(world);
  h.state_mask = mask;
  h.step = e.steps_taken();
  for (size_t u = 0; u < e.num_units(); ++u) {
    const ShardExtent st = e.shard_extent(u);
    h.units.push_back({st.begin, st.numel});
  }
  return h;
}

// Writes this rank's shard file from the engine's state (what copy_shard_image lays out in
// memory, streamed), fsync'ed.
ckpt::ShardWritten write_shard(Engine& e, const ckpt::SaveJob& job) {
  const auto t0 = std::chrono::steady_clock::now();
  ckpt::OutFile out(job.shard_path);
  const std::vector<std::byte> header = ckpt::serialize_shard_header(job.header);
  out.write(header.data(), header.size());
  // A unit's states follow one another in the file (master, m, v): each is streamed piece by
  // piece, so that one piece's decoded copies exist at a time (each piece is decoded once per
  // state written).
  const int states = ckpt::state_count(job.header.state_mask);
  for (size_t u = 0; u < e.num_units(); ++u) {
    const std::vector<ShardExtent> pieces =
        e.shard_pieces(u, job.state_piece_numel);  // none: only frozen parameters
    for (int k = 0; k < states; ++k) {
      for (const ShardExtent& piece : pieces) {
        const UnitShardState st = e.shard_state(u, piece);
        out.write(state_ptrs(st, job.header.state_mask)[static_cast<size_t>(k)],
                  static_cast<size_t>(st.numel) * sizeof(float));
        e.release_shard_state(u, false);
      }
    }
  }
  out.finish();
  ZS_ASSERT(out.size() == job.header.file_bytes());
  return {out.size(), out.hash(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot remove: {}", p.string(), ec.message());
}

// Rank 0, after a save: drops temporary directories of interrupted saves and the oldest complete
// checkpoints beyond `keep`.
void prune(const fs::path& root, int keep) {
  std::vector<std::pair<int64_t, fs::path>> complete;
  std::error_code ec;
  for (const fs::directory_entry& d : fs::directory_iterator(root, ec)) {
    const std::string name = d.path().filename().string();
    if (name.rfind(".tmp-step-", 0) == 0) {
      remove_tree(d.path());
      continue;
    }
    const int64_t step = ckpt::parse_step_dir_name(name);
    if (step >= 0 && fs::is_regular_file(d.path() / ckpt::kManifestName, ec))
      complete.emplace_back(step, d.path());
  }
  ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot list: {}", root.string(), ec.message());
  if (keep <= 0 || static_cast<int>(complete.size()) <= keep) return;
  std::sort(complete.begin(), complete.end());
  for (size_t i = 0; i + static_cast<size_t>(keep) < complete.size(); ++i)
    remove_tree(complete[i].second);
  zs::sync_dir(root.string());
}

Manifest read_manifest(const fs::path& dir) {
  const fs::path path = dir / ckpt::kManifestName;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail(ErrorCode::kNotFound, "{}: checkpoint directory not found", dir.string());
  if (!fs::exists(path, ec))
    fail(ErrorCode::kNotFound, "{}: manifest not found (an incomplete checkpoint?)", path.string());
  const std::string text = ckpt::read_whole_file(path.string(), kMaxManifestBytes);
  try {
    return ckpt::parse_manifest(text);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", path.string(), e.what()));
  }
}

// The first key (in sorted order, nested keys dotted) where two JSON values differ, with both
// values: "\"lora-alpha\": 16.0 in the checkpoint, 8.0 in the model". Empty when equal.
std::string first_difference(const nlohmann::json& saved, const nlohmann::json& want,
                             const std::string& key) {
  if (saved == want) return "";
  if (saved.is_object() && want.is_object()) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : saved.items()) keys.push_back(k);
    for (const auto& [k, v] : want.items()) {
      if (!saved.contains(k)) keys.push_back(k);
    }
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) {
      const std::string sub = key.empty() ? k : key + "." + k;
      if (!saved.contains(k))
        return fmt::format("\"{}\" is absent in the checkpoint, {} in the model", sub,
                           want[k].dump());
      if (!want.contains(k))
        return fmt::format("\"{}\": {} in the checkpoint, absent in the model", sub,
                           saved[k].dump());
      std::string d = first_difference(saved[k], want[k], sub);
      if (!d.empty()) return d;
    }
  }
  return fmt::format("\"{}\": {} in the checkpoint, {} in the model", key.empty() ? "(all)" : key,
                     saved.dump(), want.dump());
}

// `base`: the engine's engine_frozen_hash(), computed collectively before.
void check_compatible(const Manifest& m, Engine& e, const std::string& base,
                      const fs::path& manifest_path, const CheckpointLoadOptions& opt) {
  const std::string where = manifest_path.string();
  auto mismatch = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: checkpoint does not match the model: {}", where, what));
  };
  // The caller's description first: it names the setting (a hyper-parameter, the adapters' rank
  // or alpha, the base's dtype) that the differences below only show the consequences of.
  if (!opt.expect_model_description.empty()) {
    const nlohmann::json want = nlohmann::json::parse(opt.expect_model_description, nullptr, false);
    ZS_CHECK(!want.is_discarded(), ErrorCode::kInvalidArgument,
             "load_checkpoint: the expected model description is not valid JSON");
    const std::string d = first_difference(nlohmann::json::parse(m.model_description), want, "");
    if (!d.empty()) mismatch("its description differs at " + d);
  }
  if (m.units.size() != e.num_units())
    mismatch(
        fmt::format("{} units in the checkpoint, {} in the model", m.units.size(), e.num_units()));
  for (size_t u = 0; u < m.units.size(); ++u) {
    const ckpt::UnitEntry& ue = m.units[u];
    if (ue.name != e.unit_name(u))
      mismatch(fmt::format("unit {} is \"{}\" in the checkpoint, \"{}\" in the model", u, ue.name,
                           e.unit_name(u)));
    const std::vector<ParamSpec>& specs = e.param_specs(u);
    if (ue.params.size() != specs.size())
      mismatch(fmt::format("unit {} has {} parameters in the checkpoint, {} in the model", ue.name,
                           ue.params.size(), specs.size()));
    for (size_t p = 0; p < specs.size(); ++p) {
      if (ue.params[p].name != specs[p].name)
        mismatch(
            fmt::format("parameter {} of unit {} is \"{}\" in the checkpoint, \"{}\" in the "
                        "model",
                        p, ue.name, ue.params[p].name, specs[p].name));
      if (ue.params[p].shape != specs[p].shape)
        mismatch(fmt::format("{}.{} has shape [{}] in the checkpoint, [{}] in the model", ue.name,
                             specs[p].name, fmt::join(ue.params[p].shape, ", "),
                             fmt::join(specs[p].shape, ", ")));
    }
  }
  const std::string opt_name = optimizer_name(e.config().optimizer.kind);
  if (m.optimizer != opt_name)
    mismatch(
        fmt::format("optimizer {} in the checkpoint, {} in the engine", m.optimizer, opt_name));
  // Muon's rules decide which state a parameter's exp_avg holds (momentum or AdamW's m): a rule
  // that moved a parameter would load one as the other. Its momentum and step count may change.
  const std::string rules = manifest_rules(e.config().optimizer);
  auto rule_part = [](const std::string& r) { return r.substr(0, r.find(" (")); };
  if (rule_part(m.optimizer_rules) != rule_part(rules))
    mismatch(fmt::format("optimizer rules are \"{}\" in the checkpoint, \"{}\" in this run",
                         m.optimizer_rules, rules));
  // Refused rather than converted: the decoded moments would load into another storage, but a
  // resume that silently changes how m and v are stored is not the run it continues.
  const std::string states = state_storage_name(e.config().optimizer);
  if (m.optimizer_states != states)
    mismatch(
        fmt::format("optimizer states are {} in the checkpoint, {} in this run: resume with "
                    "the same optimizer state dtype (and block)",
                    m.optimizer_states, states));
  const uint32_t mask = engine_state_mask(e);
  if (m.state_mask != mask)
    mismatch(fmt::format("checkpoint holds {}, the engine needs {}",
                         ckpt::state_mask_text(m.state_mask), ckpt::state_mask_text(mask)));
  // The frozen base is not in the checkpoint: the engine must hold the one it was trained on.
  if (m.frozen_hash != base) {
    auto from = [](const std::string& source) {
      return source.empty() ? std::string() : " (" + source + ")";
    };
    if (m.frozen_hash.empty())
      mismatch(fmt::format("the checkpoint has no frozen base; this run's base{} is {}",
                           from(opt.frozen_base_source), base));
    if (base.empty())
      mismatch(
          fmt::format("the checkpoint's trainable state was trained on frozen base {}{}; "
                      "this run has no frozen parameters",
                      m.frozen_hash, from(m.frozen_source)));
    mismatch(
        fmt::format("the checkpoint's trainable state was trained on frozen base {}{}; this "
                    "run's base{} is {}: give the same base",
                    m.frozen_hash, from(m.frozen_source), from(opt.frozen_base_source), base));
  }
}

// [Note: loaded values] A checksum shows the bytes are those written, not that they are numbers
// a run can continue from: what is loaded passes the check imports use (ckpt::first_nonfinite),
// master and exp_avg finite, exp_avg_sq finite and >= 0, before any engine state is touched.
// `first`: the index in the parameter of v[0].
void check_loaded_values(const float* v, int64_t n, uint32_t bit, const std::string& file,
                         const ckpt::UnitEntry& unit, size_t param, int64_t first) {
  const bool second_moment = bit == ckpt::kStateExpAvgSq;
  const int64_t bad = ckpt::first_nonfinite(v, static_cast<size_t>(n), second_moment);
  if (bad < 0) return;
  fail(ErrorCode::kNonFinite,
       "{}: unit '{}' parameter '{}': {} holds {} ({}) at element {}: refusing to load it", file,
       unit.name, unit.params[param].name, ckpt::state_mask_text(bit),
       std::isfinite(v[bad]) ? "a negative value" : "a non-finite value", v[bad], first + bad);
}

// The first field where a shard's header and its manifest entry differ, with both values; empty
// when they agree.
std::string header_difference(const ShardHeader& h, const FileEntry& f, const Manifest& m) {
  auto differ = [](const char* field, const auto& header, const auto& manifest) {
    return fmt::format("{} {} in the header, {} in the manifest", field, header, manifest);
  };
  if (static_cast<int64_t>(h.rank) != f.rank) return differ("rank", h.rank, f.rank);
  if (static_cast<int64_t>(h.world) != m.world_size) return differ("world", h.world, m.world_size);
  if (h.state_mask != m.state_mask)
    return differ("states", ckpt::state_mask_text(h.state_mask),
                  ckpt::state_mask_text(m.state_mask));
  if (h.step != m.step) return differ("step", h.step, m.step);
  if (h.units.size() != f.units.size()) return differ("unit count", h.units.size(), f.units.size());
  for (size_t u = 0; u < h.units.size(); ++u) {
    const UnitRange a = h.units[u], b = f.units[u];
    if (a != b)
      return fmt::format(
          "unit {} ({}) holds elements [{}, {}) in the header, [{}, {}) in the manifest", u,
          u < m.units.size() ? m.units[u].name : "?", a.begin, a.begin + a.numel, b.begin,
          b.begin + b.numel);
  }
  if (h.file_bytes() != f.size)
    return fmt::format("the header describes a file of {} bytes, the manifest (and the file) {}",
                       h.file_bytes(), f.size);
  return "";
}

struct OpenShard {
  ckpt::InFile file;
  ShardHeader header;
};

// Opens a shard file and checks its size, its checksum (when `verify`) and its header against its
// manifest entry. A header that does not parse is reported as a checksum mismatch when the file's
// checksum disagrees with the manifest: corruption is named as such whichever byte flipped.
OpenShard open_shard(const fs::path& dir, const FileEntry& f, const Manifest& m, bool verify) {
  const std::string path = (dir / f.name).string();
  ckpt::InFile in(path);
  if (in.size() != f.size)
    fail(ErrorCode::kCorruptData, "{}: {}: {} bytes, the manifest says {}", path,
         in.size() < f.size ? "truncated" : "wrong size", in.size(), f.size);
  auto check_sum = [&] {
    const uint64_t h = in.hash();
    if (h != f.xxh3)
      fail(ErrorCode::kCorruptData, "{}: checksum mismatch (xxh3 {}, the manifest says {})", path,
           ckpt::hex64(h), ckpt::hex64(f.xxh3));
  };
  if (verify) check_sum();
  ShardHeader h;
  try {
    std::vector<std::byte> fixed(static_cast<size_t>(ckpt::kShardFixedHeaderBytes));
    in.read_at(0, fixed.data(), fixed.size());
    const int64_t hb = ckpt::shard_header_size(fixed);
    ZS_CHECK(hb <= in.size(), ErrorCode::kCorruptData, "truncated: header of {} bytes", hb);
    std::vector<std::byte> full(static_cast<size_t>(hb));
    in.read_at(0, full.data(), full.size());
    h = ckpt::parse_shard_header(full);
  } catch (const Error& e) {
    if (!verify) check_sum();
    throw Error(e.code(), fmt::format("{}: {}", path, e.what()));
  }
  const std::string diff = header_difference(h, f, m);
  if (!diff.empty()) {
    if (!verify) check_sum();
    fail(ErrorCode::kCorruptData, "{}: the header does not match the manifest: {}", path, diff);
  }
  return OpenShard{std::move(in), std::move(h)};
}

CheckpointInfo info_of(const fs::path& dir, const Manifest& m) {
  return CheckpointInfo{dir.string(),        m.step,  m.world_size, m.stage, m.trainer_state,
                        m.model_description, m.run_id};
}

// Rank 0, before a save of run `run_id` touches `dir`: the directory must still be that run's
// (save_dir.h). With the writer lock this holds unless someone bypassed it.
void check_owner(const std::string& dir, const std::string& run_id) {
  const std::optional<std::string> owner = save_dir_owner(dir);
  ZS_CHECK(owner.has_value(), ErrorCode::kInvalidArgument,
           "{}/{} is missing: this run ({}) claimed the directory but its owner file is gone; not "
           "saving",
           dir, kOwnerFileName, run_id);
  ZS_CHECK(*owner == run_id, ErrorCode::kInvalidArgument,
           "{}/{} names run {}, not this run ({}): another job took the directory over; not "
           "saving over its checkpoints",
           dir, kOwnerFileName, *owner, run_id);
}

}  // namespace

namespace ckpt {

SaveJob begin_save(Engine& e, Communicator& comm, const std::string& dir,
                   const CheckpointSaveOptions& opt) {
  const int64_t step = e.steps_taken();
  const fs::path root(dir);
  const fs::path tmp = root / (".tmp-" + ckpt::step_dir_name(step));
  const int rank = comm.rank();
  const int world = comm.size();

  // Never a checkpoint of non-finite parameters: agreed before anything touches the directory,
  // so the last good checkpoint stays the latest.
  fail_together(comm, [&] { e.check_master_finite(fmt::format("save_checkpoint step {}", step)); });
  fail_together(comm, [&] {
    ZS_CHECK(!dir.empty(), ErrorCode::kInvalidArgument, "save_checkpoint: empty directory name");
    check_json_object(opt.trainer_state, "the trainer state");
    check_json_object(opt.model_description, "the model description");
    ZS_CHECK(opt.run_id.empty() || ckpt::valid_run_id(opt.run_id), ErrorCode::kInvalidArgument,
             "save_checkpoint: '{}' is not a run id", opt.run_id);
    if (rank == 0) {
      if (!opt.run_id.empty()) check_owner(dir, opt.run_id);
      std::error_code ec;
      fs::create_directories(root, ec);
      ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create: {}", root.string(),
               ec.message());
      remove_tree(tmp);
      fs::create_directory(tmp, ec);
      ZS_CHECK(!ec, ErrorCode::kInvalidArgument, "{}: cannot create: {}", tmp.string(),
               ec.message());
    }
  });

  SaveJob job;
  job.root = root.string();
  job.tmp = tmp.string();
  job.final_dir = (root / ckpt::step_dir_name(step)).string();
  job.keep = opt.keep;
  job.state_piece_numel = opt.state_piece_numel;
  Manifest& m = job.manifest;
  m = describe_engine(e, comm);
  m.trainer_state = opt.trainer_state;
  m.model_description = opt.model_description;
  m.run_id = opt.run_id;
  if (!m.frozen_hash.empty()) m.frozen_source = opt.frozen_base_source;
  // One copy of the state: stage 0's replica from rank 0, else the shards of the first shard
  // group (ranks 0..S-1, whose shard ranks equal their ranks; the other groups hold copies).
  job.writes = (m.stage != 0 || rank == 0) && e.replica_index() == 0;
  const int writers = m.stage == 0 ? 1 : e.shard_group_size();
  for (int r = 0; r < writers; ++r) {
    std::vector<UnitRange> ranges;
    for (size_t u = 0; u < e.num_units(); ++u) {
      const GroupLayout& l = e.layout(u);
      ranges.push_back(m.stage == 0 ? UnitRange{0, l.padded_numel}
                                    : UnitRange{l.shard_begin(r), l.shard_numel});
    }
    job.writer_ranges.push_back(std::move(ranges));
  }
  if (job.writes) {
    job.shard_path = (tmp / shard_file_name(rank)).string();
    job.header = shard_header(e, rank, world, m.state_mask);
  }
  return job;
}

void copy_shard_image(Engine& e, const SaveJob& job, std::byte* dst) {
  const std::vector<std::byte> header = ckpt::serialize_shard_header(job.header);
  std::memcpy(dst, header.data(), header.size());
  std::byte* p = dst + header.size();
  for (size_t u = 0; u < e.num_units(); ++u) {
    const ShardExtent ext = e.shard_extent(u);
    for (const ShardExtent& piece : e.shard_pieces(u, job.state_piece_numel)) {
      const UnitShardState st = e.shard_state(u, piece);
      const std::vector<float*> src = state_ptrs(st, job.header.state_mask);
      for (size_t k = 0; k < src.size(); ++k) {
        std::memcpy(p + (static_cast<int64_t>(k) * ext.numel + (piece.begin - ext.begin)) *
                            static_cast<int64_t>(sizeof(float)),
                    src[k], static_cast<size_t>(piece.numel) * sizeof(float));
      }
      e.release_shard_state(u, false);
    }
    p += static_cast<int64_t>(ckpt::state_count(job.header.state_mask)) * ext.numel *
         static_cast<int64_t>(sizeof(float));
  }
  ZS_ASSERT(p - dst == job.header.file_bytes());
}

std::string commit_save(Communicator& comm, SaveJob& job, const ShardWritten& mine,
                        const std::string& error, ErrorCode code, double* max_write_s) {
  const int rank = comm.rank();
  const int world = comm.size();
  fail_together(comm, [&] {
    if (!error.empty()) throw Error(code, error);
  });
  // Rank 0 needs every writer's size and checksum (the ranges it has in the job); every rank the
  // longest write.
  int64_t sizes_hashes[3] = {mine.size, static_cast<int64_t>(mine.xxh3),
                             static_cast<int64_t>(mine.seconds * 1e9)};
  std::vector<int64_t> all(3 * static_cast<size_t>(world));
  comm.all_gather(sizes_hashes, all.data(), sizeof(sizes_hashes), DType::kU8);
  if (max_write_s != nullptr) {
    int64_t ns = 0;
    for (int r = 0; r < world; ++r) ns = std::max(ns, all[3 * static_cast<size_t>(r) + 2]);
    *max_write_s = static_cast<double>(ns) / 1e9;
  }
  const fs::path tmp(job.tmp), final_dir(job.final_dir), root(job.root);
  Manifest& m = job.manifest;
  fail_together(comm, [&] {
    if (rank != 0) return;
    m.files.clear();
    for (size_t r = 0; r < job.writer_ranges.size(); ++r) {
      FileEntry f;
      f.name = shard_file_name(static_cast<int>(r));
      f.rank = static_cast<int>(r);
      f.size = all[3 * r];
      f.xxh3 = static_cast<uint64_t>(all[3 * r + 1]);
      f.units = job.writer_ranges[r];
      m.files.push_back(std::move(f));
    }
    const std::string text = ckpt::serialize_manifest(m);
    ckpt::OutFile out((tmp / ckpt::kManifestName).string());
    out.write(text.data(), text.size());
    out.finish();
    zs::sync_dir(tmp.string());
    std::error_code ec;
    if (fs::exists(final_dir, ec)) remove_tree(final_dir);
    zs::rename_path(tmp.string(), final_dir.string());
    zs::sync_dir(root.string());
    prune(root, job.keep);
  });
  return job.final_dir;
}

}  // namespace ckpt

std::string save_checkpoint(Engine& e, Communicator& comm, const std::string& dir,
                            const CheckpointSaveOptions& opt) {
  ckpt::SaveJob job = ckpt::begin_save(e, comm, dir, opt);
  ckpt::ShardWritten mine;
  fail_together(comm, [&] {
    if (job.writes) mine = write_shard(e, job);
  });
  return ckpt::commit_save(comm, job, mine, "", ErrorCode::kInternal);
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  const Manifest m = read_manifest(fs::path(path));
  return info_of(fs::path(path), m);
}

namespace {

// load_checkpoint's second phase for one piece of unit u (st: Engine::shard_state(u, piece)):
// padding zero, then each parameter's elements in the piece from the files that hold them, read
// in chunks of kLoadChunk values, each checked before it is copied into the state.
template <typename GetShard>
void load_piece(const Manifest& m, size_t u, const GroupLayout& l, const UnitShardState& st,
                GetShard& get, std::vector<float>& chunk) {
  const uint32_t mask = m.state_mask;
  const uint32_t bits[] = {ckpt::kStateMaster, ckpt::kStateExpAvg, ckpt::kStateExpAvgSq};
  const std::vector<float*> dst = state_ptrs(st, mask);
  for (float* d : dst) std::fill(d, d + st.numel, 0.0f);  // padding zero
  for (size_t p = 0; p < l.params.size(); ++p) {
    const int64_t off = l.params[p].offset;
    const int64_t lo = std::max(st.begin, off);
    const int64_t hi = std::min(st.begin + st.numel, off + l.params[p].numel);
    if (lo >= hi) continue;
    const int64_t saved_lo = m.units[u].params[p].offset + (lo - off);
    const int64_t saved_hi = saved_lo + (hi - lo);
    for (size_t fi = 0; fi < m.files.size(); ++fi) {
      const UnitRange r = m.files[fi].units[u];
      const int64_t a = std::max(saved_lo, r.begin);
      const int64_t b = std::min(saved_hi, r.begin + r.numel);
      if (a >= b) continue;
      OpenShard& sh = get(fi);
      for (uint32_t bit : bits) {
        const int pos = ckpt::state_index(mask, bit);
        if (pos < 0) continue;
        float* out = dst[static_cast<size_t>(pos)] + (lo - st.begin) + (a - saved_lo);
        for (int64_t c = a; c < b; c += kLoadChunk) {
          const int64_t n = std::min(kLoadChunk, b - c);
          chunk.resize(static_cast<size_t>(n));
          sh.file.read_at(sh.header.offset_of(u, pos, c), chunk.data(),
                          static_cast<size_t>(n) * sizeof(float));
          check_loaded_values(chunk.data(), n, bit, sh.file.path(), m.units[u], p,
                              c - m.units[u].params[p].offset);
          std::copy(chunk.begin(), chunk.end(), out + (c - a));
        }
      }
    }
  }
}

}  // namespace

CheckpointInfo load_checkpoint(Engine& e, Communicator& comm, const std::string& path,
                               const CheckpointLoadOptions& opt) {
  const fs::path dir(path);
  const int rank = comm.rank();
  const int world = comm.size();
  Manifest m;
  std::map<size_t, OpenShard> open;
  auto get = [&](size_t fi) -> OpenShard& {
    auto it = open.find(fi);
    if (it == open.end()) {
      const bool verify = fi % static_cast<size_t>(world) == static_cast<size_t>(rank);
      it = open.emplace(fi, open_shard(dir, m.files[fi], m, verify)).first;
    }
    return it->second;
  };
  const std::string base = engine_frozen_hash(e);  // collective: before any rank can fail
  // [Note: load phases] First, before the engine is touched: the manifest, compatibility, and
  // every file's checksum (file i by rank i mod world), agreed by every rank. Then unit by unit:
  // this rank's shard of the unit read piece by piece (Engine::shard_pieces), in chunks of
  // kLoadChunk values, each checked before it is copied into the engine's state, the ranks agree,
  // and the piece's decoded copies are released (re-encoded): one piece's at a time. Nothing holds
  // the whole state twice: at 1B parameters with int8 moments, the whole state in fp32 is 7.4 GB
  // per rank at 2 ranks.
  fail_together(comm, [&] {
    m = read_manifest(dir);
    check_compatible(m, e, base, dir / ckpt::kManifestName, opt);
    for (size_t fi = static_cast<size_t>(rank); fi < m.files.size();
         fi += static_cast<size_t>(world))
      get(fi);
  });
  std::vector<float> chunk;  // one read, checked before it is copied into the engine
  for (size_t u = 0; u < e.num_units(); ++u) {
    // Ranks may cut their parts into different numbers of pieces: the agreement is per unit.
    fail_together(comm, [&] {
      for (const ShardExtent& piece : e.shard_pieces(u, opt.state_piece_numel)) {
        const UnitShardState st = e.shard_state(u, piece);
        load_piece(m, u, e.layout(u), st, get, chunk);
        e.release_shard_state(u, true);
      }
    });
  }
  e.set_steps_taken(m.step);
  e.restore_loss_scaler(m.loss_scaler);
  e.refresh_params_from_master();
  return info_of(dir, m);
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  int64_t best = -1;
  fs::path best_path;
  for (const fs::directory_entry& d : fs::directory_iterator(fs::path(dir), ec)) {
    const int64_t step = ckpt::parse_step_dir_name(d.path().filename().string());
    std::error_code ec2;
    if (step > best && fs::is_regular_file(d.path() / ckpt::kManifestName, ec2)) {
      best = step;
      best_path = d.path();
    }
  }
  if (best < 0) return std::nullopt;
  return best_path.string();
}

}  // namespace zs
