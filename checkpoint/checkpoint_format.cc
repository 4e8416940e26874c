#include "checkpoint/checkpoint_format.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"

static_assert(std::endian::native == std::endian::little,
              "checkpoint files are little-endian; add byte swapping for this host");

namespace zs::ckpt {
namespace {

using nlohmann::json;

// Generous limits that keep every size computation far from int64 overflow.
constexpr int64_t kMaxUnits = int64_t{1} << 20;
constexpr int64_t kMaxElements = int64_t{1} << 48;
constexpr int64_t kMaxRank = int64_t{1} << 20;

template <typename T>
T load_le(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store_le(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

[[noreturn]] void corrupt(const std::string& what) { throw Error(ErrorCode::kCorruptData, what); }

// Manifest field access with typed, named errors.
const json& field(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) corrupt(fmt::format("{} is not a JSON object", where));
  auto it = obj.find(key);
  if (it == obj.end()) corrupt(fmt::format("{} lacks field \"{}\"", where, key));
  return *it;
}
int64_t get_int(const json& obj, const char* key, const std::string& where, int64_t lo,
                int64_t hi) {
  const json& v = field(obj, key, where);
  if (!v.is_number_integer()) corrupt(fmt::format("{}.{} is not an integer", where, key));
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      corrupt(fmt::format("{}.{} = {} is out of range", where, key, u));
    x = static_cast<int64_t>(u);
  } else {
    x = v.get<int64_t>();
  }
  if (x < lo || x > hi)
    corrupt(fmt::format("{}.{} = {} is outside [{}, {}]", where, key, x, lo, hi));
  return x;
}
std::string get_string(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_string()) corrupt(fmt::format("{}.{} is not a string", where, key));
  return v.get<std::string>();
}
const json& get_array(const json& obj, const char* key, const std::string& where) {
  const json& v = field(obj, key, where);
  if (!v.is_array()) corrupt(fmt::format("{}.{} is not an array", where, key));
  return v;
}

uint64_t parse_hex(const std::string& s, const std::string& where) {
  if (s.size() != 16) corrupt(fmt::format("{} is not 16 hex digits", where));
  uint64_t v = 0;
  for (char c : s) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) corrupt(fmt::format("{} is not 16 lower-case hex digits", where));
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

bool safe_file_name(const std::string& s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

// Checks that the union of the files' ranges covers every parameter element of every unit and
// that no two files overlap.
void check_coverage(const Manifest& m) {
  for (size_t u = 0; u < m.units.size(); ++u) {
    std::vector<UnitRange> ranges;
    for (const FileEntry& f : m.files) {
      if (f.units[u].numel > 0) ranges.push_back(f.units[u]);
    }
    std::sort(ranges.begin(), ranges.end(),
              [](const UnitRange& a, const UnitRange& b) { return a.begin < b.begin; });
    // Merge touching ranges into runs.
    std::vector<UnitRange> runs;
    for (const UnitRange& r : ranges) {
      if (!runs.empty()) {
        UnitRange& last = runs.back();
        const int64_t end = last.begin + last.numel;
        if (r.begin < end)
          corrupt(fmt::format("unit {} ({}): files overlap at element {}", u, m.units[u].name,
                              r.begin));
        if (r.begin == end) {
          last.numel += r.numel;
          continue;
        }
      }
      runs.push_back(r);
    }
    for (const ParamEntry& p : m.units[u].params) {
      const bool covered = std::any_of(runs.begin(), runs.end(), [&](const UnitRange& r) {
        return r.begin <= p.offset && p.offset + p.numel <= r.begin + r.numel;
      });
      if (!covered)
        corrupt(fmt::format("parameter {}.{} is not fully held by the listed files",
                            m.units[u].name, p.name));
    }
  }
}

}  // namespace

int state_count(uint32_t mask) { return std::popcount(mask & kStateAll); }

int state_index(uint32_t mask, uint32_t bit) {
  if ((mask & bit) == 0) return -1;
  return std::popcount(mask & (bit - 1));
}

std::string state_mask_text(uint32_t mask) {
  std::string s;
  const char* names[] = {"master", "exp_avg", "exp_avg_sq"};
  for (int i = 0; i < 3; ++i) {
    if ((mask & (1u << i)) == 0) continue;
    if (!s.empty()) s += '+';
    s += names[i];
  }
  return s.empty() ? "none" : s;
}

uint32_t optimizer_state_mask(const OptimizerConfig& o) {
  uint32_t mask = kStateMaster;
  if (uses_adamw(o.kind) || o.sgd.momentum != 0.0f) mask |= kStateExpAvg;
  if (uses_adamw(o.kind)) mask |= kStateExpAvgSq;
  return mask;
}

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

std::string step_dir_name(int64_t step) { return fmt::format("step-{:08d}", step); }

int64_t parse_step_dir_name(std::string_view name) {
  if (name.size() < 13 || name.size() > 23 || name.rfind("step-", 0) != 0) return -1;
  int64_t v = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    v = v * 10 + (name[i] - '0');
  }
  return v;
}

