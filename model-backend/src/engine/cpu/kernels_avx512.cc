// AVX-512 (F, BW, VL, VNNI) kernels: 16-wide float dot products and VNNI byte
// dot products (vpdpbusd, no int16 saturation) for Q8_0/Q4_0, 512-bit Q4_K and Q6_K.
// Compiled with the matching -m flags; only
// reached after CpuHasAvx512() said yes. Internal linkage throughout.
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu/avx512_loads.h"
#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

// Tile loops over rows must unroll so that the accumulators stay in registers.
#define SINEW_UNROLL _Pragma("GCC unroll 16")

inline float Hsum256(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 sh = _mm_movehdup_ps(lo);
  lo = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, lo);
  return _mm_cvtss_f32(_mm_add_ss(lo, sh));
}

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

// Four activation rows at once: each weight vector is loaded (and converted) once.
// Every row sees exactly the arithmetic of Dot (same accumulators, same order of
// additions), so a row's result does not depend on whether it went through Dot
// or Dot4: matrix products are batch invariant without padding the rows.
template <typename Load, typename Scalar>
inline void Dot4(int64_t n, const void* w, const void* xv, int64_t stride, float* out, Load load,
                 Scalar scalar) {
  const float* x[4];
  for (int j = 0; j < 4; ++j) {
    x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(xv) + j * stride);
  }
  __m512 acc[4][4];
  for (int j = 0; j < 4; ++j) {
    for (int a = 0; a < 4; ++a) acc[j][a] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 w0 = load(w, i), w1 = load(w, i + 16), w2 = load(w, i + 32), w3 = load(w, i + 48);
    for (int j = 0; j < 4; ++j) {
      acc[j][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[j] + i), acc[j][0]);
      acc[j][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[j] + i + 16), acc[j][1]);
      acc[j][2] = _mm512_fmadd_ps(w2, _mm512_loadu_ps(x[j] + i + 32), acc[j][2]);
      acc[j][3] = _mm512_fmadd_ps(w3, _mm512_loadu_ps(x[j] + i + 48), acc[j][3]);
    }
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 wv = load(w, i);
    for (int j = 0; j < 4; ++j) acc[j][0] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[j] + i), acc[j][0]);
  }
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]), _mm512_add_ps(acc[j][2], acc[j][3])));
  }
  for (; i < n; ++i) {
    const float wi = scalar(w, i);
    for (int j = 0; j < 4; ++j) out[j] += wi * x[j][i];
  }
}

void Dot4F32(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  Dot4(n, w, x, stride, out, LoadF32x16, ScalarF32);
}
void Dot4F16(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  Dot4(n, w, x, stride, out, LoadF16x16, ScalarF16);
}
void Dot4BF16(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  Dot4(n, w, x, stride, out, LoadBF16x16, ScalarBF16);
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

float DotBF16(int64_t n, const void* w, const void* x) {
  return Dot(
      n, w, static_cast<const float*>(x),
      [](const void* p, int64_t i) {
        const __m512i v = _mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i)));
        return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      },
      [](const void* p, int64_t i) { return BF16ToF32(static_cast<const uint16_t*>(p)[i]); });
}

// Sum of products of signed bytes x*y via vpdpbusd (|x| unsigned times y with x's sign).
inline __m256 MulSumI8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy));
}

float DotQ8_0(int64_t n, const void* w, const void* x) {
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t blk = 0; blk < n / kQK8_0; ++blk) {
    const __m256 d = _mm256_set1_ps(H2F(a[blk].d) * H2F(b[blk].d));
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qs));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[blk].qs));
    acc = _mm256_fmadd_ps(d, MulSumI8(qa, qb), acc);
  }
  return Hsum256(acc);
}

float DotQ4_0(int64_t n, const void* w, const void* x) {
  const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int64_t blk = 0; blk < n / kQK4_0; ++blk) {
    const __m256 d = _mm256_set1_ps(H2F(a[blk].d) * H2F(b[blk].d));
    const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[blk].qs));
    // Unsigned nibbles 0..15 times y, minus 8 * sum(y): no sign trick needed.
    const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp), mask);
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[blk].qs));
    const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, qb);
    const __m256i ysum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(8), qb);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(dot, ysum)), acc);
  }
  return Hsum256(acc);
}

