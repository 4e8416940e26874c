// libFuzzer: the checkpoint manifest parser must reject any input with zs::Error, never crash,
// leak or trip a sanitizer; what it accepts must serialise and parse back to the same manifest.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "checkpoint/checkpoint_format.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zs::ckpt::Manifest m;
  try {
    m = zs::ckpt::parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const zs::Error&) {
    return 0;
  }
  const std::string again = zs::ckpt::serialize_manifest(m);
  const zs::ckpt::Manifest m2 = zs::ckpt::parse_manifest(again);  // must not throw
  if (zs::ckpt::serialize_manifest(m2) != again) std::abort();
  return 0;
}
