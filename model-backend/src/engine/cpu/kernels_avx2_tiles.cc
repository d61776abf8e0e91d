// AVX2 (with FMA and F16C) register-tiled matrix products (GemmTileFn) of the float
// weight types and of Q8_0 and Q4_0, and the Q8_0 activation layout these take.
// Compiled with the AVX2 -m flags; reached through FillAvx2Kernels.
//
// A float tile takes its weight rows two or four at a time as outer products with its
// activation rows (FloatTiles); a Q8_0 or Q4_0 tile one at a time (avx2_tile.h). Each
// weight row is unpacked (F16 through F16C) once for all C activation rows, and each
// element's arithmetic is the same whatever the tile's shape: one 8-lane accumulator,
// summed by Hsum8 at the end. A matrix product made of these tiles is batch invariant.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/avx2_tile.h"
#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

// F16C scalar conversion (the portable F16ToF32 branches; this does not).
inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

// A float weight format: Load(row, i), 8 elements from i converted to F32 (F16 through
// F16C); Tail(row, i, count), the count < 8 elements from i and zeros.
struct F32W {
  static SINEW_ALWAYS_INLINE __m256 Load(const uint8_t* p, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p) + i);
  }
  static SINEW_ALWAYS_INLINE __m256 Tail(const uint8_t* p, int64_t i, int64_t count) {
    alignas(32) float v[8] = {};
    std::memcpy(v, reinterpret_cast<const float*>(p) + i, static_cast<size_t>(count) * 4);
    return _mm256_load_ps(v);
  }
};
struct F16W {
  static SINEW_ALWAYS_INLINE __m256 Load(const uint8_t* p, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static SINEW_ALWAYS_INLINE __m256 Tail(const uint8_t* p, int64_t i, int64_t count) {
    alignas(16) uint16_t v[8] = {};
    std::memcpy(v, reinterpret_cast<const uint16_t*>(p) + i, static_cast<size_t>(count) * 2);
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(v)));
  }
};
struct BF16W {
  static SINEW_ALWAYS_INLINE __m256 Widen(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static SINEW_ALWAYS_INLINE __m256 Load(const uint8_t* p, int64_t i) {
    return Widen(_mm_loadu_si128(
        reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(p) + i)));
  }
  static SINEW_ALWAYS_INLINE __m256 Tail(const uint8_t* p, int64_t i, int64_t count) {
    alignas(16) uint16_t v[8] = {};
    std::memcpy(v, reinterpret_cast<const uint16_t*>(p) + i, static_cast<size_t>(count) * 2);
    return Widen(_mm_load_si128(reinterpret_cast<const __m128i*>(v)));
  }
};

// Float weights (format W) times F32 activations, as outer products: per step of 8
// elements, P weight rows' vectors are converted once each and multiplied into the
// accumulator of every (weight row, activation row) pair, so that each activation load
// feeds P multiply-adds and each weight load C. P is 4 with up to two activation rows, 3
// for a tile of three weight rows (12 accumulators, 12 chains of multiply-adds in flight,
// and 4 registers for the operands: the shape full matrices take, float_tile_rows_w) and
// 2 otherwise. Each element's sum is one chain of multiply-adds in
// step order (the last n % 8 elements zero-padded as one more step), then Hsum8: the same
// arithmetic whatever the tile's shape and pass.
template <typename W>
struct FloatTiles {
  template <int Q, int C>
  static SINEW_ALWAYS_INLINE void Pass(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                                       float* out, int64_t os, const uint8_t* ahead) {
    SINEW_UNROLL
    for (int q = 0; q < Q; ++q) NextTilePrefetch(ahead + q * ws, ws, 1).Step();
    __m256 acc[Q][C];
    SINEW_UNROLL
    for (int q = 0; q < Q; ++q) {
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) acc[q][c] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256 wv[Q];
      SINEW_UNROLL
      for (int q = 0; q < Q; ++q) wv[q] = W::Load(w + q * ws, i);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) {
        __m256 xv = F32W::Load(x + c * xs, i);
        // One load per activation vector: without this the compiler folds it into each
        // multiply-add, loading it Q times.
        __asm__("" : "+x"(xv));
        SINEW_UNROLL
        for (int q = 0; q < Q; ++q) acc[q][c] = _mm256_fmadd_ps(wv[q], xv, acc[q][c]);
      }
    }
    if (i < n) {
      __m256 wv[Q];
      SINEW_UNROLL
      for (int q = 0; q < Q; ++q) wv[q] = W::Tail(w + q * ws, i, n - i);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) {
        const __m256 xv = F32W::Tail(x + c * xs, i, n - i);
        SINEW_UNROLL
        for (int q = 0; q < Q; ++q) acc[q][c] = _mm256_fmadd_ps(wv[q], xv, acc[q][c]);
      }
    }
    SINEW_UNROLL
    for (int q = 0; q < Q; ++q) {
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) out[c * os + q] = Hsum8(acc[q][c]);
    }
  }
  template <int R, int C>
  struct Kernel {
    static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                    int64_t os) {
      // The same rows of the tile kPrefetchTiles ahead (tiles follow each other in memory).
      const uint8_t* ahead = w + kPrefetchTiles * R * ws;
      // At most 12 accumulators: three weight rows with up to four activation rows (the
      // shape a full matrix takes, float_tile_rows_w), four with up to two.
      constexpr int P = C <= 2 ? 4 : R == 3 ? 3 : 2;
      if constexpr (R <= P) {
        Pass<R, C>(n, w, ws, x, xs, out, os, ahead);
      } else {
        Pass<P, C>(n, w, ws, x, xs, out, os, ahead);
        Pass<R - P, C>(n, w + P * ws, ws, x, xs, out + P, os, ahead + P * ws);
      }
    }
  };
};