float DotQ4_K(int64_t n, const void* w, const void* x) {
  const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  // For pair p (sub-blocks 2p, 2p+1): int16 lanes 0-15 take scale 2p, 16-31 scale 2p+1.
  __m512i scale_index[4];
  for (int pair = 0; pair < 4; ++pair) {
    scale_index[pair] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(
                                               static_cast<int16_t>(2 * pair))),
                                           _mm256_set1_epi16(static_cast<int16_t>(2 * pair + 1)), 1);
  }
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    alignas(16) uint8_t sc[8], m[8];
    Q4KScalesMins(a[blk].scales, sc, m);
    const __m128i bs0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[blk].bsums));
    const __m128i bs1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[blk].bsums + 8));
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const __m128i prod_m = _mm_madd_epi16(mins16, _mm_hadd_epi16(bs0, bs1));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(b[blk].d * H2F(a[blk].dmin)), _mm_cvtepi32_ps(prod_m), acc_m);
    const __m512i scales = _mm512_castsi128_si512(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    __m512i sumi = _mm512_setzero_si512();
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qs + 32 * pair));
      const __m256i lo = _mm256_and_si256(q4, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask);
      const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      const __m512i y = _mm512_loadu_si512(b[blk].qs + 64 * pair);
      const __m512i scale = _mm512_permutexvar_epi16(scale_index[pair], scales);
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q, y), scale));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(b[blk].d * H2F(a[blk].d)), _mm512_cvtepi32_ps(sumi), acc);
  }
  __m128 m4 = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
  return _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(m4);
}

float DotQ6_K(int64_t n, const void* w, const void* x) {
  const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  const __m512i m0f = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  // Per 256-bit half of a 512-bit register: shift the high-bit byte so that the
  // 2 bits of quadrant 0/1 (2/3) land on bits 4-5.
  const __m512i shl01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i shr23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  // int16 lane l of a maddubs result covers elements 2l, 2l+1: scale group l / 8.
  __m512i scale_index[4];
  for (int part = 0; part < 4; ++part) {
    alignas(64) int16_t idx[32];
    for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(4 * part + l / 8);
    scale_index[part] = _mm512_load_si512(idx);
  }
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_off = _mm256_setzero_ps();
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    const float d = b[blk].d * H2F(a[blk].d);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[blk].scales)));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[blk].bsums));
    acc_off = _mm256_fmadd_ps(_mm256_set1_ps(32.0f * d),
                              _mm256_cvtepi32_ps(_mm256_madd_epi16(sc16, bsums)), acc_off);
    const __m512i scales = _mm512_castsi256_si512(sc16);
    __m512i sumi = _mm512_setzero_si512();
    for (int half = 0; half < 2; ++half) {
      const __m512i ql = _mm512_loadu_si512(a[blk].ql + 64 * half);
      const __m256i qh256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qh + 32 * half));
      const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh256), qh256, 1);
      const __m512i q01 = _mm512_or_si512(_mm512_and_si512(ql, m0f),
                                          _mm512_and_si512(_mm512_sllv_epi16(qh, shl01), m30));
      const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m0f),
                                          _mm512_and_si512(_mm512_srlv_epi16(qh, shr23), m30));
      const int8_t* y = b[blk].qs + 128 * half;
      const __m512i s01 = _mm512_permutexvar_epi16(scale_index[2 * half], scales);
      const __m512i s23 = _mm512_permutexvar_epi16(scale_index[2 * half + 1], scales);
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(
                                        _mm512_maddubs_epi16(q01, _mm512_loadu_si512(y)), s01));
      sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(
                                        _mm512_maddubs_epi16(q23, _mm512_loadu_si512(y + 64)), s23));
    }
    acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
  }
  return _mm512_reduce_add_ps(acc) - Hsum256(acc_off);
}

