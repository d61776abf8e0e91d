// What the AVX2 register-tiled matrix products (kernels_avx2_tiles.cc,
// kernels_avx2_kquants.cc) share beyond tile_common.h: the order in which a tile
// takes its weight rows, and the sum of an accumulator's lanes. Include
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

// A weight format's tile, one weight row at a time with all C activation rows:
// F::Row<C>(n, w, x, xs, out, os) computes out[c * os] for the weight row at w. One row
// after another is one stream of weight reads for the hardware prefetcher. Where
// F::kPrefetchAhead, the tile also prefetches, before each row, that row's counterpart
// in the tile kPrefetchTiles ahead: with many activation rows a tile computes slowly
// enough that the hardware prefetcher falls behind, and a single-stream Q8_0 decode
// reads its weights faster with it; the K-quants' rows, a third the size, do not gain
// (docs/model-engine.md). One weight row with up to four
// activation rows fits 16 YMM registers with room for each element's accumulators.
// Each weight row is unpacked once per tile, and every element gets the same
// arithmetic whatever R and C.
template <typename F>
struct TileOf {
  template <int R, int C>
  struct Kernel {
    static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                    float* out, int64_t os) {
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        if constexpr (F::kPrefetchAhead) {
          NextTilePrefetch(w + (kPrefetchTiles * R + r) * ws, ws, 1).Step();
        }
        F::template Row<C>(n, w + r * ws, x, xs, out + r, os);
      }
    }
  };
};

}  // namespace
}  // namespace sinew::model::cpu
