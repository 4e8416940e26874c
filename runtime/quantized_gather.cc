#include "runtime/quantized_gather.h"

#include <algorithm>
#include <cmath>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/state_quant_kernels.h"

namespace zs {

namespace {

// Blocks are converted to fp32 in pieces of this many elements (a stack buffer: nothing is
// allocated inside a step).
constexpr int64_t kPiece = 256;

const StateCodeBook& book() { return state_code_book(kQuantizedWeightsCode, /*is_signed=*/true); }

const void* at(const void* p, int64_t e, DType dt) {
  return static_cast<const char*>(p) + e * static_cast<int64_t>(dtype_size(dt));
}
void* at(void* p, int64_t e, DType dt) {
  return static_cast<char*>(p) + e * static_cast<int64_t>(dtype_size(dt));
}

// The scale of block [b, b + n) of `x`: the pieces' scales combined (a NaN wins, else the max),
// which is state_block_scale of the whole block.
float block_scale(SimdLevel level, const void* x, DType dt, int64_t n) {
  float piece[kPiece];
  float scale = 0.0f;
  for (int64_t i = 0; i < n; i += kPiece) {
    const int64_t m = std::min(kPiece, n - i);
    convert(at(x, i, dt), dt, piece, DType::kF32, static_cast<size_t>(m));
    const float s = state_block_scale_at(level, piece, m);
    if (std::isnan(s) || std::isnan(scale)) {
      scale = std::nanf("");
    } else {
      scale = std::max(scale, s);
    }
  }
  return scale;
}

}  // namespace

QuantizedGatherLayout quantized_gather_layout(const GroupLayout& l, int64_t block) {
  ZS_CHECK(block > 0 && l.shard_numel % block == 0, ErrorCode::kInvalidArgument,
           "zero_quantized_weights_block {} does not divide the shard of {} elements (the "
           "alignment must be a multiple of the block)",
           block, l.shard_numel);
  QuantizedGatherLayout q;
  q.block = block;
  q.shard_numel = l.shard_numel;
  q.chunk_bytes = quantized_chunk_bytes(l.shard_numel, block);
  q.world = l.world;
  return q;
}

void encode_weight_chunk(const QuantizedGatherLayout& q, const void* shard, DType dt,
                         uint8_t* chunk) {
  const SimdLevel level = active_simd_level();
  float* scales = reinterpret_cast<float*>(chunk + q.shard_numel);
  float piece[kPiece];
  for (int64_t b = 0; b < q.shard_numel / q.block; ++b) {
    const void* x = at(shard, b * q.block, dt);
    const float scale = block_scale(level, x, dt, q.block);
    scales[b] = scale;
    for (int64_t i = 0; i < q.block; i += kPiece) {
      const int64_t m = std::min(kPiece, q.block - i);
      convert(at(x, i, dt), dt, piece, DType::kF32, static_cast<size_t>(m));
      encode_state_block(level, piece, scale, m, book(), chunk + b * q.block + i);
    }
  }
}

void decode_weight_chunks(const QuantizedGatherLayout& q, const uint8_t* chunks, DType dt,
                          void* out) {
  const SimdLevel level = active_simd_level();
  const int64_t blocks = q.shard_numel / q.block;
  float piece[kPiece];
  for (int r = 0; r < q.world; ++r) {
    const uint8_t* codes = chunks + r * q.chunk_bytes;
    const float* scales = reinterpret_cast<const float*>(codes + q.shard_numel);
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t i = 0; i < q.block; i += kPiece) {
        const int64_t m = std::min(kPiece, q.block - i);
        const int64_t e = b * q.block + i;  // element in this rank's shard
        decode_state_block(level, codes + e, scales[b], m, book(), piece);
        convert(piece, DType::kF32, at(out, r * q.shard_numel + e, dt), dt, static_cast<size_t>(m));
      }
    }
  }
}

GatherSlotLayout gather_slot_layout(const GroupLayout& l, const FrozenLayout& f, DType P,
                                    int64_t qwz_block) {
  auto round64 = [](int64_t b) { return (b + 63) / 64 * 64; };
  GatherSlotLayout s;
  const int64_t params = l.padded_numel * static_cast<int64_t>(dtype_size(P));
  s.frozen_offset = round64(params);
  s.bytes = f.empty() ? params : s.frozen_offset + f.bytes.padded_numel;
  if (qwz_block > 0 && l.padded_numel > 0) {
    s.quant_offset = round64(s.bytes);
    s.bytes = s.quant_offset + quantized_gather_layout(l, qwz_block).bytes();
  }
  return s;
}

}  // namespace zs
