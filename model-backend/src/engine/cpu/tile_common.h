// What the register-tiled matrix products of every SIMD level (kernels_avx2_tiles.cc,
// kernels_avx2_kquants.cc, kernels_avx512*.cc) share: the unroll marker that keeps a
// tile's accumulators in registers, the prefetch of the tiles ahead, and the dispatch
// of a runtime tile shape to its template instance. Include only from SIMD kernel
// files. Internal linkage throughout.
#pragma once

#include <xmmintrin.h>

#include <algorithm>
#include <cstdint>

#include "cpu/kernels.h"

#ifndef SINEW_ALWAYS_INLINE
#define SINEW_ALWAYS_INLINE inline __attribute__((always_inline))
#endif

// Tile loops over rows must unroll so that the accumulators stay in registers.
#define SINEW_UNROLL _Pragma("GCC unroll 16")

namespace sinew::model::cpu {
namespace {

// Reading weight rows side by side defeats the hardware prefetcher, and a tile that
// computes slowly (many activation rows) lets it fall behind (decode is bound by
// memory): while a tile runs, it prefetches its rows of the tile kPrefetchTiles ahead
// (tiles follow each other in memory). Too few tiles ahead and the rows arrive late;
// too many and they are evicted before use. The value is tuned with
// sinew-model-bench's decode test (bench/model_bench.cc).
constexpr int64_t kPrefetchTiles = 4;
// Spreads the prefetch of `bytes` from `from` over `steps` calls of Step().
struct NextTilePrefetch {
  SINEW_ALWAYS_INLINE NextTilePrefetch(const uint8_t* from, int64_t bytes, int64_t steps)
      : at(from), end(from + bytes), per_step((bytes / 64 + steps) / std::max<int64_t>(steps, 1)) {}
  SINEW_ALWAYS_INLINE void Step() {
    for (int64_t l = 0; l < per_step && at < end; ++l, at += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T0);
    }
  }
  const uint8_t* at;
  const uint8_t* end;
  int64_t per_step;
};

// Dispatches a runtime (rows_w, rows_x) in 1..4 to the template instance.
template <template <int, int> class Kernel>
void DispatchTile(int64_t n, const void* w, int64_t ws, int rows_w, const void* x, int64_t xs,
                  int rows_x, float* out, int64_t os) {
  static_assert(kTileRows == 4);
  using Fn = void (*)(int64_t, const uint8_t*, int64_t, const uint8_t*, int64_t, float*, int64_t);
  static constexpr Fn kTable[4][4] = {
      {Kernel<1, 1>::Run, Kernel<1, 2>::Run, Kernel<1, 3>::Run, Kernel<1, 4>::Run},
      {Kernel<2, 1>::Run, Kernel<2, 2>::Run, Kernel<2, 3>::Run, Kernel<2, 4>::Run},
      {Kernel<3, 1>::Run, Kernel<3, 2>::Run, Kernel<3, 3>::Run, Kernel<3, 4>::Run},
      {Kernel<4, 1>::Run, Kernel<4, 2>::Run, Kernel<4, 3>::Run, Kernel<4, 4>::Run}};
  kTable[rows_w - 1][rows_x - 1](n, static_cast<const uint8_t*>(w), ws,
                                 static_cast<const uint8_t*>(x), xs, out, os);
}

}  // namespace
}  // namespace sinew::model::cpu
