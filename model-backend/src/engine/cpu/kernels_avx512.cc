// AVX-512 (F, BW, VL, VNNI) kernels: the register-tiled matrix products of the float
// types and of Q8_0 and Q4_0 (VNNI byte products, vpdpbusd), and the 16-wide F32/F16
// dot products attention uses. Every weight type's matrix product goes through a tile
// (the K-quants' in kernels_avx512_kquants.cc), so no other one-row dot product is
// needed here. Compiled with the matching -m flags; only reached after CpuHasAvx512()
// said yes. Internal linkage throughout.
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/avx512_loads.h"
#include "cpu/avx512_tile.h"
#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

template <typename Load, typename Scalar>
inline float Dot(int64_t n, const void* w, const float* x, Load load, Scalar scalar) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    acc0 = _mm512_fmadd_ps(load(w, i), _mm512_loadu_ps(x + i), acc0);
    acc1 = _mm512_fmadd_ps(load(w, i + 16), _mm512_loadu_ps(x + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load(w, i + 32), _mm512_loadu_ps(x + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load(w, i + 48), _mm512_loadu_ps(x + i + 48), acc3);
  }
  for (; i + 16 <= n; i += 16) acc0 = _mm512_fmadd_ps(load(w, i), _mm512_loadu_ps(x + i), acc0);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
  for (; i < n; ++i) sum += scalar(w, i) * x[i];
  return sum;
}

float DotF32(int64_t n, const void* w, const void* x) {
  return Dot(
      n, w, static_cast<const float*>(x),
      [](const void* p, int64_t i) { return _mm512_loadu_ps(static_cast<const float*>(p) + i); },
      [](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; });
}

float DotF16(int64_t n, const void* w, const void* x) {
  return Dot(
      n, w, static_cast<const float*>(x),
      [](const void* p, int64_t i) {
        return _mm512_cvtph_ps(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
      },
      [](const void* p, int64_t i) { return H2F(static_cast<const uint16_t*>(p)[i]); });
}

// Register-tiled matrix products (GemmTileFn): R weight rows times C activation rows
// per pass over the row, so each weight vector and each activation vector is loaded
// once per tile instead of once per product. Each element keeps one accumulator
// (16 lanes, 16 values per step, a masked last step for the tail) and one final
// reduction: its arithmetic does not depend on R or C, hence not on the batch.
template <int R, int C, typename Load, typename LoadMasked>
SINEW_ALWAYS_INLINE void FloatTile(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                      float* out, int64_t os, Load load, LoadMasked load_masked) {
  __m512 acc[R][C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) {
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  NextTilePrefetch prefetch(w + kPrefetchTiles * R * ws, R * ws, n / 16);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    prefetch.Step();
    __m512 xv[C];
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) xv[c] = _mm512_loadu_ps(reinterpret_cast<const float*>(x + c * xs) + i);
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load(w + r * ws, i);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  if (i < n) {
    const __mmask16 mask = FirstLanes(n - i);
    __m512 xv[C];
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) {
      xv[c] = _mm512_maskz_loadu_ps(mask, reinterpret_cast<const float*>(x + c * xs) + i);
    }
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512 wv = load_masked(w + r * ws, i, mask);
      SINEW_UNROLL
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(wv, xv[c], acc[r][c]);
    }
  }
  StoreTileSums<R, C>(acc, out, os);
}

SINEW_ALWAYS_INLINE __m512 LoadMaskedF32(const void* p, int64_t i, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
}
SINEW_ALWAYS_INLINE __m512 LoadMaskedF16(const void* p, int64_t i, __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
}
SINEW_ALWAYS_INLINE __m512 LoadMaskedBF16(const void* p, int64_t i, __mmask16 m) {
  const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}

// Two Q8_0 blocks' quants in one register (block b in the low half, b + 1 in the high).
SINEW_ALWAYS_INLINE __m512i LoadQ8Pair(const BlockQ8_0* blocks, int64_t b) {
  return _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs))),
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b + 1].qs)), 1);
}
// The last, unpaired block: the high half is zero (it adds exactly nothing).
SINEW_ALWAYS_INLINE __m512i LoadQ8Last(const BlockQ8_0* blocks, int64_t b) {
  return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs)));
}
// One Q4_0 block's 32 quants as signed bytes in element order (nibble - 8): byte i
// holds element i in its low nibble and i + 16 in its high one.
SINEW_ALWAYS_INLINE __m256i LoadQ4Block(const BlockQ4_0& block) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.qs));
  const __m256i nibbles =
      _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
  return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
}
SINEW_ALWAYS_INLINE __m512i LoadQ8Pair(const BlockQ4_0* blocks, int64_t b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(LoadQ4Block(blocks[b])),
                            LoadQ4Block(blocks[b + 1]), 1);
}
SINEW_ALWAYS_INLINE __m512i LoadQ8Last(const BlockQ4_0* blocks, int64_t b) {
  return _mm512_zextsi256_si512(LoadQ4Block(blocks[b]));
}