bool valid_run_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

int64_t ShardHeader::header_bytes() const {
  const int64_t raw =
      kShardFixedHeaderBytes + kShardUnitEntryBytes * static_cast<int64_t>(units.size());
  return (raw + 63) / 64 * 64;
}

int64_t ShardHeader::data_bytes() const {
  int64_t n = 0;
  for (const UnitRange& r : units) n += r.numel;
  return n * 4 * state_count(state_mask);
}

int64_t ShardHeader::offset_of(size_t unit, int state_pos, int64_t elem) const {
  int64_t off = header_bytes();
  const int states = state_count(state_mask);
  for (size_t u = 0; u < unit; ++u) off += units[u].numel * 4 * states;
  return off +
         (static_cast<int64_t>(state_pos) * units[unit].numel + (elem - units[unit].begin)) * 4;
}

std::vector<std::byte> serialize_shard_header(const ShardHeader& h) {
  std::vector<std::byte> out(static_cast<size_t>(h.header_bytes()), std::byte{0});
  std::memcpy(out.data(), kShardMagic, 8);
  store_le<uint32_t>(out.data() + 8, h.version);
  store_le<uint32_t>(out.data() + 12, static_cast<uint32_t>(h.header_bytes()));
  store_le<uint32_t>(out.data() + 16, h.rank);
  store_le<uint32_t>(out.data() + 20, h.world);
  store_le<uint32_t>(out.data() + 24, static_cast<uint32_t>(h.units.size()));
  store_le<uint32_t>(out.data() + 28, h.state_mask);
  store_le<uint64_t>(out.data() + 32, static_cast<uint64_t>(h.data_bytes()));
  store_le<int64_t>(out.data() + 40, h.step);
  for (size_t u = 0; u < h.units.size(); ++u) {
    std::byte* e = out.data() + kShardFixedHeaderBytes + kShardUnitEntryBytes * u;
    store_le<int64_t>(e, h.units[u].begin);
    store_le<int64_t>(e + 8, h.units[u].numel);
  }
  return out;
}

int64_t shard_header_size(std::span<const std::byte> b) {
  if (static_cast<int64_t>(b.size()) < kShardFixedHeaderBytes)
    corrupt(
        fmt::format("truncated shard header: {} bytes, need {}", b.size(), kShardFixedHeaderBytes));
  if (std::memcmp(b.data(), kShardMagic, 8) != 0) corrupt("not a zeroshard shard file (bad magic)");
  const uint32_t version = load_le<uint32_t>(b.data() + 8);
  if (version != kFormatVersion)
    fail(ErrorCode::kInvalidArgument, "shard format version {}, this build reads version {}",
         version, kFormatVersion);
  const uint32_t units = load_le<uint32_t>(b.data() + 24);
  if (units < 1 || units > kMaxUnits) corrupt(fmt::format("bad unit count {}", units));
  const int64_t expect = (kShardFixedHeaderBytes + kShardUnitEntryBytes * units + 63) / 64 * 64;
  const uint32_t stored = load_le<uint32_t>(b.data() + 12);
  if (stored != expect)
    corrupt(
        fmt::format("header size {} does not match {} units (expected {})", stored, units, expect));
  return expect;
}

