#include "runtime/state_storage.h"

#include <algorithm>
#include <cstring>

#include "core/convert.h"
#include "core/error.h"
#include "core/state_quant.h"
#include "optim/cpu_adam.h"

namespace zs {

namespace {

using optim::StateDType;

uint16_t* bf16_at(const MomentStore& m, int64_t i) { return static_cast<uint16_t*>(m.narrow) + i; }
uint8_t* codes_at(const MomentStore& m, int64_t i) { return static_cast<uint8_t*>(m.narrow) + i; }

optim::QuantizedMoment quantized(const MomentStore& m, const StateSegment& ss) {
  return {codes_at(m, ss.offset), m.scales + ss.block};
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// [Note: decoded state round trip] Claim: for a block (codes c, scale A) that the int8 rule
// produced, re-encoding its decoding x_i = value[c_i] * A gives codes whose decoding is x again,
// bit for bit. Proof: A = 0 gives x = 0 and back scale 0, codes 0. A = NaN gives x = NaN and back
// a NaN scale (the same quiet NaN), codes 0. Otherwise the block's absmax element has |r| = 1,
// so its code's magnitude is 1 and it decodes to A exactly, while every other |x_i| =
// fl(|value| * A) <= A (rounding is monotone): the new scale (the absmax, compared as bits) is A.
// Element by element, the code of x_i / A decodes to x_i unless the product value * A lost bits
// (a subnormal result); then a code that decodes to x_i exists (c_i does) and the search below
// takes one. The codes may differ from c (two codes whose products both underflow to the same
// value), but the update reads only the decoded fp32 moments, so the next step's bits are the
// same as without the round trip. A checkpoint of decoded moments therefore resumes bitwise.
void encode_int8_block(const float* x, int64_t len, int64_t block, const StateCodeBook& book,
                       uint8_t* codes, float* scale) {
  bool same = true;
  for (int64_t i = 0; i < len && same; ++i)
    same = bits_of(book.value[codes[i]] * *scale) == bits_of(x[i]);
  if (same) return;
  quantize_state_blockwise(x, len, block, book, codes, scale);
  for (int64_t i = 0; i < len; ++i) {
    if (bits_of(book.value[codes[i]] * *scale) == bits_of(x[i])) continue;
    for (int c = 0; c < 256; ++c) {
      if (bits_of(book.value[c] * *scale) == bits_of(x[i])) {
        codes[i] = static_cast<uint8_t>(c);
        break;
      }
    }
  }
}

// Elements [a, b) of segment k's moment `mom` to fp32 (x: element a) or back (encode). int8: a
// is a multiple of the block and b one too or the segment's end (moment_cut's positions).
void code_segment(const StateStorage& st, const StateSegment& ss, int64_t a, int64_t b,
                  const MomentStore& mom, bool is_m, float* x, bool encode) {
  const int64_t len = b - a;
  switch (ss.dtype) {
    case StateDType::kF32:
      if (encode) {
        std::memcpy(mom.f32 + ss.offset + a, x, static_cast<size_t>(len) * 4);
      } else {
        std::memcpy(x, mom.f32 + ss.offset + a, static_cast<size_t>(len) * 4);
      }
      return;
    case StateDType::kBF16:
      if (encode) {
        convert(x, DType::kF32, bf16_at(mom, ss.offset + a), DType::kBF16,
                static_cast<size_t>(len));
      } else {
        convert(bf16_at(mom, ss.offset + a), DType::kBF16, x, DType::kF32,
                static_cast<size_t>(len));
      }
      return;
    case StateDType::kI8: {
      ZS_ASSERT(a % st.block == 0);
      const StateCodeBook& book = state_code_book(st.code, is_m);
      const optim::QuantizedMoment q = quantized(mom, ss);
      const int64_t b0 = a / st.block;
      if (!encode) {
        dequantize_state_blockwise(q.codes + a, q.scales + b0, len, st.block, book, x);
        return;
      }
      for (int64_t i = 0; i < len; i += st.block) {
        encode_int8_block(x + i, std::min(st.block, len - i), st.block, book, q.codes + a + i,
                          q.scales + b0 + i / st.block);
      }
      return;
    }
  }
}

// Shard elements [lo, lo + n) of both moments (m, v: element lo) to fp32 or back.
void code_moments(const NarrowMoments& s, int64_t lo, int64_t n, float* m, float* v, bool encode) {
  for (size_t k = 0; k < s.segments->size(); ++k) {
    const ShardSegment& seg = (*s.segments)[k];
    const int64_t a = std::max(lo, seg.shard_offset);
    const int64_t b = std::min(lo + n, seg.shard_offset + seg.length);
    if (a >= b) continue;
    const StateSegment& ss = s.storage->segments[k];
    const int64_t ra = a - seg.shard_offset, rb = b - seg.shard_offset;
    ZS_CHECK(ss.dtype != StateDType::kI8 ||
                 (ra % s.storage->block == 0 && (rb % s.storage->block == 0 || rb == seg.length)),
             ErrorCode::kInvalidArgument,
             "moments [{}, {}): cuts an int8 block of segment {} (block {}; use moment_cut)", lo,
             lo + n, k, s.storage->block);
    code_segment(*s.storage, ss, ra, rb, s.m, true, m + (a - lo), encode);
    code_segment(*s.storage, ss, ra, rb, s.v, false, v + (a - lo), encode);
  }
}

}  // namespace

optim::StateDType state_dtype_of(const OptimizerConfig& c, const std::string& unit,
                                 const ParamSpec& p) {
  return param_state_dtype(c, unit + "." + p.name, p.numel());
}

std::vector<ShardSegment> master_segments(const GroupLayout& l, bool whole, int rank) {
  if (!whole) return l.shard_segments(rank);
  std::vector<ShardSegment> out;
  for (size_t p = 0; p < l.params.size(); ++p)
    out.push_back({static_cast<int>(p), l.params[p].offset, 0, l.params[p].numel});
  return out;
}

int64_t StateStorage::moment_bytes() const {
  if (!narrow()) return 0;
  const int64_t per = dtype == StateDType::kBF16 ? 2 : 1;
  return 4 * f32_numel + 4 * blocks + per * narrow_numel;
}

StateStorage plan_state_storage(const GroupLayout& l, const std::vector<ShardSegment>& segs,
                                const OptimizerConfig& c, const std::vector<std::string>& names) {
  StateStorage st;
  if (c.kind != OptimizerKind::kAdamW || c.state_dtype == StateDType::kF32) return st;
  ZS_CHECK(names.size() == l.params.size() || (names.empty() && c.state_fp32.empty()),
           ErrorCode::kInvalidArgument, "{} parameter names for a group of {} parameters",
           names.size(), l.params.size());
  st.dtype = c.state_dtype;
  st.block = c.state_block;
  st.code = c.state_code;
  for (const ShardSegment& seg : segs) {
    StateSegment ss;
    const auto p = static_cast<size_t>(seg.param);
    ss.dtype =
        param_state_dtype(c, names.empty() ? std::string_view() : names[p], l.params[p].numel);
    if (ss.dtype == StateDType::kF32) {
      ss.offset = st.f32_numel;
      st.f32_numel += seg.length;
    } else {
      ss.offset = st.narrow_numel;
      st.narrow_numel += seg.length;
    }
    if (ss.dtype == StateDType::kI8) {
      // [Note: optimizer state storage]: segments start on block boundaries of their parameter.
      ZS_ASSERT(seg.param_offset % st.block == 0);
      ss.block = st.blocks;
      st.blocks += state_num_blocks(seg.length, st.block);
    }
    st.segments.push_back(ss);
  }
  return st;
}

int64_t moment_capacity(const GroupLayout& l, bool whole, const OptimizerConfig& c,
                        const std::vector<std::string>& names) {
  int64_t most = 0;
  for (int r = 0; r < (whole ? 1 : l.world); ++r) {
    const StateStorage st = plan_state_storage(l, master_segments(l, whole, r), c, names);
    most = std::max(most, st.moment_bytes());
  }
  return most;
}

MomentStore carve_moment(const StateStorage& st, void* base) {
  MomentStore m;
  if (base == nullptr) return m;
  char* b = static_cast<char*>(base);
  m.f32 = reinterpret_cast<float*>(b);
  m.scales = reinterpret_cast<float*>(b + 4 * st.f32_numel);
  m.narrow = b + 4 * st.f32_numel + 4 * st.blocks;
  return m;
}

bool adamw_segment(const NarrowMoments& s, size_t k, float* master, const void* grad,
                   DType grad_dtype, void* out, DType out_dtype, const optim::AdamWStep& step) {
  const ShardSegment& seg = (*s.segments)[k];
  const StateSegment& ss = s.storage->segments[k];
  const int64_t o = seg.shard_offset, n = seg.length;
  float* p = master + o;
  const void* g = element_at(grad, o, grad_dtype);
  void* dst = out ? element_at(out, o, out_dtype) : nullptr;
  switch (ss.dtype) {
    case StateDType::kF32:
      return optim::cpu_adamw(p, g, grad_dtype, s.m.f32 + ss.offset, s.v.f32 + ss.offset, n, step,
                              dst, out_dtype);
    case StateDType::kBF16:
      return optim::cpu_adamw_bf16_states(p, g, grad_dtype, bf16_at(s.m, ss.offset),
                                          bf16_at(s.v, ss.offset), n, step, dst, out_dtype);
    case StateDType::kI8:
      return optim::cpu_adamw_int8_states(
          p, g, grad_dtype, quantized(s.m, ss), quantized(s.v, ss), n,
          optim::Int8StateFormat{s.storage->block, s.storage->code}, step, dst, out_dtype);
  }
  return true;
}

void decode_moments(const NarrowMoments& s, int64_t lo, int64_t n, float* m_out, float* v_out) {
  code_moments(s, lo, n, m_out, v_out, false);
}

void encode_moments(const NarrowMoments& s, int64_t lo, int64_t n, const float* m_in,
                    const float* v_in) {
  code_moments(s, lo, n, const_cast<float*>(m_in), const_cast<float*>(v_in), true);
}

int64_t moment_cut(const NarrowMoments& s, int64_t pos) {
  if (s.storage->dtype != StateDType::kI8) return pos;
  for (size_t k = 0; k < s.segments->size(); ++k) {
    const ShardSegment& seg = (*s.segments)[k];
    if (s.storage->segments[k].dtype != StateDType::kI8) continue;
    if (pos <= seg.shard_offset || pos >= seg.shard_offset + seg.length) continue;
    const int64_t block = s.storage->block;
    return seg.shard_offset + (pos - seg.shard_offset) / block * block;
  }
  return pos;
}

}  // namespace zs
