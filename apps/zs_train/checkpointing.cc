// zs_train's checkpoint flags over the library's checkpoint module (checkpoint/checkpoint.h),
// safetensors export/import (checkpoint/safetensors.h) and the GPT's Hugging Face directories
// (interop/gpt_hf.h). See docs/checkpoints.md and docs/interop.md.
#include "checkpointing.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/safetensors_shards.h"
#include "core/error.h"
#include "core/settings.h"
#include "interop/gpt_hf.h"
#include "interop/gpt_lora_io.h"
#include "memory_check.h"
#include "model_description.h"

namespace zs::train {
namespace {

// Bytes of the regular files under `dir` (a checkpoint directory).
int64_t directory_bytes(const std::string& dir) {
  int64_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) n += static_cast<int64_t>(e.file_size(ec));
  }
  return n;
}

namespace po = boost::program_options;

// "step 3" or "steps 3, 6".
std::string steps_text(const std::vector<int64_t>& steps) {
  std::string out = steps.size() == 1 ? "step " : "steps ";
  for (size_t i = 0; i < steps.size(); ++i) out += (i ? ", " : "") + std::to_string(steps[i]);
  return out;
}

DType export_dtype(const CheckpointFlags& f) {
  const DType dt = parse_dtype(f.export_dtype);
  ZS_CHECK(dt == DType::kF32 || dt == DType::kBF16, ErrorCode::kInvalidArgument,
           "--export-dtype {}: fp32 or bf16 expected", f.export_dtype);
  return dt;
}

void check_flags(const CheckpointFlags& f) {
  ZS_CHECK(f.save_every >= 0, ErrorCode::kInvalidArgument, "--save-every {} is negative",
           f.save_every);
  ZS_CHECK(f.keep >= 0, ErrorCode::kInvalidArgument, "--keep {} is negative", f.keep);
  ZS_CHECK(!f.resume || !f.save_dir.empty(), ErrorCode::kInvalidArgument,
           "--resume needs --save-dir (the directory to resume from)");
  ZS_CHECK(!(f.resume && !f.resume_from.empty()), ErrorCode::kInvalidArgument,
           "--resume and --resume-from are exclusive");
  ZS_CHECK(f.save_every == 0 || !f.save_dir.empty(), ErrorCode::kInvalidArgument,
           "--save-every needs --save-dir");
  ZS_CHECK(f.init_from.empty() || f.init_from_hf.empty(), ErrorCode::kInvalidArgument,
           "--init-safetensors and --init-from-hf are exclusive");
  ZS_CHECK(!f.save_async || !f.save_dir.empty(), ErrorCode::kInvalidArgument,
           "--save-async needs --save-dir");
  ZS_CHECK(f.save_memory_every >= 0, ErrorCode::kInvalidArgument,
           "--save-memory-every {} is negative", f.save_memory_every);
  ZS_CHECK(f.save_memory_every == 0 || !f.save_dir.empty(), ErrorCode::kInvalidArgument,
           "--save-memory-every needs --save-dir (the run the memory checkpoints belong to, and "
           "the disk tier)");
  ZS_CHECK(!f.overwrite || !f.save_dir.empty(), ErrorCode::kInvalidArgument,
           "--overwrite needs --save-dir (the directory whose checkpoints it replaces)");
  ZS_CHECK(!f.overwrite || (!f.resume && f.resume_from.empty()), ErrorCode::kInvalidArgument,
           "--overwrite starts a fresh run over --save-dir's checkpoints; it does not go with "
           "{}, which continues a run",
           f.resume ? "--resume" : "--resume-from");
  if (!f.export_safetensors.empty() || !f.export_hf.empty() || !f.export_adapters.empty())
    export_dtype(f);
  safetensors::parse_byte_size(f.export_shard_size, "--export-shard-size");
}

std::string trainer_state_json(const TrainerState& s) {
  nlohmann::json j;
  j["step"] = s.step;
  j["data_cursor"] = s.data_cursor;
  j["rng"] = s.rng;
  if (s.invariant_micro_batches > 0) j["world_invariant_micro_batches"] = s.invariant_micro_batches;
  return j.dump();
}