ShardHeader parse_shard_header(std::span<const std::byte> b) {
  const int64_t size = shard_header_size(b);
  if (static_cast<int64_t>(b.size()) < size)
    corrupt(fmt::format("truncated shard header: {} bytes, need {}", b.size(), size));
  ShardHeader h;
  h.version = load_le<uint32_t>(b.data() + 8);
  h.rank = load_le<uint32_t>(b.data() + 16);
  h.world = load_le<uint32_t>(b.data() + 20);
  const uint32_t units = load_le<uint32_t>(b.data() + 24);
  h.state_mask = load_le<uint32_t>(b.data() + 28);
  const uint64_t data_bytes = load_le<uint64_t>(b.data() + 32);
  h.step = load_le<int64_t>(b.data() + 40);
  if (h.world < 1 || h.world > kMaxRank || h.rank >= h.world)
    corrupt(fmt::format("bad rank {} / world size {}", h.rank, h.world));
  if ((h.state_mask & kStateMaster) == 0 || (h.state_mask & ~kStateAll) != 0)
    corrupt(fmt::format("bad state mask {:#x}", h.state_mask));
  if (h.step < 0) corrupt(fmt::format("bad step {}", h.step));
  for (int i = 48; i < 64; ++i) {
    if (b[i] != std::byte{0}) corrupt("reserved header bytes are not zero");
  }
  h.units.resize(units);
  int64_t total = 0;
  for (uint32_t u = 0; u < units; ++u) {
    const std::byte* e = b.data() + kShardFixedHeaderBytes + kShardUnitEntryBytes * u;
    UnitRange r{load_le<int64_t>(e), load_le<int64_t>(e + 8)};
    if (r.begin < 0 || r.numel < 0 || r.begin > kMaxElements || r.numel > kMaxElements)
      corrupt(fmt::format("unit {}: bad range begin {} numel {}", u, r.begin, r.numel));
    total += r.numel;
    if (total > kMaxElements) corrupt("the units hold too many elements");
    h.units[u] = r;
  }
  for (int64_t i = kShardFixedHeaderBytes + kShardUnitEntryBytes * units; i < size; ++i) {
    if (b[static_cast<size_t>(i)] != std::byte{0}) corrupt("header padding is not zero");
  }
  if (data_bytes != static_cast<uint64_t>(h.data_bytes()))
    corrupt(
        fmt::format("data size {} does not match the unit table ({})", data_bytes, h.data_bytes()));
  return h;
}

std::string serialize_manifest(const Manifest& m) {
  json body;
  body["step"] = m.step;
  body["world_size"] = m.world_size;
  body["stage"] = m.stage;
  body["optimizer"] = m.optimizer;
  if (m.optimizer_states != "fp32") body["optimizer_states"] = m.optimizer_states;
  if (!m.optimizer_rules.empty()) body["optimizer_rules"] = m.optimizer_rules;
  body["state_mask"] = m.state_mask;
  body["states"] = state_mask_text(m.state_mask);
  json model;
  model["align"] = m.align;
  model["description"] = json::parse(m.model_description);
  if (!m.frozen_hash.empty()) model["frozen_hash"] = m.frozen_hash;
  if (!m.frozen_source.empty()) model["frozen_source"] = m.frozen_source;
  json units = json::array();
  for (const UnitEntry& u : m.units) {
    json params = json::array();
    for (const ParamEntry& p : u.params) {
      params.push_back(
          {{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}});
    }
    units.push_back({{"name", u.name}, {"padded_numel", u.padded_numel}, {"params", params}});
  }
  model["units"] = units;
  body["model"] = model;
  body["loss_scaler"] = {{"scale", static_cast<double>(m.loss_scaler.scale)},
                         {"scale_bits", std::bit_cast<uint32_t>(m.loss_scaler.scale)},
                         {"good_steps", m.loss_scaler.good_steps},
                         {"hysteresis_left", m.loss_scaler.hysteresis_left}};
  body["trainer_state"] = json::parse(m.trainer_state);
  if (!m.run_id.empty()) body["run_id"] = m.run_id;
  json files = json::array();
  for (const FileEntry& f : m.files) {
    json ranges = json::array();
    for (const UnitRange& r : f.units) ranges.push_back({r.begin, r.numel});
    files.push_back({{"name", f.name},
                     {"rank", f.rank},
                     {"size", f.size},
                     {"xxh3", hex64(f.xxh3)},
                     {"units", ranges}});
  }
  body["files"] = files;
  const std::string compact = body.dump();
  json top;
  top["format"] = kManifestFormat;
  top["format_version"] = m.version;
  top["body"] = body;
  top["body_xxh3"] = hex64(XXH3_64bits(compact.data(), compact.size()));
  return top.dump(1) + "\n";
}

