// AVX2/FMA/F16C kernels: the F32/F16 dot products and axpy that attention uses over
// caches the tiles do not take, and the table's AVX2 entries (the matrix-product tiles
// are in kernels_avx2_tiles.cc and kernels_avx2_kquants.cc). Compiled with -mavx2
// -mfma -mf16c; only reached after CpuHasAvx2() said yes. Internal linkage throughout
// (see quants.h).
#include <immintrin.h>

#include "cpu/kernels.h"
#include "quant/quants.h"

namespace sinew::model::cpu {
namespace {

// F16C scalar conversion (the portable F16ToF32 branches; this does not).
inline float H2F(uint16_t h) { return _cvtsh_ss(h); }

inline float Hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  __m128 sh = _mm_movehdup_ps(lo);
  lo = _mm_add_ps(lo, sh);
  sh = _mm_movehl_ps(sh, lo);
  return _mm_cvtss_f32(_mm_add_ss(lo, sh));
}

inline __m256 LoadF16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
template <typename Load, typename Scalar>
inline float Dot(int64_t n, const void* w, const float* x, Load load, Scalar scalar) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(load(w, i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load(w, i + 8), _mm256_loadu_ps(x + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(load(w, i + 16), _mm256_loadu_ps(x + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(load(w, i + 24), _mm256_loadu_ps(x + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load(w, i), _mm256_loadu_ps(x + i), acc0);
  float sum = Hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; i < n; ++i) sum += scalar(w, i) * x[i];
  return sum;
}

float DotF32(int64_t n, const void* w, const void* x) {
  return Dot(
      n, w, static_cast<const float*>(x),
      [](const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); },
      [](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; });
}

float DotF16(int64_t n, const void* w, const void* x) {
  return Dot(
      n, w, static_cast<const float*>(x),
      [](const void* p, int64_t i) { return LoadF16(static_cast<const uint16_t*>(p) + i); },
      [](const void* p, int64_t i) { return H2F(static_cast<const uint16_t*>(p)[i]); });
}

void AxpyF32(int64_t n, float a, const void* x, float* y) {
  const float* v = static_cast<const float*>(x);
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(v + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * v[i];
}

void AxpyF16(int64_t n, float a, const void* x, float* y) {
  const uint16_t* v = static_cast<const uint16_t*>(x);
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, LoadF16(v + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * H2F(v[i]);
}

}  // namespace

void FillAvx2Kernels(KernelTable* t) {
  t->dot_f32 = DotF32;
  t->dot_f16 = DotF16;
  t->axpy_f32 = AxpyF32;
  t->axpy_f16 = AxpyF16;
  FillAvx2TileKernels(t);
  FillAvx2KQuantKernels(t);
}

}  // namespace sinew::model::cpu
