// What the AVX2 register-tiled matrix products (kernels_avx2_tiles.cc,
// kernels_avx2_kquants.cc) share beyond tile_common.h: the split of a tile into
// passes that fit 16 YMM registers, and the sum of an accumulator's lanes. Include
// only from files compiled with the AVX2 -m flags (engine CMakeLists.txt); internal
// linkage throughout.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "cpu/tile_common.h"

namespace sinew::model::cpu {
namespace {

// The sum of the 8 lanes of an accumulator, always in one pairing (halves, then lanes
// two apart, then neighbours).
SINEW_ALWAYS_INLINE float Hsum8(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 sh = _mm_movehdup_ps(lo);
  lo = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, lo);
  return _mm_cvtss_f32(_mm_add_ss(lo, sh));
}

// A weight format's tile as passes of at most F::PassRows(C) weight rows, each with all
// C activation rows, so that a pass's accumulators fit 16 YMM registers:
// F::Pass<Rows, C>(n, w, ws, x, xs, prefetch_from, out, os) computes
// out[c * os + r] for Rows weight rows from w and prefetches its own rows of the tile
// kPrefetchTiles ahead (prefetch_from). Each weight row lies in exactly one pass, so it
// is unpacked once per tile; a pass gives every element the same arithmetic whatever
// Rows and C, so which pass an element falls in does not change it.
template <typename F, int Rows, int C, int P>
SINEW_ALWAYS_INLINE void PassesFrom(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x,
                                    int64_t xs, int64_t ahead, float* out, int64_t os) {
  if constexpr (Rows <= P) {
    F::template Pass<Rows, C>(n, w, ws, x, xs, w + ahead, out, os);
  } else {
    F::template Pass<P, C>(n, w, ws, x, xs, w + ahead, out, os);
    PassesFrom<F, Rows - P, C, P>(n, w + P * ws, ws, x, xs, ahead, out + P, os);
  }
}

// The tile of format F as DispatchTile takes it.
template <typename F>
struct TileOf {
  template <int R, int C>
  struct Kernel {
    static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                    float* out, int64_t os) {
      PassesFrom<F, R, C, F::PassRows(C)>(n, w, ws, x, xs, kPrefetchTiles * R * ws, out, os);
    }
  };
};

}  // namespace
}  // namespace sinew::model::cpu