namespace {

// A non-negative integer bounded by kMaxElements + 1 whatever JSON number type carries it (an
// unsigned beyond int64 saturates so that the range checks reject it).
int64_t clamped_int(const json& d) {
  return d.is_number_unsigned()
             ? static_cast<int64_t>(std::min<uint64_t>(d.get<uint64_t>(), kMaxElements + 1))
             : d.get<int64_t>();
}

// The envelope: format, version, and the body's checksum. Returns the checked body.
const json& parse_envelope(const json& top, Manifest& m) {
  if (!top.is_object()) corrupt("manifest is not a JSON object");
  if (get_string(top, "format", "manifest") != kManifestFormat)
    corrupt(fmt::format("manifest format is not \"{}\"", kManifestFormat));
  m.version = static_cast<uint32_t>(get_int(top, "format_version", "manifest", 0, 1 << 30));
  if (m.version != kFormatVersion)
    fail(ErrorCode::kInvalidArgument, "checkpoint format version {}, this build reads version {}",
         m.version, kFormatVersion);
  const json& body = field(top, "body", "manifest");
  const uint64_t want = parse_hex(get_string(top, "body_xxh3", "manifest"), "manifest.body_xxh3");
  const std::string compact = body.dump(-1, ' ', false, json::error_handler_t::replace);
  const uint64_t got = XXH3_64bits(compact.data(), compact.size());
  if (got != want)
    corrupt(fmt::format("manifest checksum mismatch (stored {}, computed {})", hex64(want),
                        hex64(got)));
  return body;
}

// One parameter of a unit; `end` is where the previous parameter ended.
ParamEntry parse_param(const json& j, const std::string& pw, const UnitEntry& u,
                       std::set<std::string>& names, int64_t& end) {
  ParamEntry p;
  p.name = get_string(j, "name", pw);
  if (!names.insert(p.name).second)
    corrupt(fmt::format("duplicate parameter name \"{}\" in unit {}", p.name, u.name));
  const json& shape = get_array(j, "shape", pw);
  if (shape.size() > 16) corrupt(fmt::format("{}: rank {} shape", pw, shape.size()));
  int64_t prod = 1;
  for (const json& d : shape) {
    if (!d.is_number_integer()) corrupt(fmt::format("{}: shape has a non-integer", pw));
    const int64_t v = clamped_int(d);
    if (v < 1 || v > kMaxElements) corrupt(fmt::format("{}: bad dimension {}", pw, v));
    prod *= v;
    if (prod > kMaxElements) corrupt(fmt::format("{}: shape too large", pw));
    p.shape.push_back(v);
  }
  p.offset = get_int(j, "offset", pw, 0, kMaxElements);
  p.numel = get_int(j, "numel", pw, 1, kMaxElements);
  if (p.numel != prod)
    corrupt(fmt::format("{}: numel {} does not match its shape ({})", pw, p.numel, prod));
  if (p.offset < end) corrupt(fmt::format("{}: overlaps the previous parameter", pw));
  end = p.offset + p.numel;
  if (end > u.padded_numel)
    corrupt(fmt::format("{}: ends at {}, past the group's {} elements", pw, end, u.padded_numel));
  return p;
}

UnitEntry parse_unit(const json& j, const std::string& where) {
  UnitEntry u;
  u.name = get_string(j, "name", where);
  // A unit whose parameters are all frozen has no trainable group (0 elements, no parameters).
  u.padded_numel = get_int(j, "padded_numel", where, 0, kMaxElements);
  const json& params = get_array(j, "params", where);
  if (params.empty() != (u.padded_numel == 0))
    corrupt(
        fmt::format("{} has {} parameters in {} elements", where, params.size(), u.padded_numel));
  std::set<std::string> names;
  int64_t end = 0;
  for (size_t pi = 0; pi < params.size(); ++pi) {
    const std::string pw = fmt::format("{}.params[{}]", where, pi);
    u.params.push_back(parse_param(params[pi], pw, u, names, end));
  }
  return u;
}

void parse_model(const json& model, Manifest& m) {
  m.align = get_int(model, "align", "model", 1, int64_t{1} << 20);
  m.model_description = field(model, "description", "model").dump();
  if (model.contains("frozen_hash")) {
    m.frozen_hash = get_string(model, "frozen_hash", "model");
    if (m.frozen_hash.size() != 16 ||
        m.frozen_hash.find_first_not_of("0123456789abcdef") != std::string::npos)
      corrupt(fmt::format("model.frozen_hash '{}' is not 16 hex digits", m.frozen_hash));
  }
  if (model.contains("frozen_source")) {
    m.frozen_source = get_string(model, "frozen_source", "model");
    if (m.frozen_source.size() > 4096) corrupt("model.frozen_source is longer than 4096 bytes");
  }
  const json& units = get_array(model, "units", "model");
  if (units.empty() || static_cast<int64_t>(units.size()) > kMaxUnits)
    corrupt(fmt::format("model has {} units", units.size()));
  std::set<std::string> unit_names;
  for (size_t ui = 0; ui < units.size(); ++ui) {
    const std::string where = fmt::format("model.units[{}]", ui);
    // The name is checked for duplicates before the rest of the unit, as the messages promise.
    const std::string name = get_string(units[ui], "name", where);
    if (!unit_names.insert(name).second) corrupt(fmt::format("duplicate unit name \"{}\"", name));
    m.units.push_back(parse_unit(units[ui], where));
  }
}

void parse_loss_scaler(const json& ls, Manifest& m) {
  const uint32_t bits =
      static_cast<uint32_t>(get_int(ls, "scale_bits", "loss_scaler", 0, 0xffffffffll));
  m.loss_scaler.scale = std::bit_cast<float>(bits);
  if (!std::isfinite(m.loss_scaler.scale) || !(m.loss_scaler.scale > 0.0f))
    corrupt("loss_scaler.scale is not a positive finite number");
  m.loss_scaler.good_steps =
      get_int(ls, "good_steps", "loss_scaler", 0, std::numeric_limits<int64_t>::max());
  m.loss_scaler.hysteresis_left =
      static_cast<int>(get_int(ls, "hysteresis_left", "loss_scaler", 0, 1 << 30));
}

// One shard file: name, rank, size, checksum and its [begin, numel] range per unit.
FileEntry parse_file(const json& j, const std::string& where, const Manifest& m,
                     std::set<std::string>& names) {
  FileEntry f;
  f.name = get_string(j, "name", where);
  if (!safe_file_name(f.name)) corrupt(fmt::format("{}: unsafe file name", where));
  if (f.name == kManifestName || !names.insert(f.name).second)
    corrupt(fmt::format("{}: duplicate file name \"{}\"", where, f.name));
  f.rank = static_cast<int>(get_int(j, "rank", where, 0, m.world_size - 1));
  f.size = get_int(j, "size", where, kShardFixedHeaderBytes, std::numeric_limits<int64_t>::max());
  f.xxh3 = parse_hex(get_string(j, "xxh3", where), where + ".xxh3");
  const json& ranges = get_array(j, "units", where);
  if (ranges.size() != m.units.size())
    corrupt(fmt::format("{}: {} unit ranges for {} units", where, ranges.size(), m.units.size()));
  for (size_t u = 0; u < ranges.size(); ++u) {
    const json& r = ranges[u];
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer() ||
        r[0].is_number_float() || r[1].is_number_float())
      corrupt(fmt::format("{}.units[{}] is not [begin, numel]", where, u));
    const int64_t bu = clamped_int(r[0]);
    const int64_t nu = clamped_int(r[1]);
    if (bu < 0 || nu < 0 || bu > kMaxElements || nu > kMaxElements ||
        bu + nu > m.units[u].padded_numel)
      corrupt(fmt::format("{}.units[{}] = [{}, {}] is outside the group of {} elements", where, u,
                          bu, nu, m.units[u].padded_numel));
    f.units.push_back({bu, nu});
  }
  return f;
}

}  // namespace

