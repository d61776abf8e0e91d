// AVX-512 register-tiled matrix products (GemmTileFn) for the K-quant weights, Q4_K
// and Q6_K, times activations in Q8_K blocks. Compiled with the AVX-512 -m flags;
// reached through FillAvx512Kernels.
//
// A tile of R weight rows by C activation rows runs in passes of P weight rows (all C
// activation rows each): a pass keeps one integer accumulator per element for the
// current 256-element block and one float accumulator per element for the row, 2·P·C
// registers, so P·C <= 8 (P = 4 for one activation row, else 2). Each weight row is
// unpacked once per tile and each activation vector loaded once per pass. Every
// element gets the same arithmetic whatever R, C or the pass it falls in: per block,
// one VNNI multiply-add (vpdpwssd) per pair of sub-blocks of the scaled products in
// the same order, then the block's float scale and its offset term (Q4_K: minus the
// minimum times the sub-block sums; Q6_K: minus 32 times the scaled sums) added to
// the row's accumulator. A matrix product made of these tiles is batch invariant.
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <type_traits>

#include "cpu/avx512_loads.h"
#include "cpu/avx512_tile.h"
#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

// Weight rows per pass for C activation rows (see the file comment).
constexpr int PassRows(int c) { return c == 1 ? 4 : 2; }

// The float part of a block for one element: acc += d * sumi - offset_scale * offset.
SINEW_ALWAYS_INLINE __m512 AddBlock(__m512 acc, float d, __m512i sumi, float offset_scale,
                                    __m512i offset) {
  acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  return _mm512_fnmadd_ps(_mm512_set1_ps(offset_scale), _mm512_cvtepi32_ps(offset), acc);
}

// --- Q4_K: 8 sub-blocks of 32 with 6-bit scales and minimums. Byte i of quant pair p
// holds element 64p + i in its low nibble and 64p + 32 + i in its high one.

// int16 lanes 0-15 take the scale of sub-block 2p, lanes 16-31 that of 2p + 1.
SINEW_ALWAYS_INLINE __m512i Q4KScaleIndex(int pair) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * pair)),
                            _mm256_set1_epi16(static_cast<int16_t>(2 * pair + 1)), 1);
}

SINEW_ALWAYS_INLINE __m512i Q4KQuants(const BlockQ4_K& b, int pair) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * pair));
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q4, mask)),
                            _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask), 1);
}

template <int R, int C>
SINEW_ALWAYS_INLINE void Q4KPass(int64_t nb, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                                 const uint8_t* prefetch_from, float* out, int64_t os) {
  const BlockQ4_K* wb[R];
  const BlockQ8_K* xb[C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const BlockQ4_K*>(w + r * ws);
  SINEW_UNROLL
  for (int c = 0; c < C; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs);
  __m512 acc[R][C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) {
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  NextTilePrefetch prefetch(prefetch_from, R * ws, nb);
  for (int64_t blk = 0; blk < nb; ++blk) {
    prefetch.Step();
    __m512i scales[R];
    __m128i mins[R];
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      alignas(16) uint8_t sc[8], m[8];
      Q4KScalesMins(wb[r][blk].scales, sc, m);
      scales[r] = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
      mins[r] = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    }
    __m512i sumi[R][C];
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
    }
    SINEW_UNROLL
    for (int pair = 0; pair < 4; ++pair) {
      __m512i y[C];
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) y[c] = _mm512_loadu_si512(xb[c][blk].qs + 64 * pair);
      const __m512i index = Q4KScaleIndex(pair);
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i q = Q4KQuants(wb[r][blk], pair);
        const __m512i scale = _mm512_permutexvar_epi16(index, scales[r]);
        SINEW_UNROLL
        for (int c = 0; c < C; ++c) {
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(q, y[c]), scale);
        }
      }
    }
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) {
      const BlockQ8_K& y = xb[c][blk];
      // The sums of each 32-element sub-block of the activations.
      const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums)),
                                           _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums + 8)));
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i min_sum = _mm512_zextsi128_si512(_mm_madd_epi16(mins[r], bsums));
        acc[r][c] = AddBlock(acc[r][c], y.d * H2F(wb[r][blk].d), sumi[r][c], y.d * H2F(wb[r][blk].dmin),
                             min_sum);
      }
    }
  }
  StoreTileSums<R, C>(acc, out, os);
}

// --- Q6_K: 16 sub-blocks of 16 with signed 8-bit scales; quants 0..63 stand for q - 32.
// Half h (128 elements) takes 64 low-nibble bytes ql and 32 high-bit bytes qh: element
// 128h + 32j + i has the low nibble of ql[64h + i] (j = 0, 1 : i < 32 picks the byte,
// j = 2, 3 the high nibble of ql[64h + 32(j - 2) + i]) and bits 2j, 2j+1 of qh[32h + i].

