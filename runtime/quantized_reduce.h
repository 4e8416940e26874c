// ZeRO++ qgZ: the int8 block-quantized, hierarchical gradient reduce-scatter of stages 2 and 3
// (DeepSpeed's zero_optimization.zeropp.quantized_gradients), over a node-local and a cross-node
// communicator. docs/engine.md "ZeRO++ qgZ" has the bytes and the error bound.
//
// [Note: quantized gradients]
// A group's padded fp32 gradient has n elements; W = N*L ranks (N nodes of L ranks, block
// placement: rank (k, l) is world rank k*L + l and owns shard w = k*L + l of c = n / W elements,
// a multiple of the block B). A chunk is qwZ's (runtime/quantized_gather.h; [Note: quantized
// weights] in runtime/engine_config.h): c int8 codes of the signed linear book j/127, then c / B
// fp32 absmax scales. The order is part of the contract (the same bits on every run):
// 1. Within the node (node-local communicator, L ranks), synchronous: encode, for each local peer
//    l' in order and each node k' in order, the chunk of shard k'*L + l'; all-to-all (N chunks
//    per peer); decode what arrived and sum in fp32 over the local ranks in local-rank order:
//    N partial shards, partial k' for shard k'*L + l. L == 1: no step 1, no quantization: the
//    partials are the rank's own fp32 shards.
// 2. Across nodes (cross-node communicator, N ranks): encode the N partials (node order), post
//    the all-to-all non-blocking (node k' gets the partial of its shard); when waited for, decode
//    and sum in fp32 over the nodes in node order and round once to the gradient dtype into the
//    destination. N == 1: no step 2: the partial is rounded.
// Each element is thus quantized at most twice. Non-finite values stay non-finite: a block with
// an inf or NaN gets a NaN scale (core/state_quant.h) and decodes to NaN in every element, so
// the sums, the partial's next block scale and the result are NaN (the engine skips the step,
// the fp16 loss scaler backs off).
// Per-element error against the exact sum, before the final rounding: at most
//   sum_k ( sum_l A(k, l) / 254 + A'(k) / 254 )
// where A(k, l) is the absmax of rank (k, l)'s block of the element and A'(k) that of node k's
// partial (half the code step 1/127, as a fraction of the absmax), plus fp32 summation rounding.
#pragma once

#include <cstdint>

#include "collectives/communicator.h"
#include "core/dtype.h"
#include "sharding/layout.h"

namespace zs {

// Where one reduction's buffers are in a lane's qgZ buffer (bytes, 64-byte aligned), and the
// chunks on the wire. wire_chunks = W when L > 1 (step 1 sends W chunks), else N; step 2 reuses
// step 1's send and receive regions.
struct QuantizedReduceLayout {
  int64_t block = 0;        // elements per scale
  int64_t shard_numel = 0;  // c, a multiple of block
  int64_t chunk_bytes = 0;  // c + 4 * c / block
  int nodes = 1;            // N
  int local = 1;            // L
  int64_t wire_chunks = 0;  // chunks in each of the send and receive regions
  int64_t recv_offset = 0;
  int64_t partial_offset = 0;  // N partial shards, fp32 (L > 1 only)
  int64_t bytes = 0;           // the whole lane buffer (0 when W == 1)
  // Bytes this rank sends (= receives) per reduction: within the node (L-1)*N*chunk_bytes, across
  // nodes (N-1)*chunk_bytes; what the communicators' all-to-all counters record.
  int64_t intra_bytes() const { return local > 1 ? int64_t{local - 1} * nodes * chunk_bytes : 0; }
  int64_t cross_bytes() const { return int64_t{nodes - 1} * chunk_bytes; }
};

// The layout of group `l` (world l.world = N * node_size ranks) with blocks of `block` elements.
// Throws zs::Error(kInvalidArgument) naming zero_quantized_gradients_block when the block does
// not divide the shard, or node_size when it does not divide the world.
QuantizedReduceLayout quantized_reduce_layout(const GroupLayout& l, int node_size, int64_t block);

// Starts the reduction of `grad` (fp32, the group's N*L*c padded elements, as the unit wrote
// them): step 1 runs now over `node_local` (size L), step 2 is posted over `cross_node` (size N).
// The returned Work's wait() completes step 2 and writes this rank's c reduced elements, dtype
// `dt`, to `out`. `grad` is read only until this returns; `lane` (q.bytes bytes, 64-byte aligned)
// must stay untouched until the Work is finished. Destroying an unfinished Work waits for the
// communication and writes nothing. Collective over both communicators.
WorkHandle start_quantized_reduce(const QuantizedReduceLayout& q, const float* grad, uint8_t* lane,
                                  Communicator& node_local, Communicator& cross_node, DType dt,
                                  void* out);

}  // namespace zs
