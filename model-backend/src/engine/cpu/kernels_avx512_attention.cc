// AVX-512 kernels of the CPU attention: AxpyFn for F32 and F16 values; AttnValuesFn,
// which adds a run of value rows to a group of heads, reading each row once per four
// heads and keeping the heads' sums in registers across the run; and SoftmaxFn.
// Compiled with the AVX-512 -m flags; reached through FillAvx512Kernels.
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "cpu/avx512_loads.h"
#include "cpu/avx512_tile.h"
#include "cpu/kernels.h"

namespace sinew::model::cpu {
namespace {

// AxpyFn over `Load` (16 floats from element i of a row) and `Scalar` (one): one FMA
// per element.
template <typename Load, typename Scalar>
SINEW_ALWAYS_INLINE void Axpy(int64_t n, float a, const void* x, float* y, Load load,
                              Scalar scalar) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, load(x, i), _mm512_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * scalar(x, i);
}

void AxpyF32(int64_t n, float a, const void* x, float* y) {
  Axpy(n, a, x, y, LoadF32x16, ScalarF32);
}

// Attention's values from an F16 cache: one FMA per element, as AxpyF32.
void AxpyF16(int64_t n, float a, const void* x, float* y) {
  Axpy(n, a, x, y, LoadF16x16, ScalarF16);
}

// Up to four heads' accumulators (16 elements each) take RS value rows, row by row in
// key order, one FMA each; the rows are loaded once for all the heads.
template <int H, int RS, typename Load>
SINEW_ALWAYS_INLINE void AddRows(__m512 (&acc)[H], const uint8_t* rows, int64_t v_stride, int64_t i,
                                 const float* p, int64_t p_stride, Load load) {
  __m512 r[RS];
  SINEW_UNROLL
  for (int j = 0; j < RS; ++j) r[j] = load(rows + j * v_stride, i);
  SINEW_UNROLL
  for (int g = 0; g < H; ++g) {
    SINEW_UNROLL
    for (int j = 0; j < RS; ++j)
      acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(p[g * p_stride + j]), r[j], acc[g]);
  }
}

// H heads (H <= 4), every value row, the elements in steps of 16: each head's
// accumulator stays in a register across all the rows.
template <int H, typename Load>
SINEW_ALWAYS_INLINE void HeadsValues(int64_t n16, const uint8_t* v, int64_t v_stride, int rows_v,
                                     const float* p, int64_t p_stride, float* o, int64_t o_stride,
                                     Load load) {
  for (int64_t i = 0; i < n16; i += 16) {
    __m512 acc[H];
    SINEW_UNROLL
    for (int g = 0; g < H; ++g) acc[g] = _mm512_loadu_ps(o + g * o_stride + i);
    int j = 0;
    for (; j + 4 <= rows_v; j += 4)
      AddRows<H, 4>(acc, v + j * v_stride, v_stride, i, p + j, p_stride, load);
    switch (rows_v - j) {
      case 3:
        AddRows<H, 3>(acc, v + j * v_stride, v_stride, i, p + j, p_stride, load);
        break;
      case 2:
        AddRows<H, 2>(acc, v + j * v_stride, v_stride, i, p + j, p_stride, load);
        break;
      case 1:
        AddRows<H, 1>(acc, v + j * v_stride, v_stride, i, p + j, p_stride, load);
        break;
      default:
        break;
    }
    SINEW_UNROLL
    for (int g = 0; g < H; ++g) _mm512_storeu_ps(o + g * o_stride + i, acc[g]);
  }
}

// AttnValuesFn over `Load` (16 floats from element i of a value row) and `Scalar` (one):
// the heads four at a time, each head's accumulator taking the value rows in row order
// with one FMA each, as AxpyF16/AxpyF32 row after row; the tail as their scalar tails.
template <typename Load, typename Scalar>
SINEW_ALWAYS_INLINE void AttnValues(int64_t n, const void* v, int64_t v_stride, int rows_v,
                                    const float* p, int64_t p_stride, int heads, float* o,
                                    int64_t o_stride, Load load, Scalar scalar) {
  const auto* base = static_cast<const uint8_t*>(v);
  const int64_t n16 = n / 16 * 16;
  for (int g = 0; g < heads; g += 4) {
    const float* pg = p + g * p_stride;
    float* og = o + g * o_stride;
    switch (std::min(4, heads - g)) {
      case 4:
        HeadsValues<4>(n16, base, v_stride, rows_v, pg, p_stride, og, o_stride, load);
        break;
      case 3:
        HeadsValues<3>(n16, base, v_stride, rows_v, pg, p_stride, og, o_stride, load);
        break;
      case 2:
        HeadsValues<2>(n16, base, v_stride, rows_v, pg, p_stride, og, o_stride, load);
        break;
      default:
        HeadsValues<1>(n16, base, v_stride, rows_v, pg, p_stride, og, o_stride, load);
        break;
    }
  }
  for (int64_t i = n16; i < n; ++i) {
    for (int g = 0; g < heads; ++g) {
      for (int j = 0; j < rows_v; ++j) {
        o[g * o_stride + i] += p[g * p_stride + j] * scalar(base + j * v_stride, i);
      }
    }
  }
}

void AttnValuesF16(int64_t n, const void* v, int64_t v_stride, int rows_v, const float* p,
                   int64_t p_stride, int heads, float* o, int64_t o_stride) {
  AttnValues(n, v, v_stride, rows_v, p, p_stride, heads, o, o_stride, LoadF16x16, ScalarF16);
}

void AttnValuesF32(int64_t n, const void* v, int64_t v_stride, int rows_v, const float* p,
                   int64_t p_stride, int heads, float* o, int64_t o_stride) {
  AttnValues(n, v, v_stride, rows_v, p, p_stride, heads, o, o_stride, LoadF32x16, ScalarF32);
}

// e^x for x <= 0: 2^k * e^r with k = round(x / ln 2) and |r| <= ln 2 / 2, e^r by its
// Taylor polynomial to degree 7 (relative error below 1e-8 there, under a float's
// rounding), 2^k applied by scalef; below -88 the result is 0 or a denormal, as
// std::exp's.
SINEW_ALWAYS_INLINE __m512 ExpNonPositive(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-88.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - k ln 2, with ln 2 split so that k * the high part is exact.
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  for (const float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) {
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  }
  return _mm512_scalef_ps(p, k);
}

// SoftmaxFn, 16 scores at a time (a masked last step for the tail).
float Softmax(float* p, int64_t n, float scale) {
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 vmax = _mm512_set1_ps(-INFINITY);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = FirstLanes(n - j);
    const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), vscale);
    _mm512_mask_storeu_ps(p + j, m, s);
    vmax = _mm512_mask_max_ps(vmax, m, vmax, s);
  }
  const __m512 max_score = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = FirstLanes(n - j);
    const __m512 e = ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, p + j), max_score));
    _mm512_mask_storeu_ps(p + j, m, e);
    sum = _mm512_mask_add_ps(sum, m, sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

}  // namespace

void FillAvx512AttentionKernels(KernelTable* t) {
  t->softmax = Softmax;
  t->axpy_f32 = AxpyF32;
  t->axpy_f16 = AxpyF16;
  t->attn_values_f16 = AttnValuesF16;
  t->attn_values_f32 = AttnValuesF32;
}

}  // namespace sinew::model::cpu