// int16 lane l of part k's products covers elements 64k + 2l, 2l + 1: scale 4k + l / 8.
SINEW_ALWAYS_INLINE __m512i Q6KScaleIndex(int part) {
  const __m512i lane = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16,
                                        15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  return _mm512_add_epi16(_mm512_set1_epi16(static_cast<int16_t>(4 * part)), _mm512_srli_epi16(lane, 3));
}

// The 64 quants of elements 128h + 64k .. + 63 (k = 0: quadrants 0, 1; k = 1: 2, 3).
SINEW_ALWAYS_INLINE __m512i Q6KQuants(const BlockQ6_K& b, int half, int k) {
  const __m512i m0f = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  const __m512i ql = _mm512_loadu_si512(b.ql + 64 * half);
  const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half)));
  if (k == 0) {
    // Quadrant 0 (low 256 bits) wants qh bits 0-1 at 4-5, quadrant 1 bits 2-3.
    const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    return _mm512_or_si512(_mm512_and_si512(ql, m0f), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
  }
  const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m0f),
                         _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
}

template <int R, int C>
SINEW_ALWAYS_INLINE void Q6KPass(int64_t nb, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                                 const uint8_t* prefetch_from, float* out, int64_t os) {
  const BlockQ6_K* wb[R];
  const BlockQ8_K* xb[C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const BlockQ6_K*>(w + r * ws);
  SINEW_UNROLL
  for (int c = 0; c < C; ++c) xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs);
  __m512 acc[R][C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) {
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  NextTilePrefetch prefetch(prefetch_from, R * ws, nb);
  for (int64_t blk = 0; blk < nb; ++blk) {
    prefetch.Step();
    __m512i scales[R];
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      scales[r] = _mm512_castsi256_si512(
          _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[r][blk].scales))));
    }
    __m512i sumi[R][C];
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
    }
    SINEW_UNROLL
    for (int part = 0; part < 4; ++part) {
      __m512i y[C];
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) y[c] = _mm512_loadu_si512(xb[c][blk].qs + 64 * part);
      const __m512i index = Q6KScaleIndex(part);
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i q = Q6KQuants(wb[r][blk], part / 2, part % 2);
        const __m512i scale = _mm512_permutexvar_epi16(index, scales[r]);
        SINEW_UNROLL
        for (int c = 0; c < C; ++c) {
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(q, y[c]), scale);
        }
      }
    }
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) {
      const BlockQ8_K& y = xb[c][blk];
      const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i offset = _mm512_zextsi256_si512(_mm256_madd_epi16(_mm512_castsi512_si256(scales[r]), bsums));
        const float d = y.d * H2F(wb[r][blk].d);
        acc[r][c] = AddBlock(acc[r][c], d, sumi[r][c], 32.0f * d, offset);
      }
    }
  }
  StoreTileSums<R, C>(acc, out, os);
}

// A tile in at most two passes (R <= 4, PassRows >= 2); each pass prefetches its own
// rows of the tile kPrefetchTiles ahead.
template <int R, int C, typename Pass>
SINEW_ALWAYS_INLINE void KQuantTile(int64_t n, const uint8_t* w, int64_t ws, float* out, Pass pass) {
  constexpr int P = PassRows(C);
  const int64_t nb = n / kQKK;
  const int64_t ahead = kPrefetchTiles * R * ws;
  if constexpr (R <= P) {
    pass(std::integral_constant<int, R>{}, nb, w, w + ahead, out);
  } else {
    pass(std::integral_constant<int, P>{}, nb, w, w + ahead, out);
    pass(std::integral_constant<int, R - P>{}, nb, w + P * ws, w + P * ws + ahead, out + P);
  }
}

template <int R, int C>
struct TileQ4_K {
  static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                  int64_t os) {
    KQuantTile<R, C>(n, w, ws, out,
                     [&](auto rows, int64_t nb, const uint8_t* pw, const uint8_t* ahead, float* po) {
                       Q4KPass<decltype(rows)::value, C>(nb, pw, ws, x, xs, ahead, po, os);
                     });
  }
};
template <int R, int C>
struct TileQ6_K {
  static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                  int64_t os) {
    KQuantTile<R, C>(n, w, ws, out,
                     [&](auto rows, int64_t nb, const uint8_t* pw, const uint8_t* ahead, float* po) {
                       Q6KPass<decltype(rows)::value, C>(nb, pw, ws, x, xs, ahead, po, os);
                     });
  }
};

}  // namespace

void FillAvx512KQuantKernels(KernelTable* t) {
  t->tile_q4_k = DispatchTile<TileQ4_K>;
  t->tile_q6_k = DispatchTile<TileQ6_K>;
}

}  // namespace sinew::model::cpu
