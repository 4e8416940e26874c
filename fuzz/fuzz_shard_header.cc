// libFuzzer: the shard-file header parser must reject any input with zs::Error, never crash, leak
// or trip a sanitizer; an accepted header serialises back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "checkpoint/checkpoint_format.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  zs::ckpt::ShardHeader h;
  try {
    h = zs::ckpt::parse_shard_header(bytes);
  } catch (const zs::Error&) {
    return 0;
  }
  const std::vector<std::byte> out = zs::ckpt::serialize_shard_header(h);
  if (out.size() > size || std::memcmp(out.data(), data, out.size()) != 0) std::abort();
  // Offsets of the last element of every unit and state stay inside the file.
  const int states = zs::ckpt::state_count(h.state_mask);
  for (size_t u = 0; u < h.units.size(); ++u) {
    for (int s = 0; s < states; ++s) {
      const int64_t end = h.offset_of(u, s, h.units[u].begin + h.units[u].numel);
      if (end > h.file_bytes() || end < h.header_bytes()) std::abort();
    }
  }
  return 0;
}
