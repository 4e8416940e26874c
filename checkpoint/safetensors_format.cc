#include "checkpoint/safetensors_format.h"

#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace zs::safetensors {
namespace {

using nlohmann::json;

[[noreturn]] void corrupt(const std::string& what) { throw Error(ErrorCode::kCorruptData, what); }

uint64_t get_u64(const json& v, const std::string& where) {
  if (!v.is_number_integer()) corrupt(fmt::format("{} is not a non-negative integer", where));
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  const int64_t x = v.get<int64_t>();
  if (x < 0) corrupt(fmt::format("{} is negative", where));
  return static_cast<uint64_t>(x);
}

}  // namespace

size_t dtype_bytes(const std::string& d) {
  static const std::unordered_map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

uint64_t header_length(std::span<const std::byte> first8) {
  if (first8.size() < 8)
    corrupt(fmt::format("truncated: {} bytes, the header length needs 8", first8.size()));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint64_t>(first8[i]);
  if (n > kMaxHeaderBytes)
    corrupt(fmt::format("header length {} exceeds the {} allowed", n, kMaxHeaderBytes));
  return n;
}

Header parse_header(std::span<const std::byte> bytes, uint64_t data_bytes) {
  const char* p = reinterpret_cast<const char*>(bytes.data());
  const json j = json::parse(p, p + bytes.size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) corrupt("header is not valid JSON");
  if (!j.is_object()) corrupt("header is not a JSON object");
  Header h;
  h.header_bytes = bytes.size();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) corrupt("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          corrupt(fmt::format("__metadata__.{} is not a string", m.key()));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = fmt::format("tensor \"{}\"", name);
    if (!v.is_object()) corrupt(fmt::format("{} is not an object", where));
    TensorInfo t;
    t.name = name;
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) corrupt(fmt::format("{} has no dtype string", where));
    t.dtype = dt->get<std::string>();
    const size_t esize = dtype_bytes(t.dtype);
    if (esize == 0) corrupt(fmt::format("{} has unknown dtype \"{}\"", where, t.dtype));
    auto shape = v.find("shape");
    if (shape == v.end() || !shape->is_array())
      corrupt(fmt::format("{} has no shape array", where));
    if (shape->size() > 64) corrupt(fmt::format("{} has {} dimensions", where, shape->size()));
    uint64_t numel = 1;
    for (const json& d : *shape) {
      const uint64_t x = get_u64(d, where + " shape");
      if (x > (uint64_t{1} << 48) || (x != 0 && numel > (uint64_t{1} << 48) / x))
        corrupt(fmt::format("{} is too large", where));
      numel *= x;
      t.shape.push_back(static_cast<int64_t>(x));
    }
    auto offs = v.find("data_offsets");
    if (offs == v.end() || !offs->is_array() || offs->size() != 2)
      corrupt(fmt::format("{} has no data_offsets [begin, end]", where));
    t.begin = get_u64((*offs)[0], where + " data_offsets");
    t.end = get_u64((*offs)[1], where + " data_offsets");
    if (t.end < t.begin || t.end > data_bytes)
      corrupt(fmt::format("{}: data_offsets [{}, {}] outside the {} data bytes", where, t.begin,
                          t.end, data_bytes));
    if (t.end - t.begin != numel * esize)
      corrupt(fmt::format("{}: {} bytes for {} elements of {}", where, t.end - t.begin, numel,
                          t.dtype));
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const TensorInfo& t : h.tensors) {
    if (t.begin != pos)
      corrupt(fmt::format("tensor \"{}\" starts at {}, expected {} (overlap or hole)", t.name,
                          t.begin, pos));
    pos = t.end;
  }
  if (pos != data_bytes)
    corrupt(fmt::format("tensors end at byte {} of a {}-byte data part", pos, data_bytes));
  return h;
}

}  // namespace zs::safetensors