void Dot4Q8_0(int64_t n, const void* w, const void* xv, int64_t stride, float* out) {
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* b[4];
  for (int j = 0; j < 4; ++j) {
    b[j] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(xv) + j * stride);
  }
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t blk = 0; blk < n / kQK8_0; ++blk) {
    const float dw = H2F(a[blk].d);
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qs));
    const __m256i ax = _mm256_sign_epi8(qa, qa);
    for (int j = 0; j < 4; ++j) {
      const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[j][blk].qs));
      const __m256i dot = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, _mm256_sign_epi8(qb, qa));
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * H2F(b[j][blk].d)), _mm256_cvtepi32_ps(dot), acc[j]);
    }
  }
  for (int j = 0; j < 4; ++j) out[j] = Hsum256(acc[j]);
}

void Dot4Q4_K(int64_t n, const void* w, const void* xv, int64_t stride, float* out) {
  const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* b[4];
  for (int j = 0; j < 4; ++j) {
    b[j] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(xv) + j * stride);
  }
  const __m256i mask = _mm256_set1_epi8(0x0F);
  __m512i scale_index[4];
  for (int pair = 0; pair < 4; ++pair) {
    scale_index[pair] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16(
                                               static_cast<int16_t>(2 * pair))),
                                           _mm256_set1_epi16(static_cast<int16_t>(2 * pair + 1)), 1);
  }
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
  __m128 acc_m[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    alignas(16) uint8_t sc[8], m[8];
    Q4KScalesMins(a[blk].scales, sc, m);
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const __m512i scales = _mm512_castsi128_si512(
        _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    __m512i q[4], scale[4];
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qs + 32 * pair));
      q[pair] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_and_si256(q4, mask)),
                                   _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask), 1);
      scale[pair] = _mm512_permutexvar_epi16(scale_index[pair], scales);
    }
    const float dw = H2F(a[blk].d), dminw = H2F(a[blk].dmin);
    for (int j = 0; j < 4; ++j) {
      const BlockQ8_K& y = b[j][blk];
      const __m128i bs0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums));
      const __m128i bs1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y.bsums + 8));
      const __m128i prod_m = _mm_madd_epi16(mins16, _mm_hadd_epi16(bs0, bs1));
      acc_m[j] = _mm_fmadd_ps(_mm_set1_ps(y.d * dminw), _mm_cvtepi32_ps(prod_m), acc_m[j]);
      __m512i sumi = _mm512_setzero_si512();
      for (int pair = 0; pair < 4; ++pair) {
        const __m512i yq = _mm512_loadu_si512(y.qs + 64 * pair);
        sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q[pair], yq),
                                                        scale[pair]));
      }
      acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(y.d * dw), _mm512_cvtepi32_ps(sumi), acc[j]);
    }
  }
  for (int j = 0; j < 4; ++j) {
    __m128 m4 = _mm_add_ps(acc_m[j], _mm_movehl_ps(acc_m[j], acc_m[j]));
    m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
    out[j] = _mm512_reduce_add_ps(acc[j]) - _mm_cvtss_f32(m4);
  }
}


// Register-tiled matrix products (GemmTileFn): R weight rows times C activation rows
// per pass over the row, so each weight vector and each activation vector is loaded
// once per tile instead of once per product. Each element keeps one accumulator
// (16 lanes, 16 values per step, a masked last step for the tail) and one final
// reduction: its arithmetic does not depend on R or C, hence not on the batch.
// Reading R weight rows side by side defeats the hardware prefetcher (decode is bound
// by memory): while a tile runs, each step prefetches its share of the rows of the
// tile kPrefetchTiles ahead (tiles follow each other in memory). Measured on the 125M
// bench models (F16, Q8_0), 1 and 2 threads: 1 tile ahead loses a third of the decode
// speed of one-row dot products, 3 to 4 tiles ahead win it back, 6 is worse again.
constexpr int64_t kPrefetchTiles = 4;
struct NextTilePrefetch {
  SINEW_ALWAYS_INLINE NextTilePrefetch(const uint8_t* tile_end, int64_t bytes, int64_t steps)
      : at(tile_end), end(tile_end + bytes), per_step((bytes / 64 + steps) / std::max<int64_t>(steps, 1)) {}
  SINEW_ALWAYS_INLINE void Step() {
    for (int64_t l = 0; l < per_step && at < end; ++l, at += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T0);
    }
  }
  const uint8_t* at;
  const uint8_t* end;
  int64_t per_step;
};

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
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1);
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
  SINEW_UNROLL
  for (int c = 0; c < C; ++c) {
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) out[c * os + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
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
  return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs)));
}