Manifest parse_manifest(std::string_view text) {
  json top = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (top.is_discarded()) corrupt("manifest is not valid JSON");
  Manifest m;
  const json& body = parse_envelope(top, m);
  m.step = get_int(body, "step", "body", 0, std::numeric_limits<int64_t>::max());
  m.world_size = static_cast<int>(get_int(body, "world_size", "body", 1, kMaxRank));
  m.stage = static_cast<int>(get_int(body, "stage", "body", 0, 3));
  m.optimizer = get_string(body, "optimizer", "body");
  if (m.optimizer != "adamw" && m.optimizer != "sgd" && m.optimizer != "muon")
    corrupt(fmt::format("unknown optimizer \"{}\"", m.optimizer));
  if (body.contains("optimizer_rules")) {
    m.optimizer_rules = get_string(body, "optimizer_rules", "body");
    if (m.optimizer_rules.empty() || m.optimizer_rules.size() > 4096)
      corrupt(fmt::format("body.optimizer_rules has {} bytes", m.optimizer_rules.size()));
  }
  if (body.contains("optimizer_states")) {
    m.optimizer_states = get_string(body, "optimizer_states", "body");
    // 16384: state_storage_name() with its most state_fp32 patterns (64 of 128 characters) fits.
    if (m.optimizer_states.empty() || m.optimizer_states.size() > 16384)
      corrupt(fmt::format("body.optimizer_states has {} bytes", m.optimizer_states.size()));
  }
  m.state_mask = static_cast<uint32_t>(get_int(body, "state_mask", "body", 1, kStateAll));
  if ((m.state_mask & kStateMaster) == 0) corrupt("state mask lacks the fp32 master");
  parse_model(field(body, "model", "body"), m);
  parse_loss_scaler(field(body, "loss_scaler", "body"), m);
  const json& ts = field(body, "trainer_state", "body");
  if (!ts.is_object()) corrupt("trainer_state is not a JSON object");
  m.trainer_state = ts.dump();
  if (body.contains("run_id")) {
    m.run_id = get_string(body, "run_id", "body");
    if (!valid_run_id(m.run_id)) corrupt(fmt::format("body.run_id '{}' is not a run id", m.run_id));
  }
  const json& files = get_array(body, "files", "body");
  if (files.empty() || static_cast<int64_t>(files.size()) > kMaxRank)
    corrupt(fmt::format("manifest lists {} files", files.size()));
  std::set<std::string> file_names;
  for (size_t fi = 0; fi < files.size(); ++fi) {
    m.files.push_back(parse_file(files[fi], fmt::format("files[{}]", fi), m, file_names));
  }
  check_coverage(m);
  return m;
}

}  // namespace zs::ckpt
