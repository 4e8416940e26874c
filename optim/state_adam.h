// AdamW with low-precision moments: m and v stored as bf16, or as 8-bit block-quantized codes
// (core/state_quant.h), updated in one fused pass that reads grad, master p and the states and
// writes p, the states and the compute-dtype copy `out`.
//
// The arithmetic is [Note: AdamW operation order] (optim/adamw.h) in fp32 on the moments read as
// fp32:
//   bf16 states: m, v = bf16 -> fp32 (exact); AdamW; m, v stored rounded to nearest even
//                (core/convert.h's fp32_to_bf16_bits).
//   int8 states: per block of `block` elements (the last may be short): m, v = value[code] *
//                scale (one fp32 product); AdamW on the block's elements with those fp32 moments;
//                the new m and v re-encoded by quantize_state_blockwise's rule (new absmax scale
//                per block; m in the signed book, v in the unsigned one of `code`).
// The *_reference functions are the definitions (plain loops over the scalar reference and the
// definition of the code books). The cpu_* functions are the fast paths, chosen per ISA at run time
// like optim/cpu_adam.h (AVX-512, AVX2, scalar; ZS_MAX_ISA caps) and split over OpenMP threads at
// block boundaries (int8) or multiples of 64 (bf16): they give the reference's bits on every
// path, for every thread count (tests/optim/state_adam_test.cc).
//
// Common contract: grad of grad_dtype (fp32, bf16, fp16); out (may be null) of out_dtype (fp32,
// bf16, fp16), and may alias p when out_dtype is fp32; no other overlap. n >= 0. A span starts at
// a block boundary of the state (for int8, codes[0] and scales[0] are the span's first block).
// Errors: zs::Error(kInvalidArgument) naming the value for other dtypes, n < 0, or a block that is
// not a positive multiple of 64. Thread-safety: concurrent calls on disjoint spans are safe.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/state_quant.h"
#include "optim/adamw.h"

namespace zs::optim {

// How AdamW's moments are stored.
enum class StateDType : uint8_t { kF32, kBF16, kI8 };

// "fp32", "bf16", "int8".
const char* state_dtype_name(StateDType dtype);

// One 8-bit moment of n elements: codes [n], scales [state_num_blocks(n, block)].
struct QuantizedMoment {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
};

// The layout of int8 states: block size and code-book family ([Note: state code book choice]).
struct Int8StateFormat {
  int64_t block = 256;
  StateCode code = StateCode::kDynamic;
};

// Bytes of one int8 moment of n elements: n codes plus 4 per block.
int64_t int8_moment_bytes(int64_t n, int64_t block);

// The definitions (see above); m and v are bf16 bits.
void adamw_bf16_states_reference(float* p, const void* grad, DType grad_dtype, uint16_t* m,
                                 uint16_t* v, int64_t n, const AdamWStep& s, void* out,
                                 DType out_dtype);
void adamw_int8_states_reference(float* p, const void* grad, DType grad_dtype, QuantizedMoment m,
                                 QuantizedMoment v, int64_t n, const Int8StateFormat& format,
                                 const AdamWStep& s, void* out, DType out_dtype);

// The fast paths: the references' bits, threads from set_cpu_adam_threads() (optim/cpu_adam.h).
// Return false when an updated p, or its out value, is an inf or NaN (as cpu_adamw: each tile is
// read right after it is written).
bool cpu_adamw_bf16_states(float* p, const void* grad, DType grad_dtype, uint16_t* m, uint16_t* v,
                           int64_t n, const AdamWStep& s, void* out, DType out_dtype);
bool cpu_adamw_int8_states(float* p, const void* grad, DType grad_dtype, QuantizedMoment m,
                           QuantizedMoment v, int64_t n, const Int8StateFormat& format,
                           const AdamWStep& s, void* out, DType out_dtype);

}  // namespace zs::optim