TrainerState parse_trainer_state(const std::string& text, const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  TrainerState s;
  try {
    s.step = j.at("step").get<int64_t>();
    s.data_cursor = j.at("data_cursor").get<int64_t>();
    s.rng = j.at("rng").get<uint64_t>();
    s.invariant_micro_batches = j.value("world_invariant_micro_batches", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::kCorruptData, "{}: the trainer state is not zs_train's ({})", path, e.what());
  }
  return s;
}

// [Note: world-invariant reduction]: a checkpoint continues with the uninterrupted run's bits only
// with the same global micro-batches; a mismatch is refused, a checkpoint written outside the mode
// gets a note (`root`: rank 0 prints it).
void check_invariant_resume(const TrainerState& saved, const TrainerState& run,
                            const std::string& path, bool root) {
  const int64_t saved_m = saved.invariant_micro_batches, m = run.invariant_micro_batches;
  ZS_CHECK(m == 0 || saved_m == 0 || saved_m == m, ErrorCode::kInvalidArgument,
           "{}: written in world-invariant mode with --global-micro-batches {}; this run gives {}, "
           "which would not continue it with the same bits: give --global-micro-batches {}",
           path, saved_m, m, saved_m);
  if (m > 0 && saved_m == 0 && root)
    std::printf(
        "resume: %s was not written in world-invariant mode; the steps from here on are "
        "world-invariant\n",
        path.c_str());
}

// Where this run's frozen base comes from, for the manifest and the messages of a load.
std::string base_source(const CheckpointFlags& f) {
  if (!f.init_from.empty()) return "from --init-safetensors " + f.init_from;
  if (!f.init_from_hf.empty()) return "from --init-from-hf " + f.init_from_hf;
  return "random init: no --init-safetensors or --init-from-hf given";
}

// Claims --save-dir (checkpoint/save_dir.h), choosing --resume's checkpoint once a killed job's
// --overwrite is settled; says what the claim found and set aside. Nothing without --save-dir.
// `from_memory`: --resume's checkpoint when the memory tier's is the newest (else --resume takes
// the directory's latest).
SaveDir claim_save_dir(Communicator& comm, const CheckpointFlags& flags,
                       const std::string& from_memory) {
  if (flags.save_dir.empty()) return SaveDir();
  SaveDirOptions o;
  o.resume_from = from_memory.empty() ? flags.resume_from : from_memory;
  o.resume_latest = flags.resume && from_memory.empty();
  o.overwrite = flags.overwrite;
  o.choices = flags.resume || !flags.resume_from.empty()
                  ? "give another --save-dir, or resume a checkpoint of that run"
                  : "give --resume to continue it, --overwrite to replace it, or another "
                    "--save-dir";
  SaveDir dir = SaveDir::claim(comm, flags.save_dir, o);
  if (comm.rank() != 0) return dir;
  if (!dir.note().empty()) std::printf("%s: %s\n", flags.save_dir.c_str(), dir.note().c_str());
  if (flags.resume && dir.resume_from().empty() && from_memory.empty())
    std::printf("resume: no complete checkpoint in %s, starting fresh\n", flags.save_dir.c_str());
  if (!dir.replaced_steps().empty())
    std::printf(
        "--overwrite: the checkpoints of run %s (%s) are set aside in %s until this run's first "
        "checkpoint is complete\n",
        dir.replaced_run().c_str(), steps_text(dir.replaced_steps()).c_str(),
        dir.replaced_dir().c_str());
  return dir;
}

