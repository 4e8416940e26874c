#include "runtime/quantized_reduce.h"

#include <algorithm>

#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/state_quant_kernels.h"
#include "runtime/quantized_gather.h"

namespace zs {

namespace {

// Elements decoded and summed at a time (stack buffers: nothing is allocated inside a step).
constexpr int64_t kPiece = 256;

int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }

const StateCodeBook& book() { return state_code_book(kQuantizedWeightsCode, /*is_signed=*/true); }

// The chunk codec is qwZ's, one chunk at a time.
QuantizedGatherLayout chunk_layout(const QuantizedReduceLayout& q) {
  return {q.block, q.shard_numel, q.chunk_bytes, 1};
}

// out[0..c) (dtype dt) = sum over j = 0..count-1, in that order, of the decoded chunk at
// first + j * stride, summed in fp32 and rounded once to dt.
void sum_decoded(const QuantizedReduceLayout& q, const uint8_t* first, int64_t stride, int count,
                 DType dt, void* out) {
  const SimdLevel level = active_simd_level();
  const int64_t piece_len = std::min(kPiece, q.block);  // divides the block: no straddling
  float acc[kPiece], piece[kPiece];
  for (int64_t e = 0; e < q.shard_numel; e += piece_len) {
    for (int j = 0; j < count; ++j) {
      const uint8_t* chunk = first + j * stride;
      const float* scales = reinterpret_cast<const float*>(chunk + q.shard_numel);
      decode_state_block(level, chunk + e, scales[e / q.block], piece_len, book(),
                         j == 0 ? acc : piece);
      if (j > 0) {
        for (int64_t i = 0; i < piece_len; ++i) acc[i] += piece[i];
      }
    }
    convert(acc, DType::kF32, static_cast<char*>(out) + e * static_cast<int64_t>(dtype_size(dt)),
            dt, static_cast<size_t>(piece_len));
  }
}

// Step 1: the N partial shards of this rank's local rank, fp32, into the lane's partial region.
void reduce_within_node(const QuantizedReduceLayout& q, const float* grad, uint8_t* lane,
                        Communicator& node_local) {
  const int64_t c = q.shard_numel;
  const QuantizedGatherLayout g = chunk_layout(q);
  for (int lp = 0; lp < q.local; ++lp) {
    for (int k = 0; k < q.nodes; ++k) {
      encode_weight_chunk(g, grad + (int64_t{k} * q.local + lp) * c, DType::kF32,
                          lane + (int64_t{lp} * q.nodes + k) * q.chunk_bytes);
    }
  }
  uint8_t* recv = lane + q.recv_offset;
  node_local.all_to_all(lane, recv, static_cast<size_t>(q.nodes * q.chunk_bytes), DType::kU8);
  float* partials = reinterpret_cast<float*>(lane + q.partial_offset);
  for (int k = 0; k < q.nodes; ++k) {
    sum_decoded(q, recv + int64_t{k} * q.chunk_bytes, q.nodes * q.chunk_bytes, q.local, DType::kF32,
                partials + k * c);
  }
}

// Step 2 in flight: waiting completes the cross-node all-to-all, then sums into `out`.
class QuantizedReduceWork final : public Work {
 public:
  QuantizedReduceWork(const QuantizedReduceLayout& q, const uint8_t* recv, DType dt, void* out,
                      WorkHandle cross)
      : q_(q), recv_(recv), dt_(dt), out_(out), cross_(std::move(cross)) {}
  ~QuantizedReduceWork() override { cross_.reset(); }  // waits; writes nothing
  void wait() override {
    if (done_) return;
    if (cross_) cross_->wait();
    done_ = true;
    sum_decoded(q_, recv_, q_.chunk_bytes, q_.nodes, dt_, out_);
  }
  bool test() override {
    if (done_) return true;
    if (cross_ && !cross_->test()) return false;
    wait();
    return true;
  }

 private:
  QuantizedReduceLayout q_;
  const uint8_t* recv_;
  DType dt_;
  void* out_;
  WorkHandle cross_;
  bool done_ = false;
};

}  // namespace

QuantizedReduceLayout quantized_reduce_layout(const GroupLayout& l, int node_size, int64_t block) {
  ZS_CHECK(node_size >= 1 && l.world % node_size == 0, ErrorCode::kInvalidArgument,
           "node_size {} does not divide the world of {} ranks (zero_quantized_gradients)",
           node_size, l.world);
  ZS_CHECK(block > 0 && l.shard_numel % block == 0, ErrorCode::kInvalidArgument,
           "zero_quantized_gradients_block {} does not divide the shard of {} elements (the "
           "alignment must be a multiple of the block)",
           block, l.shard_numel);
  QuantizedReduceLayout q;
  q.block = block;
  q.shard_numel = l.shard_numel;
  q.chunk_bytes = quantized_chunk_bytes(l.shard_numel, block);
  q.local = node_size;
  q.nodes = l.world / node_size;
  if (l.world == 1 || l.shard_numel == 0) return q;
  q.wire_chunks = q.local > 1 ? l.world : q.nodes;
  q.recv_offset = round64(q.wire_chunks * q.chunk_bytes);
  q.partial_offset = 2 * q.recv_offset;
  q.bytes = q.partial_offset + (q.local > 1 ? 4 * q.nodes * q.shard_numel : 0);
  return q;
}

WorkHandle start_quantized_reduce(const QuantizedReduceLayout& q, const float* grad, uint8_t* lane,
                                  Communicator& node_local, Communicator& cross_node, DType dt,
                                  void* out) {
  ZS_CHECK(node_local.size() == q.local && cross_node.size() == q.nodes,
           ErrorCode::kInvalidArgument,
           "quantized reduce: communicators of {} (node-local) and {} (cross-node) ranks for a "
           "layout of {} nodes of {} ranks",
           node_local.size(), cross_node.size(), q.nodes, q.local);
  const int64_t c = q.shard_numel;
  if (c == 0) return std::make_unique<DoneWork>();
  const float* partials = grad;  // L == 1: the rank's own shards k' * L + l, in node order
  if (q.local > 1) {
    reduce_within_node(q, grad, lane, node_local);
    partials = reinterpret_cast<const float*>(lane + q.partial_offset);
  }
  if (q.nodes == 1) {
    convert(partials, DType::kF32, out, dt, static_cast<size_t>(c));  // the one partial
    return std::make_unique<DoneWork>();
  }
  const QuantizedGatherLayout g = chunk_layout(q);
  for (int k = 0; k < q.nodes; ++k) {
    encode_weight_chunk(g, partials + int64_t{k} * c, DType::kF32, lane + k * q.chunk_bytes);
  }
  uint8_t* recv = lane + q.recv_offset;
  WorkHandle cross =
      cross_node.start_all_to_all(lane, recv, static_cast<size_t>(q.chunk_bytes), DType::kU8);
  return std::make_unique<QuantizedReduceWork>(q, recv, dt, out, std::move(cross));
}

}  // namespace zs