// Q8_0 weights times Q8_0 activations in tile_q8_0's layout (Q8TileActRowBytes).
// vpdpbusd multiplies unsigned by signed bytes: the activations come offset to
// unsigned (q + 128) and each weight block's 128 * sum(w) starts its accumulator
// negative, so the integer dot product of two block pairs is exact in one instruction.
template <int R, int C>
SINEW_ALWAYS_INLINE void Q8Step(const BlockQ8_0* const (&wb)[R], const uint8_t* const (&xp)[C],
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

template <int R, int C>
SINEW_ALWAYS_INLINE void Q8Tile(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs,
                                float* out, int64_t os) {
  const BlockQ8_0* wb[R];
  const uint8_t* xp[C];
  SINEW_UNROLL
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const BlockQ8_0*>(w + r * ws);
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
  SINEW_UNROLL
  for (int c = 0; c < C; ++c) {
    SINEW_UNROLL
    for (int r = 0; r < R; ++r) out[c * os + r] = _mm512_reduce_add_ps(acc[r][c]);
  }
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

// Dispatches a runtime (rows_w, rows_x) in 1..4 to the template instance.
template <template <int, int> class Kernel>
void DispatchTile(int64_t n, const void* w, int64_t ws, int rows_w, const void* x, int64_t xs,
                  int rows_x, float* out, int64_t os) {
  using Fn = void (*)(int64_t, const uint8_t*, int64_t, const uint8_t*, int64_t, float*, int64_t);
  static constexpr Fn kTable[4][4] = {
      {Kernel<1, 1>::Run, Kernel<1, 2>::Run, Kernel<1, 3>::Run, Kernel<1, 4>::Run},
      {Kernel<2, 1>::Run, Kernel<2, 2>::Run, Kernel<2, 3>::Run, Kernel<2, 4>::Run},
      {Kernel<3, 1>::Run, Kernel<3, 2>::Run, Kernel<3, 3>::Run, Kernel<3, 4>::Run},
      {Kernel<4, 1>::Run, Kernel<4, 2>::Run, Kernel<4, 3>::Run, Kernel<4, 4>::Run}};
  kTable[rows_w - 1][rows_x - 1](n, static_cast<const uint8_t*>(w), ws, static_cast<const uint8_t*>(x),
                                 xs, out, os);
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
template <int R, int C>
struct TileQ8_0 {
  static void Run(int64_t n, const uint8_t* w, int64_t ws, const uint8_t* x, int64_t xs, float* out,
                  int64_t os) {
    Q8Tile<R, C>(n, w, ws, x, xs, out, os);
  }
};

}  // namespace

void FillAvx512Kernels(KernelTable* t) {
  t->dot_f32 = DotF32;
  t->dot_f16 = DotF16;
  t->dot_bf16 = DotBF16;
  t->dot_q8_0 = DotQ8_0;
  t->dot_q4_0 = DotQ4_0;
  t->dot_q4_k = DotQ4_K;
  t->dot_q6_k = DotQ6_K;
  t->dot4_f32 = Dot4F32;
  t->dot4_f16 = Dot4F16;
  t->dot4_bf16 = Dot4BF16;
  t->dot4_q8_0 = Dot4Q8_0;
  t->dot4_q4_k = Dot4Q4_K;
  t->tile_f32 = DispatchTile<TileF32>;
  t->tile_f16 = DispatchTile<TileF16>;
  t->tile_bf16 = DispatchTile<TileBF16>;
  t->tile_q8_0 = DispatchTile<TileQ8_0>;
  t->quantize_q8_0_tile = QuantizeQ8_0Tile;
  FillAvx512AttentionKernels(t);
}

}  // namespace sinew::model::cpu