// --resume with --save-memory-every: the memory tier's newest checkpoint of the save directory's
// run (owner.json's) when it is newer than the directory's latest; "" otherwise. Rank 0 decides
// (the memory directory may be visible to it alone); every rank must then see that checkpoint, or
// the save directory's is used. Collective.
std::string newer_memory_checkpoint(Communicator& comm, const CheckpointFlags& flags) {
  if (!flags.resume || flags.save_memory_every <= 0 || flags.save_dir.empty()) return "";
  std::string path;
  if (comm.rank() == 0) {
    std::optional<std::string> owner;
    try {
      owner = save_dir_owner(flags.save_dir);
    } catch (const Error&) {  // the claim names it
    }
    if (owner) {
      const std::string dir =
          flags.memory_dir.empty() ? default_memory_dir(*owner) : flags.memory_dir;
      const MemoryCheckpoint m = newest_memory_checkpoint(dir, *owner);
      for (const std::string& i : m.ignored)
        std::printf("resume: ignored in the memory tier %s: %s, not this run's (run %s)\n",
                    dir.c_str(), i.c_str(), owner->c_str());
      const std::vector<int64_t> disk = checkpoint_steps(flags.save_dir);
      const int64_t disk_step = disk.empty() ? -1 : disk.back();
      if (!m.path.empty() && m.step > disk_step) {
        path = m.path;
        std::printf("resume: the memory tier's step %lld is newer than %s's %s\n",
                    static_cast<long long>(m.step), flags.save_dir.c_str(),
                    disk.empty() ? "(none)" : ("step " + std::to_string(disk_step)).c_str());
      }
    }
  }
  path = broadcast_string(comm, path);
  if (path.empty()) return path;
  std::error_code ec;
  double missing =
      std::filesystem::is_regular_file(std::filesystem::path(path) / "manifest.json", ec) ? 0 : 1;
  comm.all_reduce(&missing, &missing, 1, DType::kF64, ReduceOp::kMax);
  if (missing == 0) return path;
  if (comm.rank() == 0)
    std::printf("resume: not every rank sees %s: resuming from %s\n", path.c_str(),
                flags.save_dir.c_str());
  return "";
}

