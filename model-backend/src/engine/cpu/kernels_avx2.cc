// AVX2/FMA/F16C kernels. Compiled with -mavx2 -mfma -mf16c; only reached after
// CpuHasAvx2() said yes. Internal linkage throughout (see quants.h).
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
inline __m256 LoadBF16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
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

// Four activation rows, two at a time (AVX2 has 16 vector registers): each
// weight vector is loaded (and converted) once per pair. Every row sees exactly
// the arithmetic of Dot (same accumulators, same order of additions), so a
// row's result does not depend on whether it went through Dot or Dot4: matrix
// products are batch invariant without padding the rows.
template <typename Load, typename Scalar>
inline void Dot4(int64_t n, const void* w, const void* xv, int64_t stride, float* out, Load load,
                 Scalar scalar) {
  for (int pair = 0; pair < 2; ++pair) {
    const float* x[2];
    for (int j = 0; j < 2; ++j) {
      x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(xv) +
                                            (2 * pair + j) * stride);
    }
    __m256 acc[2][4];
    for (int j = 0; j < 2; ++j) {
      for (int a = 0; a < 4; ++a) acc[j][a] = _mm256_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const __m256 w0 = load(w, i), w1 = load(w, i + 8), w2 = load(w, i + 16), w3 = load(w, i + 24);
      for (int j = 0; j < 2; ++j) {
        acc[j][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[j] + i), acc[j][0]);
        acc[j][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[j] + i + 8), acc[j][1]);
        acc[j][2] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x[j] + i + 16), acc[j][2]);
        acc[j][3] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x[j] + i + 24), acc[j][3]);
      }
    }
    for (; i + 8 <= n; i += 8) {
      const __m256 wv = load(w, i);
      for (int j = 0; j < 2; ++j) {
        acc[j][0] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + i), acc[j][0]);
      }
    }
    float* o = out + 2 * pair;
    for (int j = 0; j < 2; ++j) {
      o[j] = Hsum(_mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]),
                                _mm256_add_ps(acc[j][2], acc[j][3])));
    }
    for (; i < n; ++i) {
      const float wi = scalar(w, i);
      for (int j = 0; j < 2; ++j) o[j] += wi * x[j][i];
    }
  }
}

void Dot4F32(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  Dot4(
      n, w, x, stride, out,
      [](const void* p, int64_t i) { return _mm256_loadu_ps(static_cast<const float*>(p) + i); },
      [](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; });
}

void Dot4F16(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  Dot4(
      n, w, x, stride, out,
      [](const void* p, int64_t i) { return LoadF16(static_cast<const uint16_t*>(p) + i); },
      [](const void* p, int64_t i) { return H2F(static_cast<const uint16_t*>(p)[i]); });
}

void Dot4BF16(int64_t n, const void* w, const void* x, int64_t stride, float* out) {
  Dot4(
      n, w, x, stride, out,
      [](const void* p, int64_t i) { return LoadBF16(static_cast<const uint16_t*>(p) + i); },
      [](const void* p, int64_t i) { return BF16ToF32(static_cast<const uint16_t*>(p)[i]); });
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

float DotBF16(int64_t n, const void* w, const void* x) {
  return Dot(
      n, w, static_cast<const float*>(x),
      [](const void* p, int64_t i) { return LoadBF16(static_cast<const uint16_t*>(p) + i); },
      [](const void* p, int64_t i) { return BF16ToF32(static_cast<const uint16_t*>(p)[i]); });
}

// Sum of products of signed bytes, as 8 float lanes.
inline __m256 MulSumI8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  const __m256i dot16 = _mm256_maddubs_epi16(ax, sy);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(dot16, _mm256_set1_epi16(1)));
}

inline __m256i LoadQ4_0(const uint8_t* qs) {
  const __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i bytes = _mm256_set_m128i(_mm_srli_epi16(tmp, 4), tmp);
  return _mm256_sub_epi8(_mm256_and_si256(bytes, _mm256_set1_epi8(0x0F)), _mm256_set1_epi8(8));
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
  return Hsum(acc);
}

void Dot4Q8_0(int64_t n, const void* w, const void* xv, int64_t stride, float* out) {
  const BlockQ8_0* a = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* b[4];
  for (int j = 0; j < 4; ++j) {
    b[j] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(xv) + j * stride);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  for (int64_t blk = 0; blk < n / kQK8_0; ++blk) {
    const float dw = H2F(a[blk].d);
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qs));
    const __m256i ax = _mm256_sign_epi8(qa, qa);
    for (int j = 0; j < 4; ++j) {
      const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[j][blk].qs));
      const __m256i dot =
          _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(qb, qa)), ones);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * H2F(b[j][blk].d)), _mm256_cvtepi32_ps(dot),
                               acc[j]);
    }
  }
  for (int j = 0; j < 4; ++j) out[j] = Hsum(acc[j]);
}

