// libFuzzer: the safetensors header parser (length prefix + JSON) must reject any input with
// zs::Error, never crash, leak or trip a sanitizer. The input is a whole file: 8-byte length,
// header, data.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "checkpoint/safetensors_format.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = zs::safetensors;
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  try {
    const uint64_t n = st::header_length(bytes.first(std::min<size_t>(8, size)));
    if (8 + n > size) return 0;
    const st::Header h = st::parse_header(bytes.subspan(8, n), size - 8 - n);
    uint64_t end = 0;
    for (const st::TensorInfo& t : h.tensors) {
      if (t.begin != end || t.end < t.begin) std::abort();  // tiling was checked
      end = t.end;
    }
    if (end != size - 8 - n) std::abort();
  } catch (const zs::Error&) {
  }
  return 0;
}
