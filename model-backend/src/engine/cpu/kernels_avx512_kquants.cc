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

#include "cpu/avx512_loads.h"
#include "cpu/avx512_tile.h"
#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

// Weight rows per pass for C activation rows (see the file comment).
constexpr int PassRows(int c) { return c == 1 ? 4 : 2; }

// A K-quant format for KQuantPass: its block type; Row, what a pass keeps of a weight
// block (its scales); Quants(block, part) and ScaleIndex(part), the 64 unsigned quants of
// elements [64 part, + 64) and which of Row's int16 scales each maddubs lane takes;
// ActSums(activation block), computed once per activation row and block; and
// Offset(row, act_sums), the integer term that Finish scales and subtracts.

// Q4_K: 8 sub-blocks of 32 with 6-bit scales and minimums. Byte i of quant pair p holds
// element 64p + i in its low nibble and 64p + 32 + i in its high one. value = d * sc * q
// - dmin * m, so the offset is the minimums times the activations' sub-block sums.
struct Q4K {
  using Block = BlockQ4_K;
  struct Row {
    __m512i scales;  // 8 int16
    __m128i mins;    // 8 int16
    float d, dmin;
  };
  static SINEW_ALWAYS_INLINE Row Load(const Block& b) {
    alignas(16) uint8_t sc[8], m[8];
    Q4KScalesMins(b.scales, sc, m);
    return {_mm512_castsi128_si512(
                _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc)))),
            _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m))), H2F(b.d),
            H2F(b.dmin)};
  }
  // int16 lanes 0-15 take the scale of sub-block 2p, lanes 16-31 that of 2p + 1.
  static SINEW_ALWAYS_INLINE __m512i ScaleIndex(int pair) {
    return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * pair)),
                              _mm256_set1_epi16(static_cast<int16_t>(2 * pair + 1)), 1);
  }
  static SINEW_ALWAYS_INLINE __m512i Quants(const Block& b, int pair) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * pair));
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q4, mask)),
                              _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask), 1);
  }
  // The sums of each 32-element sub-block of the activations.
  static SINEW_ALWAYS_INLINE __m256i ActSums(const BlockQ8_K& y) {
    return _mm256_castsi128_si256(
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums + 8))));
  }
  static SINEW_ALWAYS_INLINE __m512i Offset(const Row& row, __m256i sums) {
    return _mm512_zextsi128_si512(_mm_madd_epi16(row.mins, _mm256_castsi256_si128(sums)));
  }
  static SINEW_ALWAYS_INLINE float OffsetScale(const Row& row) { return row.dmin; }
};

// Q6_K: 16 sub-blocks of 16 with signed 8-bit scales; quants 0..63 stand for q - 32, so
// the offset is 32 times the scaled activation sums. Half h (128 elements) takes 64
// low-nibble bytes ql and 32 high-bit bytes qh: element 128h + 32j + i has the low
// nibble of ql[64h + i] (j = 0, 1: i < 32 picks the byte; j = 2, 3 the high nibble of
// ql[64h + 32(j - 2) + i]) and bits 2j, 2j+1 of qh[32h + i].
struct Q6K {
  using Block = BlockQ6_K;
  struct Row {
    __m512i scales;  // 16 int16
    float d;
  };
  static SINEW_ALWAYS_INLINE Row Load(const Block& b) {
    return {_mm512_castsi256_si512(
                _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)))),
            H2F(b.d)};
  }
  // int16 lane l of part k's products covers elements 64k + 2l, 2l + 1: scale 4k + l / 8.
  static SINEW_ALWAYS_INLINE __m512i ScaleIndex(int part) {
    const __m512i lane =
        _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13,
                         12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    return _mm512_add_epi16(_mm512_set1_epi16(static_cast<int16_t>(4 * part)),
                            _mm512_srli_epi16(lane, 3));
  }
  // The 64 quants of elements 64 part .. + 63 (in half part / 2: quadrants 0, 1 or 2, 3).
  static SINEW_ALWAYS_INLINE __m512i Quants(const Block& b, int part) {
    const int half = part / 2;
    const __m512i m0f = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * half);
    const __m512i qh = _mm512_broadcast_i64x4(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half)));
    if (part % 2 == 0) {
      // Quadrant 0 (low 256 bits) wants qh bits 0-1 at 4-5, quadrant 1 bits 2-3.
      const __m512i shl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
      return _mm512_or_si512(_mm512_and_si512(ql, m0f),
                             _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
    }
    const __m512i shr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m0f),
                           _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
  }
  static SINEW_ALWAYS_INLINE __m256i ActSums(const BlockQ8_K& y) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums));
  }
  static SINEW_ALWAYS_INLINE __m512i Offset(const Row& row, __m256i sums) {
    return _mm512_zextsi256_si512(_mm256_madd_epi16(_mm512_castsi512_si256(row.scales), sums));
  }
  static SINEW_ALWAYS_INLINE float OffsetScale(const Row& row) { return 32.0f * row.d; }
};