float DotQ4_0(int64_t n, const void* w, const void* x) {
  const BlockQ4_0* a = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t blk = 0; blk < n / kQK4_0; ++blk) {
    const __m256 d = _mm256_set1_ps(H2F(a[blk].d) * H2F(b[blk].d));
    const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[blk].qs));
    acc = _mm256_fmadd_ps(d, MulSumI8(LoadQ4_0(a[blk].qs), qb), acc);
  }
  return Hsum(acc);
}

float DotQ4_K(int64_t n, const void* w, const void* x) {
  const BlockQ4_K* a = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_m = _mm_setzero_ps();
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    alignas(16) uint8_t sc[8], m[8];
    Q4KScalesMins(a[blk].scales, sc, m);
    // Mins: m[j] * (bsums[2j] + bsums[2j+1]), 4 int32 lanes.
    const __m128i bs0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[blk].bsums));
    const __m128i bs1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[blk].bsums + 8));
    const __m128i mins16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m)));
    const __m128i prod_m = _mm_madd_epi16(mins16, _mm_hadd_epi16(bs0, bs1));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(b[blk].d * H2F(a[blk].dmin)), _mm_cvtepi32_ps(prod_m), acc_m);
    __m256i sumi = _mm256_setzero_si256();
    for (int pair = 0; pair < 4; ++pair) {
      const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qs + 32 * pair));
      const __m256i lo = _mm256_and_si256(q4, mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q4, 4), mask);
      const __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[blk].qs + 64 * pair));
      const __m256i y_hi =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b[blk].qs + 64 * pair + 32));
      const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo),
                                             _mm256_set1_epi16(sc[2 * pair]));
      const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi),
                                             _mm256_set1_epi16(sc[2 * pair + 1]));
      sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
    }
    const float d = b[blk].d * H2F(a[blk].d);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
  }
  __m128 m4 = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
  m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
  return Hsum(acc) - _mm_cvtss_f32(m4);
}

float DotQ6_K(int64_t n, const void* w, const void* x) {
  const BlockQ6_K* a = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(x);
  const __m256i m0f = _mm256_set1_epi8(0x0F);
  const __m256i m03 = _mm256_set1_epi8(0x03);
  const __m256i m0c = _mm256_set1_epi8(0x0C);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0;
  for (int64_t blk = 0; blk < n / kQKK; ++blk) {
    const float d = b[blk].d * H2F(a[blk].d);
    int32_t offset = 0;  // the -32 of every quant, through the activation block sums
    for (int g = 0; g < 16; ++g) offset += a[blk].scales[g] * b[blk].bsums[g];
    __m256i sumi = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = a[blk].ql + 64 * half;
      const int8_t* sc = a[blk].scales + 8 * half;
      const int8_t* y = b[blk].qs + 128 * half;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[blk].qh + 32 * half));
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(l0, m0f),
                             _mm256_slli_epi16(_mm256_and_si256(qh, m03), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(l1, m0f),
                             _mm256_slli_epi16(_mm256_and_si256(qh, m0c), 2));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m0f),
                             _mm256_and_si256(qh, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m0f),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      for (int quad = 0; quad < 4; ++quad) {
        const __m256i yq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * quad));
        const __m256i scale = _mm256_set_m128i(_mm_set1_epi16(sc[2 * quad + 1]),
                                               _mm_set1_epi16(sc[2 * quad]));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[quad], yq), scale));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    offsets += d * 32.0f * static_cast<float>(offset);
  }
  return Hsum(acc) - offsets;
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
  t->dot_bf16 = DotBF16;
  t->dot_q8_0 = DotQ8_0;
  t->dot_q4_0 = DotQ4_0;
  t->dot_q4_k = DotQ4_K;
  t->dot_q6_k = DotQ6_K;
  t->dot4_f32 = Dot4F32;
  t->dot4_f16 = Dot4F16;
  t->dot4_bf16 = Dot4BF16;
  t->dot4_q8_0 = Dot4Q8_0;
  t->axpy_f32 = AxpyF32;
  t->axpy_f16 = AxpyF16;
}

}  // namespace sinew::model::cpu
