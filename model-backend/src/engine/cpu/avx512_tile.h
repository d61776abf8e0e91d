// What the register-tiled matrix products of the AVX-512 kernel files
// (kernels_avx512*.cc) share beyond tile_common.h: the sums of a tile's accumulators.
// Include only from files compiled with the AVX-512 -m flags (engine CMakeLists.txt);
// internal linkage throughout.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/avx512_loads.h"
#include "cpu/tile_common.h"

namespace sinew::model::cpu {
namespace {

// The sums of the 16 lanes of four accumulators, in lanes 0-3. Each is added in
// exactly the pairing of _mm512_reduce_add_ps (GCC: halves, then quarters, then lanes
// two apart, then neighbours; float addition commutes), so the results are bit for bit
// those of reducing each accumulator alone, in about a third of the instructions.
SINEW_ALWAYS_INLINE __m128 ReduceAdd4(__m512 a, __m512 b, __m512 c, __m512 d) {
  // Halves: [a.q0 + a.q2, a.q1 + a.q3, b.q0 + b.q2, b.q1 + b.q3] (q: 128-bit quarters).
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
  // Quarters: quarter k holds accumulator k's four partial sums.
  const __m512 u = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 x = _mm512_add_ps(u, _mm512_permute_ps(u, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 y = _mm512_add_ps(x, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0), y));
}

// out[c * os + r] = the sum of acc[r][c]'s lanes, for R, C <= 4.
template <int R, int C>
SINEW_ALWAYS_INLINE void StoreTileSums(const __m512 (&acc)[R][C], float* out, int64_t os) {
  static_assert(R >= 1 && R <= 4 && C >= 1 && C <= 4);
  SINEW_UNROLL
  for (int c = 0; c < C; ++c) {
    __m512 v[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) v[r] = acc[r][c];
    _mm_mask_storeu_ps(out + c * os, static_cast<__mmask8>((1u << R) - 1),
                       ReduceAdd4(v[0], v[1], v[2], v[3]));
  }
}

}  // namespace
}  // namespace sinew::model::cpu