// A Q8_0-activation weight format: Quants(block), the block's 32 quants as signed bytes.
struct Q8_0W {
  using Block = BlockQ8_0;
  static SINEW_ALWAYS_INLINE __m256i Quants(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
};
// Q4_0: byte i holds element i in its low nibble and i + 16 in its high one; value
// nibble - 8.
struct Q4_0W {
  using Block = BlockQ4_0;
  static SINEW_ALWAYS_INLINE __m256i Quants(const Block& b) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m256i nibbles =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
  }
};

// Q8_0 or Q4_0 weights (format W) times Q8_0 activations in tile_q8_0's AVX2 layout
// (signed quants, per pair of blocks the first block's scale 8 times then the
// second's). Per block, each element's accumulator takes the block's integer sum (the
// signs moved onto the activations so that vpmaddubsw multiplies |w| by them) times
// the weight scale times the activation scale.
template <typename W>
struct Q8Tile {
  static constexpr bool kPrefetchAhead = true;
  template <int C>
  static SINEW_ALWAYS_INLINE void Row(int64_t n, const uint8_t* w, const uint8_t* x, int64_t xs,
                                      float* out, int64_t os) {
    const typename W::Block* wb = reinterpret_cast<const typename W::Block*>(w);
    __m256 acc[C];
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t nb = n / kQK8_0;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t at = b / 2 * 128 + b % 2 * 32;  // the block's quants; scales 64 on
      const __m256i wq = W::Quants(wb[b]);
      const __m256i aw = _mm256_sign_epi8(wq, wq);
      const __m256 wd = _mm256_set1_ps(H2F(wb[b].d));
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) {
        const uint8_t* xb = x + c * xs + at;
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb));
        const __m256 xd = _mm256_loadu_ps(reinterpret_cast<const float*>(xb + 64));
        const __m256i sum =
            _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq, wq)), ones);
        acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(wd, xd), acc[c]);
      }
    }
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) out[c * os] = Hsum8(acc[c]);
  }
};

// Quantizes like quantize_q8_0, into tile_q8_0's AVX2 layout.
void QuantizeQ8_0Tile(const float* x, void* y, int64_t n) {
  uint8_t* out = static_cast<uint8_t*>(y);
  const int64_t nb = n / kQK8_0;
  for (int64_t b = 0; b < nb; b += 2) {
    BlockQ8_0 blocks[2] = {};
    QuantizeRowQ8_0(x + b * kQK8_0, blocks, std::min<int64_t>(2, nb - b) * kQK8_0);
    uint8_t* pair = out + b / 2 * 128;
    float scales[16];
    for (int h = 0; h < 2; ++h) {
      const bool real = b + h < nb;
      std::memcpy(pair + h * 32, blocks[h].qs, kQK8_0);  // zeros when not real
      for (int i = 0; i < 8; ++i) scales[h * 8 + i] = real ? F16ToF32(blocks[h].d) : 0.0f;
    }
    std::memcpy(pair + 64, scales, sizeof(scales));
  }
}

}  // namespace

void FillAvx2TileKernels(KernelTable* t) {
  t->tile_f32 = DispatchTile<FloatTiles<F32W>::Kernel>;
  t->tile_f16 = DispatchTile<FloatTiles<F16W>::Kernel>;
  t->tile_bf16 = DispatchTile<FloatTiles<BF16W>::Kernel>;
  t->float_tile_rows_w = 3;
  t->tile_q8_0 = DispatchTile<TileOf<Q8Tile<Q8_0W>>::Kernel>;
  t->tile_q4_0 = DispatchTile<TileOf<Q8Tile<Q4_0W>>::Kernel>;
  t->quantize_q8_0_tile = QuantizeQ8_0Tile;
}

}  // namespace sinew::model::cpu
