// ZeRO++ qwZ ([Note: quantized weights] in runtime/engine_config.h): the int8 block codec of
// stage 3's parameter all-gather and the byte layout it puts on the wire and in a gather slot.
//
// Each rank sends one chunk: the codes of its compute-dtype shard (one byte per element, signed
// linear book j/127 of core/state_quant.h), then one fp32 absmax scale per block. The shard size
// is a multiple of the block (layout_align() folds the block into the alignment), so no block
// straddles two ranks and every chunk is chunk_bytes long:
//   chunk = [codes: shard_numel bytes][scales: 4 * shard_numel / block bytes]
// The gathered chunks (rank order) decode into the group's padded compute-dtype buffer. Padding
// elements are zero and decode to zero. Pure functions, thread-safe on disjoint buffers; bit for
// bit the same at every SIMD level (the kernels of core/state_quant_kernels.h).
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/state_quant.h"
#include "sharding/frozen_layout.h"
#include "sharding/layout.h"

namespace zs {

// The code book qwZ uses: signed linear, j / 127 (DeepSpeed's symmetric int8). Why not float8:
// [Note: quantized weights].
inline constexpr StateCode kQuantizedWeightsCode = StateCode::kLinear;

struct QuantizedGatherLayout {
  int64_t block = 0;        // elements per scale
  int64_t shard_numel = 0;  // elements per rank (a multiple of block)
  int64_t chunk_bytes = 0;  // shard_numel + 4 * shard_numel / block: what each rank sends
  int world = 1;
  int64_t bytes() const { return chunk_bytes * world; }  // the gathered chunks
};

// Bytes of one encoded chunk of `numel` elements (a multiple of block): the int8 codes, then one
// fp32 scale per block. qgZ's chunks (runtime/quantized_reduce.h) are the same.
inline int64_t quantized_chunk_bytes(int64_t numel, int64_t block) {
  return numel + 4 * (numel / block);
}

// The chunk layout of group `l` with blocks of `block` elements. Throws zs::Error(kInvalidArgument)
// naming zero_quantized_weights_block when the block does not divide the shard size.
QuantizedGatherLayout quantized_gather_layout(const GroupLayout& l, int64_t block);

// Encodes n = q.shard_numel elements of `shard` (dtype `dt`: fp32, bf16 or fp16) into one chunk.
void encode_weight_chunk(const QuantizedGatherLayout& q, const void* shard, DType dt,
                         uint8_t* chunk);

// Decodes q.world chunks (rank order) into q.world * q.shard_numel elements of `out` (dtype dt):
// out[i] = dt(value[code] * scale), rounded once to dt.
void decode_weight_chunks(const QuantizedGatherLayout& q, const uint8_t* chunks, DType dt,
                          void* out);

// Where one unit's gather slot (stage 3) puts what: the gathered compute-dtype parameters at 0
// (P * padded_numel bytes), the frozen byte group at frozen_offset (round64 of that), and with
// qwZ the gathered chunks at quant_offset (round64 of the end of the frozen bytes, or of the
// parameters without frozen ones). The buffer plan sizes slots by it, the group addresses them.
struct GatherSlotLayout {
  int64_t frozen_offset = 0;
  int64_t quant_offset = 0;
  int64_t bytes = 0;  // the whole slot this unit needs
};
// `qwz_block` 0: no quantized gather.
GatherSlotLayout gather_slot_layout(const GroupLayout& l, const FrozenLayout& f, DType P,
                                    int64_t qwz_block);

}  // namespace zs
