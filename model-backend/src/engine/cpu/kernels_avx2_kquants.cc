// AVX2 register-tiled matrix products (GemmTileFn) for the K-quant weights, Q4_K and
// Q6_K, times activations in Q8_K blocks. Compiled with the AVX2 -m flags; reached
// through FillAvx2Kernels.
//
// A tile takes its weight rows one at a time (avx2_tile.h), each with all C activation
// rows: one float accumulator per element for the row and, while it unpacks a 256-element
// block (once for all C), C integer accumulators for the block, which leaves the rest of
// the 16 YMM registers for the unpacked quants, scales and products. Every element gets the same
// arithmetic whatever R, C or the pass it falls in: per block, the integer sums of the scaled
// sub-block products (vpmaddubsw, then vpmaddwd by the sub-block scale; integer, so exact in any
// order), then the block's float scale times them and minus its offset term (Q4_K: the minimums
// times the activations' sub-block sums; Q6_K: 32 times the scaled sums) added to the row's
// accumulator, summed by Hsum8 at the end. A matrix product made of these tiles is
// batch invariant.
#include <immintrin.h>

#include "cpu/avx2_tile.h"
#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

// A K-quant format for KQuantTile: its block type; Row, what a pass keeps of a weight
// block (scales, minimums); Load(block); AddBlock(block, row, y, sumi), which adds to
// each of C integer accumulators the block's scaled products with activation block
// y[c]; Offset(row, y), the integer offset term (8 int32 lanes) that the float
// accumulator takes times OffsetScale(row).

// Q4_K: 8 sub-blocks of 32 with 6-bit scales and minimums. Byte i of quant pair p holds
// element 64p + i in its low nibble and 64p + 32 + i in its high one. value = d * sc * q
// - dmin * m.
struct Q4K {
  using Block = BlockQ4_K;
  struct Row {
    alignas(16) uint8_t sc[8];
    __m128i mins;  // 8 int16
    float d, dmin;
  };
  static SINEW_ALWAYS_INLINE Row Load(const Block& b) {
    Row row;
    alignas(16) uint8_t m[8];
    Q4KScalesMins(b.scales, row.sc, m);
    row.mins = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    row.d = H2F(b.d);
    row.dmin = H2F(b.dmin);
    return row;
  }
  template <int C>
  static SINEW_ALWAYS_INLINE void AddBlock(const Block& b, const Row& row,
                                           const BlockQ8_K* const (&y)[C], __m256i (&sumi)[C]) {
    const __m256i mask = _mm256_set1_epi8(0x0F);
    SINEW_UNROLL
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * pair));
      const __m256i lo = _mm256_and_si256(q4, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask);
      const __m256i s_lo = _mm256_set1_epi16(row.sc[2 * pair]);
      const __m256i s_hi = _mm256_set1_epi16(row.sc[2 * pair + 1]);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) {
        const int8_t* yq = y[c]->qs + 64 * pair;
        const __m256i p_lo = _mm256_madd_epi16(
            _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq))),
            s_lo);
        const __m256i p_hi = _mm256_madd_epi16(
            _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq + 32))),
            s_hi);
        sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p_lo, p_hi));
      }
    }
  }
  // The minimums times the sums of each 32-element sub-block of the activations.
  static SINEW_ALWAYS_INLINE __m256i Offset(const Row& row, const BlockQ8_K& y) {
    const __m128i sums =
        _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums)),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums + 8)));
    return _mm256_zextsi128_si256(_mm_madd_epi16(row.mins, sums));
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
    __m256i scales;  // 16 int16
    float d;
  };
  static SINEW_ALWAYS_INLINE Row Load(const Block& b) {
    return {_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales))),
            H2F(b.d)};
  }
  template <int C>
  static SINEW_ALWAYS_INLINE void AddBlock(const Block& b, const Row&,
                                           const BlockQ8_K* const (&y)[C], __m256i (&sumi)[C]) {
    const __m256i m0f = _mm256_set1_epi8(0x0F);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    SINEW_UNROLL
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b.ql + 64 * half;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half));
      SINEW_UNROLL
      for (int quad = 0; quad < 4; ++quad) {
        const __m256i l =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32 * (quad % 2)));
        const __m256i low =
            quad < 2 ? _mm256_and_si256(l, m0f) : _mm256_and_si256(_mm256_srli_epi16(l, 4), m0f);
        // Bits 2 quad, 2 quad + 1 of qh to bits 4, 5.
        const __m256i high = quad == 0   ? _mm256_slli_epi16(qh, 4)
                             : quad == 1 ? _mm256_slli_epi16(qh, 2)
                             : quad == 2 ? qh
                                         : _mm256_srli_epi16(qh, 2);
        const __m256i q = _mm256_or_si256(low, _mm256_and_si256(high, m30));
        const int8_t* sc = b.scales + 8 * half + 2 * quad;
        const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
        SINEW_UNROLL
        for (int c = 0; c < C; ++c) {
          const __m256i yq = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(y[c]->qs + 128 * half + 32 * quad));
          sumi[c] =
              _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q, yq), scale));
        }
      }
    }
  }
  static SINEW_ALWAYS_INLINE __m256i Offset(const Row& row, const BlockQ8_K& y) {
    return _mm256_madd_epi16(row.scales,
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.bsums)));
  }
  static SINEW_ALWAYS_INLINE float OffsetScale(const Row& row) { return 32.0f * row.d; }
};

template <typename F>
struct KQuantTile {
  static constexpr bool kPrefetchAhead = false;
  template <int C>
  static SINEW_ALWAYS_INLINE void Row(int64_t n, const uint8_t* w, const uint8_t* x, int64_t xs,
                                      float* out, int64_t os) {
    const typename F::Block* wb = reinterpret_cast<const typename F::Block*>(w);
    const BlockQ8_K* xb[C];
    __m256 acc[C];
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) {
      xb[c] = reinterpret_cast<const BlockQ8_K*>(x + c * xs);
      acc[c] = _mm256_setzero_ps();
    }
    const int64_t nb = n / kQKK;
    for (int64_t blk = 0; blk < nb; ++blk) {
      const BlockQ8_K* y[C];
      __m256i sumi[C];
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) {
        y[c] = xb[c] + blk;
        sumi[c] = _mm256_setzero_si256();
      }
      const typename F::Row row = F::Load(wb[blk]);
      F::template AddBlock<C>(wb[blk], row, y, sumi);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) {
        acc[c] =
            _mm256_fmadd_ps(_mm256_set1_ps(y[c]->d * row.d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        acc[c] = _mm256_fnmadd_ps(_mm256_set1_ps(y[c]->d * F::OffsetScale(row)),
                                  _mm256_cvtepi32_ps(F::Offset(row, *y[c])), acc[c]);
      }
    }
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) out[c * os] = Hsum8(acc[c]);
  }
};

}  // namespace

void FillAvx2KQuantKernels(KernelTable* t) {
  t->tile_q4_k = DispatchTile<TileOf<KQuantTile<Q4K>>::Kernel>;
  t->tile_q6_k = DispatchTile<TileOf<KQuantTile<Q6K>>::Kernel>;
}

}  // namespace sinew::model::cpu