// One pass: R weight rows of format F by C activation rows, block by block. Per block,
// each element's integer accumulator takes one vpdpwssd (sumi += maddubs(q, y) . scale)
// per 64 elements, in order; then its float accumulator takes the block's scale times
// it and minus the offset term.
template <typename F, int R, int C>
SINEW_ALWAYS_INLINE void KQuantPass(int64_t nb, const uint8_t* w, int64_t ws, const uint8_t* x,
                                    int64_t xs, const uint8_t* prefetch_from, float* out,
                                    int64_t os) {
  using Block = typename F::Block;
  const Block* wb[R];
  const BlockQ8_K* xb[C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const Block*>(w + r * ws);
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
    typename F::Row rows[R];
    __m512i sumi[R][C];
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      rows[r] = F::Load(wb[r][blk]);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) sumi[r][c] = _mm512_setzero_si512();
    }
    SINEW_UNROLL
    for (int part = 0; part < 4; ++part) {
      __m512i y[C];
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) y[c] = _mm512_loadu_si512(xb[c][blk].qs + 64 * part);
      const __m512i index = F::ScaleIndex(part);
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        const __m512i q = F::Quants(wb[r][blk], part);
        const __m512i scale = _mm512_permutexvar_epi16(index, rows[r].scales);
        SINEW_UNROLL
        for (int c = 0; c < C; ++c) {
          sumi[r][c] = _mm512_dpwssd_epi32(sumi[r][c], _mm512_maddubs_epi16(q, y[c]), scale);
        }
      }
    }
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) {
      const float yd = xb[c][blk].d;
      const __m256i sums = F::ActSums(xb[c][blk]);
      SINEW_UNROLL
      for (int r = 0; r < R; ++r) {
        acc[r][c] = _mm512_fmadd_ps(_mm512_set1_ps(yd * rows[r].d), _mm512_cvtepi32_ps(sumi[r][c]),
                                    acc[r][c]);
        acc[r][c] = _mm512_fnmadd_ps(_mm512_set1_ps(yd * F::OffsetScale(rows[r])),
                                     _mm512_cvtepi32_ps(F::Offset(rows[r], sums)), acc[r][c]);
      }
    }
  }
  StoreTileSums<R, C>(acc, out, os);
}

// A tile in at most two passes (R <= 4, PassRows >= 2); each pass prefetches its own
// rows of the tile kPrefetchTiles ahead.
template <typename F, int R, int C>
SINEW_ALWAYS_INLINE void KQuantTile(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x,
                                    int64_t xs, float* out, int64_t os) {
  constexpr int P = PassRows(C);
  const int64_t nb = n / kQKK;
  const int64_t ahead = kPrefetchTiles * R * ws;
  if constexpr (R <= P) {
    KQuantPass<F, R, C>(nb, w, ws, x, xs, w + ahead, out, os);
  } else {
    KQuantPass<F, P, C>(nb, w, ws, x, xs, w + ahead, out, os);
    KQuantPass<F, R - P, C>(nb, w + P * ws, ws, x, xs, w + P * ws + ahead, out + P, os);
  }
}

// The tile of format F as DispatchTile takes it.
template <typename F>
struct KQuantTileOf {
  template <int R, int C>
  struct Kernel {
    static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                    float* out, int64_t os) {
      KQuantTile<F, R, C>(n, w, ws, x, xs, out, os);
    }
  };
};

}  // namespace

void FillAvx512KQuantKernels(KernelTable* t) {
  t->tile_q4_k = DispatchTile<KQuantTileOf<Q4K>::Kernel>;
  t->tile_q6_k = DispatchTile<KQuantTileOf<Q6K>::Kernel>;
}

}  // namespace sinew::model::cpu