// Q8_0 (or Q4_0) weights times Q8_0 activations in tile_q8_0's layout (Q8TileActRowBytes).
// vpdpbusd multiplies unsigned by signed bytes: the activations come offset to
// unsigned (q + 128) and each weight block's 128 * sum(w) starts its accumulator
// negative, so the integer dot product of two block pairs is exact in one instruction.
template <int R, int C, typename Block>
SINEW_ALWAYS_INLINE void Q8Step(const Block* const (&wb)[R], const uint8_t* const (&xp)[C],
                                int64_t b, bool pair, __m512 (&acc)[R][C]) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  const int64_t at = b / 2 * 128;
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) {
    const __m512i wq = pair ? LoadQ8Pair(wb[r], b) : LoadQ8Last(wb[r], b);
    const __m512i base = _mm512_sub_epi32(_mm512_setzero_si512(),
                                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, wq));
    const __m512 wd = _mm512_cvtph_ps(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_set1_epi16(static_cast<int16_t>(wb[r][b].d))),
        _mm_set1_epi16(pair ? static_cast<int16_t>(wb[r][b + 1].d) : 0), 1));
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) {
      const __m512i xq = _mm512_loadu_si512(xp[c] + at);
      const __m512 xd = _mm512_loadu_ps(reinterpret_cast<const float*>(xp[c] + at + 64));
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(base, xq, wq));
      acc[r][c] = _mm512_fmadd_ps(dot, _mm512_mul_ps(wd, xd), acc[r][c]);
    }
  }
}

template <int R, int C, typename Block>
SINEW_ALWAYS_INLINE void Q8Tile(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x,
                                int64_t xs, float* out, int64_t os) {
  const Block* wb[R];
  const uint8_t* xp[C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const Block*>(w + r * ws);
  SINEW_UNROLL
  for (int c = 0; c < C; ++c) xp[c] = x + c * xs;
  __m512 acc[R][C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) {
    SINEW_UNROLL
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  const int64_t nb = n / kQK8_0;
  NextTilePrefetch prefetch(w + kPrefetchTiles * R * ws, R * ws, nb / 2);
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    prefetch.Step();
    Q8Step<R, C>(wb, xp, b, true, acc);
  }
  if (b < nb) Q8Step<R, C>(wb, xp, b, false, acc);
  StoreTileSums<R, C>(acc, out, os);
}

// Quantizes like quantize_q8_0, into tile_q8_0's layout.
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
      for (int i = 0; i < kQK8_0; ++i) {
        pair[h * 32 + i] = real ? static_cast<uint8_t>(blocks[h].qs[i] + 128) : 0;
      }
      for (int i = 0; i < 8; ++i) scales[h * 8 + i] = real ? F16ToF32(blocks[h].d) : 0.0f;
    }
    std::memcpy(pair + 64, scales, sizeof(scales));
  }
}

template <int R, int C>
struct TileF32 {
  static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                  int64_t os) {
    FloatTile<R, C>(n, w, ws, x, xs, out, os, LoadF32x16, LoadMaskedF32);
  }
};
template <int R, int C>
struct TileF16 {
  static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                  int64_t os) {
    FloatTile<R, C>(n, w, ws, x, xs, out, os, LoadF16x16, LoadMaskedF16);
  }
};
template <int R, int C>
struct TileBF16 {
  static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                  int64_t os) {
    FloatTile<R, C>(n, w, ws, x, xs, out, os, LoadBF16x16, LoadMaskedBF16);
  }
};
// The Q8_0-activation tile over weight blocks of type Block as DispatchTile takes it.
template <typename Block>
struct Q8TileOf {
  template <int R, int C>
  struct Kernel {
    static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                    float* out, int64_t os) {
      Q8Tile<R, C, Block>(n, w, ws, x, xs, out, os);
    }
  };
};

}  // namespace

void FillAvx512Kernels(KernelTable* t) {
  t->dot_f32 = DotF32;
  t->dot_f16 = DotF16;
  t->tile_f32 = DispatchTile<TileF32>;
  t->tile_f16 = DispatchTile<TileF16>;
  t->tile_bf16 = DispatchTile<TileBF16>;
  t->tile_q8_0 = DispatchTile<Q8TileOf<BlockQ8_0>::Kernel>;
  t->tile_q4_0 = DispatchTile<Q8TileOf<BlockQ4_0>::Kernel>;
  t->quantize_q8_0_tile = QuantizeQ8_0Tile;
  FillAvx512AttentionKernels(t);
  FillAvx512KQuantKernels(t);
}

}  // namespace sinew::model::cpu