// --save-memory-every: claims the memory directory for the run (`keep`: the checkpoint resumed
// from). A directory that cannot be used leaves the tier inactive, with rank 0's warning.
MemoryTier open_memory_tier(Communicator& comm, const CheckpointFlags& flags,
                            const std::string& run_id, const std::string& keep) {
  if (flags.save_memory_every <= 0 || run_id.empty()) return MemoryTier();
  const std::string dir = flags.memory_dir.empty() ? default_memory_dir(run_id) : flags.memory_dir;
  try {
    MemoryTier t = MemoryTier::open(comm, dir, run_id, keep);
    if (comm.rank() == 0 && !t.note().empty())
      std::printf("memory tier %s: %s\n", dir.c_str(), t.note().c_str());
    return t;
  } catch (const Error& e) {
    if (comm.rank() == 0)
      std::fprintf(stderr,
                   "zs_train: warning: --save-memory-every: the memory tier cannot be used (%s); "
                   "the run goes on with disk checkpoints only\n",
                   e.what());
    return MemoryTier();
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --init-from-hf, --init-safetensors. `what`: "initial weights" or "frozen base".
void load_initial_weights(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                          const nn::GptConfig& model, const char* what) {
  if (!flags.init_from_hf.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    const nn::GptHfImport r = nn::import_gpt_hf(engine, comm, model, flags.init_from_hf);
    if (comm.rank() == 0) {
      std::printf("%s from %s (Hugging Face %s", what, flags.init_from_hf.c_str(),
                  nn::hf_class_name(r.config.family));
      if (r.shards > 1) std::printf(", %d safetensors shards", r.shards);
      std::printf(") in %.1f s\n", seconds_since(t0));
      if (r.config.tied)
        std::printf("tied: lm_head.weight is %s (one parameter)\n",
                    nn::hf_embedding_name(r.config.family));
      for (const std::string& name : r.ignored) std::printf("  skipped: %s\n", name.c_str());
    }
  }
  if (!flags.init_from.empty()) {
    safetensors::ImportOptions o;
    nn::lora_optional_on_import(model.adapters.lora, o);  // a base file has no adapters
    const safetensors::ImportReport r = safetensors::import_model(engine, comm, flags.init_from, o);
    if (comm.rank() == 0) {
      std::printf("%s from %s", what, flags.init_from.c_str());
      if (!r.absent.empty())
        std::printf(" (%zu adapter tensors not in it: initialised)", r.absent.size());
      std::printf("\n");
    }
  }
}

}  // namespace

void add_checkpoint_flags(po::options_description& d, CheckpointFlags& f) {
  d.add_options()                                                                                //
      ("save-dir", po::value(&f.save_dir), "directory of sharded checkpoints (step-NNNNNNNN/)")  //
      ("overwrite", po::bool_switch(&f.overwrite),
       "a fresh run into a --save-dir holding another run's checkpoints sets them aside and "
       "removes them once its own first checkpoint is complete (put back if it ends sooner; "
       "without --overwrite the run is refused)")  //
      ("save-every", po::value(&f.save_every)->default_value(f.save_every),
       "save every N optimizer steps (0: only after the last step) when --save-dir is set")  //
      ("keep", po::value(&f.keep)->default_value(f.keep),
       "keep the newest K checkpoints in --save-dir (0: all)")  //
      ("save-async", po::bool_switch(&f.save_async),
       "a save copies the checkpoint into a host snapshot (its size in memory per rank, planned) "
       "and training goes on while a background thread writes it; at most one write in flight "
       "(a save that finds the previous one running waits); the end of the run waits for the "
       "last")  //
      ("save-memory-every", po::value(&f.save_memory_every)->default_value(f.save_memory_every),
       "also save a checkpoint every N steps into the memory tier (a RAM-backed directory, "
       "--memory-dir), keeping the newest; --resume takes the newest over both tiers; removed "
       "when the run ends normally (0: off)")  //
      ("memory-dir", po::value(&f.memory_dir),
       "the memory tier's directory, every rank must see it (default "
       "/dev/shm/zeroshard-<run id>)")  //
      ("resume", po::bool_switch(&f.resume),
       "resume from the latest complete checkpoint in --save-dir (start fresh when none)")  //
      ("resume-from", po::value(&f.resume_from), "resume from this checkpoint directory")   //
      ("export-safetensors", po::value(&f.export_safetensors),
       "write the consolidated model to this safetensors file at the end")  //
      ("export-dtype", po::value(&f.export_dtype)->default_value(f.export_dtype),
       "dtype of --export-safetensors: fp32 or bf16")  //
      ("init-safetensors", po::value(&f.init_from),
       "initial weights from this safetensors file (ignored when a checkpoint is resumed)");
}

void add_hf_flags(po::options_description& d, CheckpointFlags& f) {
  d.add_options()  //
      ("export-hf", po::value(&f.export_hf),
       "at the end, write a Hugging Face directory here (model.safetensors in --export-dtype, "
       "config.json: GPT2LMHeadModel, LlamaForCausalLM or Qwen2ForCausalLM as the architecture "
       "is) that AutoModelForCausalLM.from_pretrained loads")  //
      ("export-shard-size", po::value(&f.export_shard_size)->default_value(f.export_shard_size),
       "--export-hf's largest weights file, as save_pretrained's max_shard_size: bytes, or with "
       "KB, MB, GB (10^3, 10^6, 10^9) or KiB, MiB, GiB; a model larger is written as "
       "model-00001-of-0000N.safetensors... and model.safetensors.index.json")  //
      ("init-from-hf", po::value(&f.init_from_hf),
       "the model config.json describes (GPT-2, Llama, Mistral, Qwen2; a model flag given must "
       "agree with it; a rotary model's context is --context) and its initial weights "
       "(model.safetensors or a sharded index; tied embeddings stay one parameter); a resumed "
       "checkpoint wins over the weights");
}

SaveDir start_run(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                  const nn::GptConfig& model, const std::string& model_json, TrainerState& state,
                  MemoryTier& memory) {
  check_flags(flags);
  // Before any weights are read: a directory this run may not write refuses the run at once.
  // What it replaces stays until this run's first checkpoint is complete (save_if_due).
  SaveDir dir = claim_save_dir(comm, flags, newer_memory_checkpoint(comm, flags));
  const std::string path = flags.save_dir.empty() ? flags.resume_from : dir.resume_from();
  state.run_id = dir.run_id();
  CheckpointLoadOptions opt;
  if (!path.empty()) {
    // The model first, in the flags' terms, before any weights are read. A checkpoint from
    // before the components were described resumes as the GPT-2 it is.
    const CheckpointInfo saved = read_checkpoint_info(path);
    opt.expect_model_description = description_to_expect(saved.model_description, model_json);
    const std::string change =
        describe_model_change(saved.model_description, opt.expect_model_description);
    ZS_CHECK(change.empty(), ErrorCode::kInvalidArgument,
             "{}: the checkpoint does not match this run's model: {}", path, change);
    check_invariant_resume(parse_trainer_state(saved.trainer_state, path), state, path,
                           comm.rank() == 0);
  }
  // A checkpoint holds no frozen base: it is loaded first, so that the checkpoint's adapters are
  // checked against the base they were trained on and continue on it.
  const bool frozen = engine.num_frozen_params() > 0;
  if (path.empty() || frozen)
    load_initial_weights(engine, comm, flags, model,
                         path.empty() ? "initial weights" : "frozen base");
  if (path.empty()) {
    memory = open_memory_tier(comm, flags, dir.run_id(), "");
    return dir;
  }
  if (frozen) opt.frozen_base_source = base_source(flags);
  const auto t0 = std::chrono::steady_clock::now();
  const CheckpointInfo info = load_checkpoint(engine, comm, path, opt);
  const double read_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const TrainerState mine = state;
  state = parse_trainer_state(info.trainer_state, path);
  state.run_id = mine.run_id;
  state.invariant_micro_batches = mine.invariant_micro_batches;
  ZS_CHECK(state.step == info.step, ErrorCode::kCorruptData,
           "{}: trainer step {} differs from the checkpoint's step {}", path, state.step,
           info.step);
  if (comm.rank() == 0) {
    std::printf("resumed from %s (step %lld, written by %d ranks at stage %d)\n", path.c_str(),
                static_cast<long long>(info.step), info.world_size, info.stage);
    const double bytes = static_cast<double>(directory_bytes(path));
    std::printf("resume: read %s in %.2f s (%.2f GB/s)\n", human_bytes(bytes).c_str(), read_s,
                read_s > 0 ? bytes / read_s / 1e9 : 0.0);
    const std::string& init = flags.init_from.empty() ? flags.init_from_hf : flags.init_from;
    if (!init.empty() && !frozen)
      std::printf("resume: the checkpoint wins; initial weights %s not read\n", init.c_str());
  }
  memory = open_memory_tier(comm, flags, dir.run_id(), path);
  return dir;
}

nlohmann::ordered_json save_record_json(const SaveRecord& r) {
  nlohmann::ordered_json j = {{"step", r.step},       {"path", r.path},       {"async", r.async},
                              {"stall_s", r.stall_s}, {"write_s", r.write_s}, {"bytes", r.bytes}};
  if (r.memory) j["tier"] = "memory";
  if (r.async) {
    j["snapshot_s"] = r.snapshot_s;
    j["waited_s"] = r.waited_s;
    j["commit_s"] = r.commit_s;
    j["final_wait_s"] = r.final_wait_s;
  }
  return j;
}

std::unique_ptr<AsyncCheckpointSaver> make_async_saver(Engine& engine, Communicator& comm,
                                                       const CheckpointFlags& flags) {
  if (!flags.save_async || flags.save_dir.empty()) return nullptr;
  AsyncSaveOptions o;
  o.test_delay_ms = Settings::from_environment().test_save_delay_ms;
  auto saver = std::make_unique<AsyncCheckpointSaver>(o);
  saver->reserve(engine, comm.rank());
  return saver;
}

namespace {

// A complete save: rank 0's line, and what --overwrite set aside removed after the first.
SaveRecord saved(const CheckpointFlags& flags, SaveDir& dir, SaveRecord r, bool root) {
  if (root) {
    r.bytes = static_cast<double>(directory_bytes(r.path));
    if (r.async) {
      std::printf(
          "saved checkpoint %s (%s; snapshot %.3f s, written in background in %.2f s, "
          "%.2f GB/s; training stalled %.3f s)\n",
          r.path.c_str(), human_bytes(r.bytes).c_str(), r.snapshot_s, r.write_s,
          r.write_s > 0 ? r.bytes / r.write_s / 1e9 : 0.0, r.stall_s);
    } else {
      // The files' size on disk and the rate the training waited for (every rank's write, the
      // fsyncs and the manifest included).
      std::printf("saved checkpoint %s (%s in %.2f s, %.2f GB/s)\n", r.path.c_str(),
                  human_bytes(r.bytes).c_str(), r.stall_s,
                  r.stall_s > 0 ? r.bytes / r.stall_s / 1e9 : 0.0);
    }
  }
  const std::vector<int64_t> replaced = dir.replaced_steps();
  if (dir.finish_replacing())
    std::printf(
        "--overwrite: removed the checkpoints of run %s from %s (%s) now that %s is "
        "complete\n",
        dir.replaced_run().c_str(), flags.save_dir.c_str(), steps_text(replaced).c_str(),
        r.path.c_str());
  return r;
}

// What a save of this run at this step stores (either tier).
CheckpointSaveOptions save_options(Engine& engine, const CheckpointFlags& flags,
                                   const std::string& model_json, const TrainerState& state) {
  ZS_CHECK(state.step == engine.steps_taken(), ErrorCode::kInvalidArgument,
           "save: trainer step {} differs from the engine's {}", state.step, engine.steps_taken());
  CheckpointSaveOptions opt;
  opt.keep = flags.keep;
  opt.trainer_state = trainer_state_json(state);
  opt.model_description = model_json.empty() ? "{}" : model_json;
  opt.run_id = state.run_id;
  if (engine.num_frozen_params() > 0) opt.frozen_base_source = base_source(flags);
  return opt;
}

SaveRecord async_record(const AsyncSaveResult& a) {
  SaveRecord r;
  r.step = a.step;
  r.path = a.path;
  r.async = true;
  r.snapshot_s = a.snapshot_s;
  r.waited_s = a.waited_s;
  r.stall_s = a.snapshot_s + a.waited_s;
  r.write_s = a.write_s;
  return r;
}

}  // namespace

std::vector<SaveRecord> save_if_due(Engine& engine, Communicator& comm,
                                    const CheckpointFlags& flags, const std::string& model_json,
                                    const TrainerState& state, SaveDir& dir, bool last_step,
                                    AsyncCheckpointSaver* async) {
  std::vector<SaveRecord> out;
  if (flags.save_dir.empty()) return out;
  const bool due = last_step || (flags.save_every > 0 && state.step % flags.save_every == 0);
  if (!due) return out;
  const CheckpointSaveOptions opt = save_options(engine, flags, model_json, state);
  const bool root = comm.rank() == 0;
  if (async != nullptr) {
    std::optional<AsyncSaveResult> previous;
    const AsyncSaveResult now = async->save(engine, comm, flags.save_dir, opt, previous);
    if (previous && root && now.found_writing)
      std::printf(
          "save at step %lld: the background write of step %lld was still running; waited "
          "%.3f s for it\n",
          static_cast<long long>(now.step), static_cast<long long>(previous->step), now.waited_s);
    if (previous) out.push_back(saved(flags, dir, async_record(*previous), root));
    return out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  SaveRecord r;
  r.step = state.step;
  r.path = save_checkpoint(engine, comm, flags.save_dir, opt);
  r.stall_s = r.write_s = seconds_since(t0);
  out.push_back(saved(flags, dir, r, root));
  return out;
}

std::vector<SaveRecord> save_memory_if_due(Engine& engine, Communicator& comm,
                                           const CheckpointFlags& flags,
                                           const std::string& model_json, const TrainerState& state,
                                           MemoryTier& memory, bool last_step) {
  std::vector<SaveRecord> out;
  const int64_t every = flags.save_memory_every;
  if (!memory.active() || every <= 0 || last_step || state.step % every != 0) return out;
  // A synchronous disk save of this step is complete already; an asynchronous one is not yet.
  if (!flags.save_async && flags.save_every > 0 && state.step % flags.save_every == 0) return out;
  const CheckpointSaveOptions opt = save_options(engine, flags, model_json, state);
  const auto t0 = std::chrono::steady_clock::now();
  SaveRecord r;
  r.step = state.step;
  r.memory = true;
  try {
    r.path = memory.save(engine, comm, opt);
  } catch (const Error& e) {
    // Every rank has the same error (save_checkpoint agrees on it). The disk tier still holds the
    // run's checkpoints, so a full /dev/shm costs the tier, not the run.
    if (e.code() == ErrorCode::kNonFinite) throw;
    if (comm.rank() == 0)
      std::fprintf(stderr,
                   "zs_train: warning: the memory checkpoint of step %lld failed (%s); the memory "
                   "tier %s is removed and the run goes on with disk checkpoints only\n",
                   static_cast<long long>(state.step), e.what(), memory.dir().c_str());
    memory.remove();
    return out;
  }
  r.stall_s = r.write_s = seconds_since(t0);
  if (comm.rank() == 0) {
    r.bytes = static_cast<double>(directory_bytes(r.path));
    std::printf("saved memory checkpoint %s (%s in %.3f s)\n", r.path.c_str(),
                human_bytes(r.bytes).c_str(), r.stall_s);
  }
  out.push_back(r);
  return out;
}

std::vector<SaveRecord> commit_saves(Communicator& comm, const CheckpointFlags& flags, SaveDir& dir,
                                     AsyncCheckpointSaver* async, bool wait) {
  std::vector<SaveRecord> out;
  if (async == nullptr || !async->pending()) return out;
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<AsyncSaveResult> a = wait ? async->finish(comm) : async->poll(comm);
  if (!a) return out;
  SaveRecord r = async_record(*a);
  if (!wait) {  // a step's poll: the commit blocked the training, after the step
    r.commit_s = a->commit_s;
    r.stall_s += r.commit_s;
  }
  if (wait) {
    r.final_wait_s = seconds_since(t0);
    if (comm.rank() == 0)
      std::printf("end of run: waited %.3f s for the background write of step %lld\n",
                  r.final_wait_s, static_cast<long long>(r.step));
  }
  out.push_back(saved(flags, dir, r, comm.rank() == 0));
  return out;
}

void export_if_asked(Engine& engine, Communicator& comm, const CheckpointFlags& flags,
                     const nn::GptConfig& model) {
  if (!flags.export_safetensors.empty()) {
    safetensors::ExportOptions o;
    o.dtype = export_dtype(flags);
    nn::merge_lora_on_export(model, o);  // with adapters: the merged model
    safetensors::export_model(engine, comm, flags.export_safetensors, o);
    if (comm.rank() == 0)
      std::printf("exported %s (%s)\n", flags.export_safetensors.c_str(),
                  flags.export_dtype.c_str());
  }
  if (!flags.export_hf.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    const safetensors::ExportReport r = nn::export_gpt_hf(
        engine, comm, model, flags.export_hf, export_dtype(flags),
        safetensors::parse_byte_size(flags.export_shard_size, "--export-shard-size"));
    if (comm.rank() == 0 && r.files == 1)
      std::printf("exported %s/model.safetensors and config.json (Hugging Face %s, %s) in %.1f s\n",
                  flags.export_hf.c_str(), nn::hf_class_name(nn::hf_family_of(model.arch)),
                  flags.export_dtype.c_str(), seconds_since(t0));
    if (comm.rank() == 0 && r.files > 1)
      std::printf(
          "exported %s: %d safetensors files of at most %s, model.safetensors.index.json and "
          "config.json (Hugging Face %s, %s, %lld bytes of tensors) in %.1f s\n",
          flags.export_hf.c_str(), r.files, flags.export_shard_size.c_str(),
          nn::hf_class_name(nn::hf_family_of(model.arch)), flags.export_dtype.c_str(),
          static_cast<long long>(r.data_bytes), seconds_since(t0));
  }
  if (!flags.export_adapters.empty()) {
    nn::export_gpt_peft_adapters(engine, comm, model, flags.export_adapters, export_dtype(flags));
    if (comm.rank() == 0)
      std::printf("exported %s/adapter_model.safetensors and adapter_config.json (PEFT LoRA, %s)\n",
                  flags.export_adapters.c_str(), flags.export_dtype.c_str());
  }
}

}  // namespace zs::train
