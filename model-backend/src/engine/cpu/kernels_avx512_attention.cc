// AVX-512 kernels of the CPU attention over the V cache: AxpyFn for F32 and F16 values,
// and AttnValuesFn, which adds up to four value rows to a group of heads reading each
// row once. Compiled with the AVX-512 -m flags; reached through FillAvx512Kernels.
// GCC 12's own AVX-512 headers trip -Wmaybe-uninitialized (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "cpu/avx512_loads.h"
#include "cpu/kernels.h"

namespace sinew::model::cpu {
namespace {

void AxpyF32(int64_t n, float a, const void* x, float* y) {
  const float* v = static_cast<const float*>(x);
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(v + i), _mm512_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * v[i];
}

// Attention's values from an F16 cache: one FMA per element, as AxpyF32.
void AxpyF16(int64_t n, float a, const void* x, float* y) {
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, LoadF16x16(x, i), _mm512_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * ScalarF16(x, i);
}

// AttnValuesFn over `Load` (16 floats from element i of a value row) and `Scalar` (one):
// per 16 elements, the value rows are loaded once and each head's accumulator takes
// them in row order with one FMA each, as AxpyF16/AxpyF32 row after row; the tail as
// their scalar tails.
template <typename Load, typename Scalar>
SINEW_ALWAYS_INLINE void AttnValues(int64_t n, const void* v, int64_t v_stride, int rows_v,
                                    const float* p, int64_t p_stride, int heads, float* o,
                                    int64_t o_stride, Load load, Scalar scalar) {
  const auto* base = static_cast<const uint8_t*>(v);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 rows[kTileRows];
    for (int j = 0; j < rows_v; ++j) rows[j] = load(base + j * v_stride, i);
    for (int g = 0; g < heads; ++g) {
      float* y = o + g * o_stride + i;
      __m512 acc = _mm512_loadu_ps(y);
      for (int j = 0; j < rows_v; ++j) {
        acc = _mm512_fmadd_ps(_mm512_set1_ps(p[g * p_stride + j]), rows[j], acc);
      }
      _mm512_storeu_ps(y, acc);
    }
  }
  for (; i < n; ++i) {
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

}  // namespace

void FillAvx512AttentionKernels(KernelTable* t) {
  t->axpy_f32 = AxpyF32;
  t->axpy_f16 = AxpyF16;
  t->attn_values_f16 = AttnValuesF16;
  t->attn_values_f32 = AttnValuesF32;
}

}  // namespace sinew::model::cpu
