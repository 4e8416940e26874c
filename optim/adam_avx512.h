// AdamW on one AVX-512 vector of 16 elements: [Note: AdamW operation order] (optim/adamw.h) with
// correctly rounded mul/add/sub/div/sqrt only (the project's -ffp-contract=off keeps them unfused),
// so every caller gives adamw_reference's bits. Shared by cpu_adam.cc's kernel and the fused
// low-bit-state kernel (state_adam_avx512.cc). Internal; x86-64 GCC/Clang only; callers must carry
// the AVX-512 target.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC bug 105593 in the headers
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "optim/adamw.h"

#define ZS_ADAM_AVX512 [[gnu::target("avx512f,avx2,f16c")]]

namespace zs::optim::adam_avx512 {

// AdamWStep's scalars broadcast.
struct Consts {
  __m512 gs, decay, b1, omb1, b2, omb2, step, b2s, eps;
};

[[gnu::always_inline]] ZS_ADAM_AVX512 inline Consts make_consts(const AdamWStep& s) {
  return {_mm512_set1_ps(s.grad_scale), _mm512_set1_ps(s.decay),
          _mm512_set1_ps(s.beta1),      _mm512_set1_ps(s.one_minus_beta1),
          _mm512_set1_ps(s.beta2),      _mm512_set1_ps(s.one_minus_beta2),
          _mm512_set1_ps(s.step_size),  _mm512_set1_ps(s.bias2_sqrt),
          _mm512_set1_ps(s.eps)};
}

// One update: g is the raw gradient as fp32; p, m, v are read and written.
[[gnu::always_inline]] ZS_ADAM_AVX512 inline void update(const Consts& c, __m512 g, __m512& p,
                                                         __m512& m, __m512& v) {
  g = _mm512_mul_ps(g, c.gs);
  p = _mm512_mul_ps(p, c.decay);
  m = _mm512_add_ps(_mm512_mul_ps(m, c.b1), _mm512_mul_ps(g, c.omb1));
  v = _mm512_add_ps(_mm512_mul_ps(v, c.b2), _mm512_mul_ps(_mm512_mul_ps(g, g), c.omb2));
  const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(v), c.b2s), c.eps);
  p = _mm512_sub_ps(p, _mm512_mul_ps(c.step, _mm512_div_ps(m, den)));
}

}  // namespace zs::optim::adam_avx512

#endif
